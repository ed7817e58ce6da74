// An independent UAMP 1.0 signer and verifier for agentry's interop test:
// RFC 8785 via the "canonicalize" package, JWS via "jose". It follows
// DESIGN §5 from the text, sharing no code with agentry:
//   canonical form = JCS of the envelope without "sig";
//   sig = detached compact JWS "<protected>..<signature>", protected header
//   {"alg","kid"}, payload = JCS of {"sha256": hex SHA-256 of the canonical form}.
//
//   node uamp.mjs sign   PRIVATE_JWK ENVELOPE   → the signed envelope on stdout
//   node uamp.mjs verify PUBLIC_JWK  ENVELOPE   → "ok", or exit 1 with the reason
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { CompactSign, compactVerify, importJWK, base64url } from 'jose';

const [mode, keyFile, envFile] = process.argv.slice(2);
const jwk = JSON.parse(readFileSync(keyFile, 'utf8'));
const env = JSON.parse(readFileSync(envFile, 'utf8'));

function signingPayload(envelope) {
  const { sig, ...unsigned } = envelope;
  const digest = createHash('sha256').update(canonicalize(unsigned), 'utf8').digest('hex');
  return new TextEncoder().encode(canonicalize({ sha256: digest }));
}

try {
  if (mode === 'sign') {
    const key = await importJWK(jwk, jwk.alg);
    const jws = await new CompactSign(signingPayload(env))
      .setProtectedHeader({ alg: jwk.alg, kid: jwk.kid })
      .sign(key);
    const [protectedHeader, , signature] = jws.split('.');
    env.sig = `${protectedHeader}..${signature}`;
    process.stdout.write(JSON.stringify(env) + '\n');
  } else if (mode === 'verify') {
    const parts = String(env.sig).split('.');
    if (parts.length !== 3 || parts[1] !== '') throw new Error('sig is not a detached compact JWS');
    const header = JSON.parse(new TextDecoder().decode(base64url.decode(parts[0])));
    if (header.kid !== jwk.kid) throw new Error(`kid ${header.kid} is not ${jwk.kid}`);
    if (Object.keys(header).sort().join(',') !== 'alg,kid') throw new Error('protected header is not exactly {alg, kid}');
    const key = await importJWK(jwk, jwk.alg);
    const attached = `${parts[0]}.${base64url.encode(signingPayload(env))}.${parts[2]}`;
    await compactVerify(attached, key, { algorithms: [jwk.alg] });
    process.stdout.write('ok\n');
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
} catch (err) {
  process.stdout.write(`fail: ${err.message}\n`);
  process.exit(1);
}
