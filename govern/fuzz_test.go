package govern_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/uaicpschema"
	jose "github.com/go-jose/go-jose/v4"
)

// addFileSeeds adds the upstream fixtures and the golden files whose
// names start with prefix.
func addFileSeeds(f *testing.F, fixturePrefix, goldenPrefix string) {
	f.Helper()
	a, _ := filepath.Glob(filepath.Join("..", "internal", "uaicpschema", "testdata", "fixtures", fixturePrefix+"*.json"))
	b, _ := filepath.Glob(filepath.Join("testdata", "golden", goldenPrefix+"*.json"))
	if len(a) == 0 || len(b) == 0 {
		f.Fatalf("no seed files for %s / %s", fixturePrefix, goldenPrefix)
	}
	for _, file := range append(a, b...) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// fuzzDecoder checks the properties of a strict decoder on arbitrary
// input b:
//   - it never panics, and refuses with a *DecodeError;
//   - what it accepts, the schema accepts (the decoder's extra rules only
//     ever refuse more);
//   - an accepted object re-encoded with encoding/json validates, decodes
//     back to itself (date-times at millisecond precision) and re-encodes
//     to the same bytes (checkRoundTrip).
func fuzzDecoder[T any](t *testing.T, b []byte, decode func([]byte) (*T, error), validate func([]byte) error) {
	x, err := decode(b)
	if err != nil {
		var de *govern.DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
		}
		if x != nil {
			t.Fatalf("decoded %+v along with an error", x)
		}
		return
	}
	if err := validate(b); err != nil {
		t.Fatalf("the decoder accepts what the schema refuses: %v\ninput: %q", err, b)
	}
	checkRoundTrip(t, x, decode, validate)
}

func FuzzDecodeEnvelope(f *testing.F) {
	addFileSeeds(f, "message-envelope", "envelope")
	for _, s := range []string{
		decEnvelope,
		decWith(f, decEnvelope, "timestamp", `"2016-12-31t23:59:60.5+01:00"`),
		decWith(f, decEnvelope, "timestamp", `"0000-01-01T00:00:00+00:01"`),
		decWith(f, decEnvelope, "streaming", `{"chunk_id":"c","is_final":true,"stream_index":-1.0e2,"x":{}}`),
		decWith(f, decEnvelope, "rollback_action", `{"type":"t","payload":{"a":[1,{"b":null}]}}`),
		decWith(f, decEnvelope, "metadata", `{"a":1e308,"b":"\u003c\ud800","c":[{}]}`),
		strings.Replace(decEnvelope, `"trace_id"`, `"Trace_ID"`, 1),
		strings.Replace(decEnvelope, `"outcome"`, `"state":"plan","outcome"`, 1),
		`{"identity":{"agent_id":"a","agent_id":"b"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecoder(t, b, govern.DecodeEnvelope, uaicpschema.ValidateEnvelope)
	})
}

func FuzzDecodeEvidence(f *testing.F) {
	addFileSeeds(f, "evidence-object", "evidence")
	for _, s := range []string{
		decEvidence,
		decWith(f, decEvidence, "payload", `{"<":">","n":[1e400,-0,0.1e-7]}`),
		decWith(f, decEvidence, "payload", `"\u2028&"`),
		decWith(f, decEvidence, "request_id", `"F47AC10B-58CC-4372-A567-0E02B2C3D479"`),
		decWith(f, decEvidence, "Source", `"x"`),
		`{"evidence_id":"e","payload":{"a":1,"a":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecoder(t, b, govern.DecodeEvidence, uaicpschema.ValidateEvidence)
	})
}

func FuzzDecodeReport(f *testing.F) {
	addFileSeeds(f, "verification-report", "report")
	for _, s := range []string{
		decReport,
		decWith(f, decReport, "checks", `[]`),
		decWith(f, decReport, "checks", `[{"check_id":"c","result":"skip","details":"","x":1}]`),
		decWith(f, decReport, "evidence_ids", `["a",""]`),
		decWith(f, decReport, "generated_at", `"2026-01-01T00:00:00.999999999-23:59"`),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecoder(t, b, govern.DecodeReport, uaicpschema.ValidateReport)
	})
}

// tokenFixture returns a keyring trusting one approver, a valid token of
// that approver and the instant at which it is valid.
func tokenFixture(t testing.TB) (kr *govern.Keyring, priv ed25519.PrivateKey, token string, now time.Time) {
	t.Helper()
	priv = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	kr = govern.NewKeyring()
	if _, err := kr.Add("human:alice", priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	now = time.Unix(1_800_000_000, 0)
	token, err := govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "human:alice", Audience: govern.TokenAudience, ID: "jti-1",
		IssuedAt: now.Unix() - 60, Expiry: now.Unix() + 3600, Binding: govern.Binding{ApprovalID: "ap-1", RequestID: goldenRequestID,
			TraceID: goldenTraceID, Tool: "payments.refund", Tier: "write_high_risk", ArgsHash: "sha256:a", RollbackHash: "sha256:b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Verify(token, now); err != nil {
		t.Fatal(err)
	}
	return kr, priv, token, now
}

// forgeToken returns a compact JWS of payload under a protected header
// with alg, signed by sign (nil: an empty signature).
func forgeToken(header map[string]any, payload string, sign func(input []byte) []byte) string {
	h, _ := json.Marshal(header)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	var sig []byte
	if sign != nil {
		sig = sign([]byte(input))
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// tokenSeeds returns tokens that must all be refused: the valid token
// truncated, mutated, re-spelled, and re-signed under other algorithms.
func tokenSeeds(t testing.TB, priv ed25519.PrivateKey, valid string) []string {
	parts := strings.Split(valid, ".")
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	pb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var header map[string]any
	if err := json.Unmarshal(hb, &header); err != nil {
		t.Fatal(err)
	}
	kid := header["kid"]
	pub := priv.Public().(ed25519.PublicKey)
	seeds := []string{
		"", ".", "..", "...", valid[:len(valid)-1], valid[:len(valid)/2], valid + "x", valid + ".", valid + "=", valid + "==",
		valid + "\n", " " + valid, valid[:20] + "\r\n" + valid[20:],
		parts[0] + "." + parts[1] + ".", // no signature
		parts[0] + ".." + parts[2],      // detached payload
		strings.ToUpper(valid[:1]) + valid[1:],
	}
	// The unused low bits of each segment's last character.
	for i, p := range parts {
		last := p[len(p)-1]
		idx := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", last)
		q := slices.Clone(parts)
		q[i] = p[:len(p)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[idx^1])
		seeds = append(seeds, strings.Join(q, "."))
	}
	// One byte of each segment flipped.
	for i := range parts {
		q := slices.Clone(parts)
		b, _ := base64.RawURLEncoding.DecodeString(q[i])
		b[len(b)/2] ^= 0x01
		q[i] = base64.RawURLEncoding.EncodeToString(b)
		seeds = append(seeds, strings.Join(q, "."))
	}
	// Edited claims under the original signature.
	edited := strings.Replace(string(pb), `"human:alice"`, `"human:mallory"`, 1)
	seeds = append(seeds, parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(edited))+"."+parts[2])
	// alg none, and HS256 keyed with the public key (algorithm confusion).
	seeds = append(seeds, forgeToken(map[string]any{"alg": "none", "kid": kid, "typ": "JWT"}, string(pb), nil))
	seeds = append(seeds, forgeToken(map[string]any{"alg": "none"}, string(pb), nil))
	if signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(pub)}, (&jose.SignerOptions{}).WithHeader("kid", kid)); err == nil {
		if jws, err := signer.Sign(pb); err == nil {
			s, _ := jws.CompactSerialize()
			seeds = append(seeds, s)
		}
	}
	// ES256 with a key of its own under the trusted kid.
	if ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err == nil {
		if signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ek}, (&jose.SignerOptions{}).WithHeader("kid", kid)); err == nil {
			if jws, err := signer.Sign(pb); err == nil {
				s, _ := jws.CompactSerialize()
				seeds = append(seeds, s)
			}
		}
	}
	// EdDSA by an untrusted key claiming the trusted kid.
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
	seeds = append(seeds, forgeToken(header, string(pb), func(in []byte) []byte { return ed25519.Sign(other, in) }))
	// A header with a duplicate alg member, correctly signed.
	dup := `{"alg":"EdDSA","alg":"none","kid":"` + kid.(string) + `"}`
	in := base64.RawURLEncoding.EncodeToString([]byte(dup)) + "." + parts[1]
	seeds = append(seeds, in+"."+base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in))))
	// Claims with duplicate members, correctly signed.
	dupClaims := strings.Replace(string(pb), `"aud":`, `"iss":"human:alice","aud":`, 1)
	in = parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(dupClaims))
	seeds = append(seeds, in+"."+base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in))))
	// JSON serialization instead of compact.
	seeds = append(seeds, `{"protected":"`+parts[0]+`","payload":"`+parts[1]+`","signature":"`+parts[2]+`"}`)
	return seeds
}

// TestApprovalTokenOneSpelling checks the token seeds directly: only the
// exact valid token verifies. Base64 decoding skips line breaks and
// ignores the unused bits of a segment's last character, so before
// Keyring.Verify required the canonical spelling, 15 re-spellings of the
// last character and any line break verified.
func TestApprovalTokenOneSpelling(t *testing.T) {
	kr, priv, valid, now := tokenFixture(t)
	for _, tok := range tokenSeeds(t, priv, valid) {
		if tok == valid {
			t.Fatalf("seed equals the valid token")
		}
		if _, err := kr.Verify(tok, now); err == nil {
			t.Errorf("Verify accepted %q", tok)
		} else if !errors.Is(err, govern.ApprovalInvalid) {
			t.Errorf("Verify(%q) = %v, want APPROVAL_INVALID", tok, err)
		}
	}
}

// FuzzApprovalToken feeds arbitrary strings to Keyring.Verify: it never
// panics, refuses with APPROVAL_INVALID, and accepts nothing but the
// exact valid token.
func FuzzApprovalToken(f *testing.F) {
	kr, priv, valid, now := tokenFixture(f)
	f.Add(valid)
	for _, s := range tokenSeeds(f, priv, valid) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		claims, err := kr.Verify(tok, now)
		if err != nil {
			if claims != nil || !errors.Is(err, govern.ApprovalInvalid) {
				t.Fatalf("Verify(%q) = %v, %v", tok, claims, err)
			}
			return
		}
		if tok != valid {
			t.Fatalf("Verify accepted %q, which is not the valid token", tok)
		}
		if claims.ID != "jti-1" || claims.Issuer != "human:alice" {
			t.Fatalf("claims %+v", claims)
		}
	})
}
