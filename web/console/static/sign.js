// Approval tokens signed in the browser (docs/governance.md, "Approving
// from the console"): the approver's private key is read from their key
// file into a non-extractable WebCrypto key, which signs an EdDSA compact
// JWS of the same claims `agentry approve` signs. The key never leaves
// the page, and the page signs only what it checked: the approval
// request's args_hash and rollback_hash must be the hashes (SHA-256 of
// the RFC 8785 canonical JSON) of the arguments and the rollback it
// shows.

const enc = new TextEncoder();

// canonical is the RFC 8785 (JCS) form of a JSON value: members sorted by
// their UTF-16 code units, numbers and strings as ECMAScript writes them
// (which is how JCS defines them).
export function canonical(v) {
  if (v === null || typeof v !== "object") {
    if (typeof v === "number" && !Number.isFinite(v)) throw new Error("not a JSON number");
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  return "{" + Object.keys(v).sort().filter((k) => v[k] !== undefined)
    .map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

function b64url(bytes) {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

// payloadHash is govern.PayloadHash: "sha256:" + hex of the canonical form.
export async function payloadHash(v) {
  return "sha256:" + hex(await crypto.subtle.digest("SHA-256", enc.encode(canonical(v === undefined ? null : v))));
}

// available reports whether this browser can sign here: WebCrypto exists
// only in secure contexts (HTTPS, or localhost), and Ed25519 only in
// recent browsers.
export function available() {
  return !!(globalThis.isSecureContext && crypto && crypto.subtle);
}

// loadKey reads an approver key file ({"approver", "jwk"} as `agentry
// keys create` writes it) into a signing key.
export async function loadKey(text) {
  let file;
  try { file = JSON.parse(text); } catch { throw new Error("the file is not JSON"); }
  const jwk = file && file.jwk;
  if (!file || typeof file.approver !== "string" || !file.approver || !jwk) throw new Error('not an approver key file: {"approver", "jwk"} expected');
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string" || typeof jwk.d !== "string") {
    throw new Error("the key is not a private Ed25519 JWK (kty OKP, crv Ed25519, with d)");
  }
  let key;
  try {
    key = await crypto.subtle.importKey("jwk", {kty: "OKP", crv: "Ed25519", x: jwk.x, d: jwk.d}, {name: "Ed25519"}, false, ["sign"]);
  } catch (e) {
    throw new Error("this browser cannot use the key (WebCrypto Ed25519): " + e.message);
  }
  // The kid is the RFC 7638 thumbprint of the public key, as the
  // governor's keyring names it.
  const kid = b64url(await crypto.subtle.digest("SHA-256", enc.encode(canonical({crv: "Ed25519", kty: "OKP", x: jwk.x}))));
  return {approver: file.approver, kid, key};
}

// checkRequest verifies that req's hashes are those of what it carries.
export async function checkRequest(req) {
  if ((await payloadHash(req.args)) !== req.args_hash) {
    throw new Error("args_hash is not the hash of the arguments shown: not signing");
  }
  const rb = req.rollback_action ? await payloadHash(req.rollback_action) : "";
  if (rb !== (req.rollback_hash || "")) {
    throw new Error("rollback_hash is not the hash of the rollback shown: not signing");
  }
}

// signApproval returns an approval token for req signed by k, valid for
// ttlSeconds (15 minutes by default, as agentry approve).
export async function signApproval(k, req, ttlSeconds = 900) {
  await checkRequest(req);
  const now = Math.floor(Date.now() / 1000);
  const header = {alg: "EdDSA", kid: k.kid, typ: "JWT"};
  const claims = {
    iss: k.approver, aud: "uaicp-approval", jti: crypto.randomUUID(), iat: now, exp: now + ttlSeconds,
    uaicp: {
      approval_id: req.approval_id, request_id: req.request_id, trace_id: req.trace_id, tool: req.tool,
      tier: req.tier, args_hash: req.args_hash, rollback_hash: req.rollback_hash || "", attempt: req.attempt || 0,
    },
  };
  const input = b64url(enc.encode(JSON.stringify(header))) + "." + b64url(enc.encode(JSON.stringify(claims)));
  const sig = await crypto.subtle.sign({name: "Ed25519"}, k.key, enc.encode(input));
  return input + "." + b64url(sig);
}
