package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestUAMP_6_3_VerifyUnsigned: agentry uamp verify answers an envelope
// whose sig is absent, empty or not a string with 4.01 (§6.3: every
// envelope must carry sig), as every binding does, and a malformed one
// with 4.00.
func TestUAMP_6_3_VerifyUnsigned(t *testing.T) {
	dir := t.TempDir()
	priv := filepath.Join(dir, "key.jwk")
	if code, _, errs := runCLI(t, "", "uamp", "keygen", "--alg", "EdDSA", "--kid", "k-1", "--out", priv); code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errs)
	}
	ask := `{"from":"did:web:a.example","to":["did:web:b.example"],"intent":"ask","body":{"type":"text/plain","content":"2+2"}}`
	code, signed, errs := runCLI(t, ask, "uamp", "sign", "--key", priv)
	if code != 0 {
		t.Fatalf("sign: exit %d: %s", code, errs)
	}
	without := func(sig any) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(signed), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "sig")
		if sig != nil {
			m["sig"] = sig
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"signed", signed, "ok\n"},
		{"no sig", without(nil), "4.01 the envelope has no sig: every envelope must be signed (§6.3)\n"},
		{"empty sig", without(""), "4.01 the envelope's sig is empty: every envelope must be signed (§6.3)\n"},
		{"sig not a string", without(map[string]any{"alg": "none"}), "4.01 the envelope's sig is not a string: it must be a detached JWS (§6.3)\n"},
		{"no sig, no intent", strings.Replace(without(nil), `"intent":"ask",`, ``, 1), "4.00 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.in, "uamp", "verify", "--keys", priv)
			if !strings.HasPrefix(out, tc.want) || (code == 0) != (tc.want == "ok\n") {
				t.Errorf("verify: exit %d: %q%s, want %q", code, out, errs, tc.want)
			}
		})
	}
}
