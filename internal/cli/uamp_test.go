package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUAMPKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	for _, alg := range []string{"EdDSA", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			priv := filepath.Join(dir, alg+".jwk")
			code, pub, errs := runCLI(t, "", "uamp", "keygen", "--alg", alg, "--kid", "k-"+alg, "--out", priv)
			if code != 0 {
				t.Fatalf("keygen: exit %d: %s", code, errs)
			}
			var jwk map[string]any
			if err := json.Unmarshal([]byte(pub), &jwk); err != nil || jwk["kid"] != "k-"+alg || jwk["alg"] != alg || jwk["d"] != nil {
				t.Fatalf("public JWK %s (%v)", pub, err)
			}
			if fi, err := os.Stat(priv); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("private key file: %v %v", fi, err)
			}
			if code, _, errs := runCLI(t, "", "uamp", "keygen", "--alg", alg, "--out", priv); code != 1 || !strings.Contains(errs, "exists") {
				t.Errorf("keygen over an existing key: exit %d: %s", code, errs)
			}
			pubFile := filepath.Join(dir, alg+".pub.jwk")
			os.WriteFile(pubFile, []byte(pub), 0o600)

			ask := `{"from":"did:web:a.example","to":["did:web:b.example"],"intent":"ask","body":{"type":"text/plain","content":"2+2"},"ext":{"x":{"y":1}}}`
			code, signed, errs := runCLI(t, ask, "uamp", "sign", "--key", priv)
			if code != 0 {
				t.Fatalf("sign: exit %d: %s", code, errs)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(signed), &m); err != nil || m["id"] == nil || m["ts"] == nil || !strings.Contains(m["sig"].(string), "..") {
				t.Fatalf("signed envelope %s (%v)", signed, err)
			}
			if code, out, errs := runCLI(t, signed, "uamp", "verify", "--keys", pubFile); code != 0 || out != "ok\n" {
				t.Errorf("verify: exit %d: %s%s", code, out, errs)
			}
			// The private JWK stands for its public half; a JWK set works too.
			if code, out, _ := runCLI(t, signed, "uamp", "verify", "--keys", priv, "-"); code != 0 || out != "ok\n" {
				t.Errorf("verify with the private JWK: exit %d: %s", code, out)
			}
			set := filepath.Join(dir, alg+".jwks")
			os.WriteFile(set, []byte(`{"keys":[`+strings.TrimSpace(pub)+`]}`), 0o600)
			if code, out, _ := runCLI(t, signed, "uamp", "verify", "--keys", set); code != 0 || out != "ok\n" {
				t.Errorf("verify with a JWK set: exit %d: %s", code, out)
			}
			for name, bad := range map[string]string{
				"ext changed":  strings.Replace(signed, `"y":1`, `"y":2`, 1),
				"body changed": strings.Replace(signed, `"2+2"`, `"2+3"`, 1),
			} {
				if code, out, _ := runCLI(t, bad, "uamp", "verify", "--keys", pubFile); code != 1 || !strings.HasPrefix(out, "4.01 ") {
					t.Errorf("%s: exit %d: %s", name, code, out)
				}
			}
			dup := strings.Replace(signed, `"intent":"ask"`, `"intent":"ask","intent":"ask"`, 1)
			if code, out, _ := runCLI(t, dup, "uamp", "verify", "--keys", pubFile); code != 1 || !strings.HasPrefix(out, "4.00 ") {
				t.Errorf("duplicate member: exit %d: %s", code, out)
			}
		})
	}
	if code, _, _ := runCLI(t, "", "uamp", "keygen"); code != 2 {
		t.Errorf("keygen without --out: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "", "uamp", "keygen", "--alg", "RS256", "--out", filepath.Join(dir, "x")); code != 2 {
		t.Errorf("keygen --alg RS256: exit %d, want 2", code)
	}
	if code, _, errs := runCLI(t, `{"from":"a","from":"b"}`, "uamp", "sign", "--key", filepath.Join(dir, "EdDSA.jwk")); code != 1 || !strings.HasPrefix(errs, "4.00 ") {
		t.Errorf("sign of a duplicate member: exit %d: %s", code, errs)
	}
}
