package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

var uampListening = regexp.MustCompile(`agentry: UAMP on (https://\S+) as (\S+) `)

// uampURL returns the TLS listener's URL and DID that the server printed.
func (s *server) uampURL(t *testing.T) (url, did string) {
	t.Helper()
	m := uampListening.FindStringSubmatch(s.output.String())
	if m == nil {
		t.Fatalf("the server announced no UAMP listener:\n%s", s.output.String())
	}
	return m[1], m[2]
}

// TestUAMP_ServeSendConformance: agentry serve with a temporary --data
// serves UAMP on its TLS listener only; a key made by agentry uamp
// keygen and trusted with --uamp-trust sends to the echo agent with
// agentry uamp send over SSE and WebSocket, verifying the server with
// the development certificate made under --data; agentry conformance
// uamp passes; a restart reuses the certificate.
func TestUAMP_ServeSendConformance(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	key := filepath.Join(dir, "client.jwk")
	code, pub, errs := runCLI(t, "uamp", "keygen", "--out", key)
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errs)
	}
	trust := filepath.Join(dir, "client.pub.jwk")
	if err := os.WriteFile(trust, []byte(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--data", data, "--tls-addr", "127.0.0.1:0", "--uamp-trust", trust}
	srv := startServer(t, args...)
	url, did := srv.uampURL(t)
	ca := filepath.Join(data, "tls", "cert.pem")
	if !strings.HasPrefix(did, "did:web:127.0.0.1%3A") {
		t.Errorf("server DID %q", did)
	}

	content := strings.Repeat("Hello over UAMP, Grüße 🙂. ", 30)
	ask := filepath.Join(dir, "ask.json")
	b, _ := json.Marshal(map[string]any{"from": "did:web:e2e.example", "body": map[string]string{"type": "text/plain", "content": content}})
	os.WriteFile(ask, b, 0o600)
	for _, binding := range [][]string{nil, {"--ws"}, {"--grpc"}} {
		code, out, errs := runCLI(t, append([]string{"uamp", "send", url, ask, "--key", key, "--ca", ca, "--timeout", "30s"}, binding...)...)
		if code != 0 {
			t.Fatalf("uamp send %v: exit %d: %s", binding, code, errs)
		}
		var got strings.Builder
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for i, line := range lines {
			d, err := envelope.DecodeDelta([]byte(line))
			if err != nil || d.Seq != int64(i) {
				t.Fatalf("send %v: line %d %q: %v", binding, i, line, err)
			}
			if d.Type == envelope.DeltaChunk {
				var p struct{ Content string }
				json.Unmarshal(d.Payload, &p)
				got.WriteString(p.Content)
			}
			if i == len(lines)-1 && d.Type != envelope.DeltaDone {
				t.Errorf("send %v: last delta %s", binding, d.Type)
			}
		}
		if got.String() != content || len(lines) < 3 {
			t.Errorf("send %v: %d deltas, echoed %q", binding, len(lines), got.String())
		}
	}

	// The black-box suite passes against the binary.
	code, out, errs := runCLI(t, "conformance", "uamp", "--url", url, "--key", key, "--ca", ca)
	if last := lastLine(out); code != 0 || last != "20 passed, 0 failed" {
		t.Errorf("conformance uamp: exit %d, %q:\n%s%s", code, last, out, errs)
	}

	// UAMP is not on the plain listener.
	resp, err := http.Post(srv.URL+"/v1/messages", "application/uamp+json;v=1", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /v1/messages on --addr: %d, want 404", resp.StatusCode)
	}
	srv.stop(t)

	// A restart reuses the development certificate (the CA clients hold).
	before, _ := os.ReadFile(ca)
	srv = startServer(t, args...)
	url, _ = srv.uampURL(t)
	after, _ := os.ReadFile(ca)
	if string(before) != string(after) {
		t.Error("the development certificate was made again on restart")
	}
	if code, _, errs := runCLI(t, "uamp", "send", url, ask, "--key", key, "--ca", ca, "--timeout", "30s"); code != 0 {
		t.Errorf("send after restart: exit %d: %s", code, errs)
	}
	// An untrusted key is refused with the UAMP code.
	other := filepath.Join(dir, "other.jwk")
	runCLI(t, "uamp", "keygen", "--out", other)
	if code, _, errs := runCLI(t, "uamp", "send", url, ask, "--key", other, "--ca", ca); code != 1 || !strings.HasPrefix(errs, "4.01 ") {
		t.Errorf("untrusted key: exit %d: %s", code, errs)
	}
	srv.stop(t)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
