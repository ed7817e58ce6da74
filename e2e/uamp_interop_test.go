package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/internal/peertest"
)

// interopScript is the independent UAMP implementation (Node.js, the npm
// packages jose and canonicalize) that .ci/run installs.
const interopScript = "interop/uamp.mjs"

// requireInterop skips the test when Node.js or the npm packages are
// missing — unless AGENTRY_REQUIRE_INTEROP is set, as .ci/run sets it,
// where their absence fails the test.
func requireInterop(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		for _, m := range []string{"jose", "canonicalize"} {
			if _, err = os.Stat(filepath.Join("interop", "node_modules", m, "package.json")); err != nil {
				break
			}
		}
	}
	if err != nil {
		peertest.Missing(t, "AGENTRY_REQUIRE_INTEROP", "the Node.js interop peer is not installed (npm ci --prefix e2e/interop): "+err.Error())
	}
	return node
}

// runNode runs the interop script and returns its exit code and stdout.
func runNode(t *testing.T, node string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(node, append([]string{interopScript}, args...)...)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatalf("node: %v", err)
	}
	return 0, out.String()
}

// interopEnvelope exercises what canonicalization must agree on: member
// order, non-ASCII and escaped text, nested objects and arrays, numbers
// in several spellings.
const interopEnvelope = `{
  "ts": "2026-11-22T10:00:00.000Z", "id": "urn:uuid:5b0e6a9e-8f0e-4c1a-9d57-3e4a2b1c0d9f",
  "from": "did:web:client.example", "to": ["did:web:calc.example", "did:web:audit.example"],
  "intent": "ask", "delta_window": 16,
  "body": {"type": "text/plain", "content": "Grüße, 🙂 \u2028 \"quoted\" \\ tab\t", "encoding": "utf-8"},
  "ext": {"z": [1, 2.5, 1e3, -0.0001, true, null], "a": {"nested": {"k": "v", "émoji": "🚀"}}, "n": 100}
}`

// TestUAMP_6_3_InteropWithJose: envelopes signed by an independent
// implementation (jose + canonicalize on Node.js) verify with
// `agentry uamp verify`, envelopes `agentry uamp sign` produced verify
// there, for both algorithms; a changed body.content or ext breaks the
// signature on both sides.
func TestUAMP_6_3_InteropWithJose(t *testing.T) {
	node := requireInterop(t)
	for _, alg := range []string{"EdDSA", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			dir := t.TempDir()
			priv, pubFile := filepath.Join(dir, "key.jwk"), filepath.Join(dir, "key.pub.jwk")
			code, pub, errs := runCLI(t, "uamp", "keygen", "--alg", alg, "--kid", "interop-"+alg, "--out", priv)
			if code != 0 {
				t.Fatalf("keygen: exit %d: %s", code, errs)
			}
			write := func(name, content string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			write("key.pub.jwk", pub)
			unsigned := write("unsigned.json", interopEnvelope)
			tamper := func(signed string) map[string]string {
				var m map[string]any
				if err := json.Unmarshal([]byte(signed), &m); err != nil {
					t.Fatalf("signed envelope %q: %v", signed, err)
				}
				out := map[string]string{}
				for name, edit := range map[string]func(m map[string]any){
					"body.content": func(m map[string]any) { m["body"].(map[string]any)["content"] = "Grüße, 🙃" },
					"ext nested": func(m map[string]any) {
						m["ext"].(map[string]any)["a"].(map[string]any)["nested"].(map[string]any)["k"] = "w"
					},
					"ext number": func(m map[string]any) { m["ext"].(map[string]any)["n"] = 101 },
				} {
					var c map[string]any
					b, _ := json.Marshal(m)
					json.Unmarshal(b, &c)
					edit(c)
					b, _ = json.Marshal(c)
					out[name] = write("tampered-"+strings.ReplaceAll(name, " ", "-")+".json", string(b))
				}
				return out
			}

			// Node signs, agentry verifies.
			code, nodeSigned := runNode(t, node, "sign", priv, unsigned)
			if code != 0 {
				t.Fatalf("node sign: exit %d: %s", code, nodeSigned)
			}
			signedFile := write("node-signed.json", nodeSigned)
			if code, out, errs := runCLI(t, "uamp", "verify", "--keys", pubFile, signedFile); code != 0 || strings.TrimSpace(out) != "ok" {
				t.Fatalf("agentry uamp verify of jose's envelope: exit %d: %s%s\n%s", code, out, errs, nodeSigned)
			}
			for name, f := range tamper(nodeSigned) {
				if code, out, _ := runCLI(t, "uamp", "verify", "--keys", pubFile, f); code != 1 || !strings.HasPrefix(out, "4.01 ") {
					t.Errorf("agentry verify of jose's envelope with %s changed: exit %d: %s", name, code, out)
				}
			}

			// agentry signs, Node verifies.
			code, signed, errs := runCLI(t, "uamp", "sign", "--key", priv, unsigned)
			if code != 0 {
				t.Fatalf("agentry uamp sign: exit %d: %s", code, errs)
			}
			ourFile := write("agentry-signed.json", signed)
			if code, out := runNode(t, node, "verify", pubFile, ourFile); code != 0 || strings.TrimSpace(out) != "ok" {
				t.Fatalf("jose's verify of agentry's envelope: exit %d: %s\n%s", code, out, signed)
			}
			for name, f := range tamper(signed) {
				if code, out := runNode(t, node, "verify", pubFile, f); code != 1 {
					t.Errorf("jose verified agentry's envelope with %s changed: %s", name, out)
				}
			}
		})
	}
}
