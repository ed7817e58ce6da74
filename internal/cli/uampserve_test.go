package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// inProcessServe is agentry serve running in the test process.
type inProcessServe struct {
	plainURL, tlsURL, did string
	stop                  func() int // cancels and returns the exit code
	output                *lockedBuffer
}

var (
	uampLine   = regexp.MustCompile(`agentry: UAMP on (https://\S+) as (\S+) `)
	plainLine  = regexp.MustCompile(`agentry: listening on (http://\S+) `)
	serveLimit = 30 * time.Second
)

// serveInProcess runs "agentry serve" on loopback ports with a memory
// store and the given extra arguments, and waits until it listens.
func serveInProcess(t *testing.T, data string, args ...string) *inProcessServe {
	t.Helper()
	out := &lockedBuffer{}
	e := &env{stdin: strings.NewReader(""), stdout: out, stderr: out}
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--tls-addr", "127.0.0.1:0", "--data", data,
			"--store", "memory:", "--log-level", "warn"}, args...), e)
	}()
	s := &inProcessServe{output: out}
	var once sync.Once
	code := 0
	s.stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-exit:
			case <-time.After(serveLimit):
				t.Errorf("serve did not stop:\n%s", out.String())
			}
		})
		return code
	}
	t.Cleanup(func() { s.stop() })
	deadline := time.Now().Add(serveLimit)
	for time.Now().Before(deadline) {
		text := out.String()
		if m := plainLine.FindStringSubmatch(text); m != nil {
			s.plainURL = m[1]
			if m := uampLine.FindStringSubmatch(text); m != nil {
				s.tlsURL, s.did = m[1], m[2]
			}
			return s
		}
		select {
		case code := <-exit:
			t.Fatalf("serve exited with %d:\n%s", code, text)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("serve did not listen:\n%s", out.String())
	return nil
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// deltasOf parses the JSON lines uamp send prints.
func deltasOf(t *testing.T, out string) []envelope.Delta {
	t.Helper()
	var ds []envelope.Delta
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var d envelope.Delta
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ds = append(ds, d)
	}
	return ds
}

func TestServeUAMPOverTLSOnly(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	key := filepath.Join(dir, "client.jwk")
	code, pub, errs := runCLI(t, "", "uamp", "keygen", "--kid", "did:web:client.example#key-1", "--out", key)
	if code != 0 {
		t.Fatalf("keygen: %s", errs)
	}
	trust := writeFile(t, dir, "client.pub.jwk", pub)
	srv := serveInProcess(t, data, "--uamp-trust", trust)
	if srv.tlsURL == "" || !strings.HasPrefix(srv.did, "did:web:127.0.0.1%3A") {
		t.Fatalf("no UAMP line:\n%s", srv.output.String())
	}
	ca := filepath.Join(data, devCertFile)
	content := strings.Repeat("Grüße 🙂 ", 60) // several chunks of the echo agent
	ask := writeFile(t, dir, "ask.json", `{"body":{"type":"text/plain","content":"`+content+`"}}`)
	for _, binding := range [][]string{nil, {"--ws"}, {"--grpc"}} {
		code, out, errs := runCLI(t, "", append([]string{"uamp", "send", srv.tlsURL, ask, "--key", key, "--ca", ca, "--timeout", "20s"}, binding...)...)
		if code != 0 {
			t.Fatalf("send %v: exit %d: %s", binding, code, errs)
		}
		ds := deltasOf(t, out)
		var got strings.Builder
		for i, d := range ds {
			if d.Seq != int64(i) {
				t.Errorf("delta %d has seq %d", i, d.Seq)
			}
			if d.Type == envelope.DeltaChunk {
				var p struct{ Content string }
				json.Unmarshal(d.Payload, &p)
				got.WriteString(p.Content)
			}
		}
		if len(ds) < 3 || ds[len(ds)-1].Type != envelope.DeltaDone || got.String() != content {
			t.Errorf("send %v: deltas %s", binding, out)
		}
	}

	// A key the server does not trust: 4.01 and exit 1.
	other := filepath.Join(dir, "other.jwk")
	runCLI(t, "", "uamp", "keygen", "--kid", "did:web:other.example#key-1", "--out", other)
	if code, _, errs := runCLI(t, "", "uamp", "send", srv.tlsURL, ask, "--key", other, "--ca", ca); code != 1 || !strings.HasPrefix(errs, "4.01 ") {
		t.Errorf("untrusted key: exit %d: %s", code, errs)
	}
	// The server's certificate is checked.
	if code, _, errs := runCLI(t, "", "uamp", "send", srv.tlsURL, ask, "--key", key); code != 1 || !strings.Contains(errs, "certificate") {
		t.Errorf("unverifiable server: exit %d: %s", code, errs)
	}

	// UAMP and discovery are not served on the plain listener.
	for _, p := range []string{"/v1/messages", "/v1/stream/x", "/uamp/1/ws", "/.well-known/agent-manifest.json"} {
		resp, err := http.Post(srv.plainURL+p, "application/uamp+json;v=1", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("plain POST %s: %d", p, resp.StatusCode)
		}
	}
	// The TLS listener serves the plain endpoints too.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Get(srv.tlsURL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz over TLS: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code := srv.stop(); code != 0 {
		t.Errorf("serve exit %d:\n%s", code, srv.output.String())
	}

	// A restart reuses the development certificate and the identity key.
	cert1, _ := os.ReadFile(ca)
	id1, _ := os.ReadFile(filepath.Join(data, identityFile))
	srv = serveInProcess(t, data, "--uamp-trust", trust)
	cert2, _ := os.ReadFile(ca)
	id2, _ := os.ReadFile(filepath.Join(data, identityFile))
	if !bytes.Equal(cert1, cert2) || !bytes.Equal(id1, id2) || len(cert1) == 0 || len(id1) == 0 {
		t.Error("the development certificate or identity key was not reused")
	}
	if code, _, errs := runCLI(t, "", "uamp", "send", srv.tlsURL, ask, "--key", key, "--ca", ca); code != 0 {
		t.Errorf("send after restart: %s", errs)
	}
}

func TestServeTLSAddrFlags(t *testing.T) {
	data := t.TempDir()
	// No TLS listener at all.
	srv := serveInProcess(t, data, "--tls-addr", "")
	if srv.tlsURL != "" {
		t.Errorf("TLS listener with --tls-addr empty:\n%s", srv.output.String())
	}
	srv.stop()
	// An explicit address that cannot be used is an error.
	code, _, errs := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--tls-addr", "256.0.0.1:1", "--data", data, "--store", "memory:")
	if code == 0 || !strings.Contains(errs, "--tls-addr") {
		t.Errorf("bad --tls-addr: exit %d: %s", code, errs)
	}
	code, _, errs = runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--tls-addr", "127.0.0.1:0", "--tls-cert", "x.pem", "--data", data, "--store", "memory:")
	if code != 2 {
		t.Errorf("--tls-cert without --tls-key: exit %d: %s", code, errs)
	}
}

func TestConformanceUAMPAgainstServe(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	key := filepath.Join(dir, "conf.jwk")
	code, pub, errs := runCLI(t, "", "uamp", "keygen", "--out", key) // a bare kid: the 403 check runs
	if code != 0 {
		t.Fatalf("keygen: %s", errs)
	}
	srv := serveInProcess(t, data, "--uamp-trust", writeFile(t, dir, "conf.pub.jwk", pub))
	code, out, errs := runCLI(t, "", "conformance", "uamp", "--url", srv.tlsURL, "--key", key, "--ca", filepath.Join(data, devCertFile))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || lines[len(lines)-1] != "20 passed, 0 failed" {
		t.Errorf("exit %d: %s\n%s", code, out, errs)
	}
	// A key the server does not trust fails, exit 1.
	other := filepath.Join(dir, "other.jwk")
	runCLI(t, "", "uamp", "keygen", "--out", other)
	code, out, _ = runCLI(t, "", "conformance", "uamp", "--url", srv.tlsURL, "--key", other, "--insecure-dev", "--json")
	var rep struct {
		Results []struct{ Passed bool }
	}
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Results) != 20 {
		t.Errorf("untrusted key: exit %d: %s", code, out)
	}
	if code, _, _ := runCLI(t, "", "conformance", "uamp", "--url", "http://127.0.0.1:1", "--key", key); code != 2 {
		t.Errorf("http URL: exit %d, want 2", code)
	}
}

// Each agent serve runs is also served over UAMP, at the server's DID
// with the path agents:NAME, listed in the signed hub with its own
// signed manifest: an ask is a governed run of the agent, its events
// streamed as deltas and its answer in the done delta.
func TestServeUAMPServesEachAgent(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	key := filepath.Join(dir, "client.jwk")
	code, pub, errs := runCLI(t, "", "uamp", "keygen", "--kid", "did:web:client.example#key-1", "--out", key)
	if code != 0 {
		t.Fatalf("keygen: %s", errs)
	}
	srv := serveInProcess(t, data, "--uamp-trust", writeFile(t, dir, "client.pub.jwk", pub))
	ca := filepath.Join(data, devCertFile)
	for _, tc := range []struct {
		agent, input, want string
		binding            []string
	}{
		{"echo", "hello over UAMP", "hello over UAMP", nil},
		{"echo", "hello over gRPC", "hello over gRPC", []string{"--grpc"}},
		{"support", "status of o-1002?", "o-1002", []string{"--ws"}},
	} {
		ask := writeFile(t, dir, "ask.json", `{"to":["`+srv.did+`:agents:`+tc.agent+`"],"body":{"type":"text/plain","content":"`+tc.input+`"}}`)
		code, out, errs := runCLI(t, "", append([]string{"uamp", "send", srv.tlsURL, ask, "--key", key, "--ca", ca, "--timeout", "20s"}, tc.binding...)...)
		if code != 0 {
			t.Fatalf("%s %v: exit %d: %s", tc.agent, tc.binding, code, errs)
		}
		ds := deltasOf(t, out)
		var first struct {
			Event struct {
				Type, Agent string
				RequestID   string `json:"request_id"`
			}
		}
		json.Unmarshal(ds[0].Payload, &first)
		var done struct {
			Content   string
			RequestID string `json:"request_id"`
		}
		last := ds[len(ds)-1]
		json.Unmarshal(last.Payload, &done)
		if first.Event.Type != "run_started" || first.Event.Agent != tc.agent || last.Type != envelope.DeltaDone ||
			!strings.Contains(done.Content, tc.want) || done.RequestID != first.Event.RequestID {
			t.Errorf("%s %v: deltas\n%s", tc.agent, tc.binding, out)
		}
		// The run is a run like any other.
		var run struct{ Agent, Status string }
		getJSON(t, srv.plainURL+"/v1/runs/"+done.RequestID, &run)
		if run.Agent != tc.agent || run.Status != "delivered" {
			t.Errorf("GET /v1/runs/%s = %+v", done.RequestID, run)
		}
	}
	// A run that fails safe ends the stream with 5.00, naming why.
	agents := t.TempDir()
	writeFile(t, agents, "broken.yaml", "model: scripted:scripts/broken.yaml\n")
	os.Mkdir(filepath.Join(agents, "scripts"), 0o755)
	writeFile(t, agents, "scripts/broken.yaml", "steps:\n  - error: {code: INVALID_REQUEST, message: the model refused}\n")
	data2 := t.TempDir()
	srv2 := serveInProcess(t, data2, "--uamp-trust", filepath.Join(dir, "client.pub.jwk"), "--agents", agents)
	ask2 := writeFile(t, dir, "ask2.json", `{"to":["`+srv2.did+`:agents:broken"],"body":{"type":"text/plain","content":"hi"}}`)
	ca2 := filepath.Join(data2, devCertFile)
	if code, _, errs := runCLI(t, "", "uamp", "send", srv2.tlsURL, ask2, "--key", key, "--ca", ca2); code != 1 || !strings.HasPrefix(errs, "5.00 ") || !strings.Contains(errs, "failed safe") {
		t.Errorf("a run that fails safe: exit %d: %s", code, errs)
	}
	// An agent the server does not run is not addressed here: 4.03.
	ask := writeFile(t, dir, "ask.json", `{"to":["`+srv.did+`:agents:nobody"],"body":{"type":"text/plain","content":"hi"}}`)
	if code, _, errs := runCLI(t, "", "uamp", "send", srv.tlsURL, ask, "--key", key, "--ca", ca); code != 1 || !strings.HasPrefix(errs, "4.03 ") {
		t.Errorf("an unknown agent: exit %d: %s", code, errs)
	}
	// The hub lists the agents; their manifests are served and signed.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var hub struct{ Manifests []struct{ DID, URL string } }
	resp, err := hc.Get(srv.tlsURL + "/.well-known/agent-hub.json")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&hub)
	resp.Body.Close()
	urls := map[string]string{}
	for _, m := range hub.Manifests {
		urls[m.DID] = m.URL
	}
	for _, name := range []string{"echo", "support"} {
		u, ok := urls[srv.did+":agents:"+name]
		if !ok || !strings.HasSuffix(u, "/agents/"+name+"/.well-known/agent-manifest.json") {
			t.Fatalf("hub %+v: no entry for %s", hub, name)
		}
		resp, err := hc.Get(srv.tlsURL + "/agents/" + name + "/.well-known/agent-manifest.json")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Count(string(b), ".") != 2 || resp.Header.Get("Content-Type") != envelope.ManifestMediaType {
			t.Errorf("manifest of %s: %d %s", name, resp.StatusCode, b)
		}
	}
}

// Replicas serving one DID share one identity key: --uamp-key. Two
// servers given the same key publish the same key in their DID
// documents; a missing file is a usage error that says how to make one.
func TestServeUAMPKeyShared(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "identity.jwk")
	if code, _, errs := runCLI(t, "", "uamp", "keygen", "--kid", "key-7", "--out", key); code != 0 {
		t.Fatalf("keygen: %s", errs)
	}
	docs := map[string]bool{}
	for range 2 {
		srv := serveInProcess(t, t.TempDir(), "--uamp-key", key, "--uamp-did", "did:web:agents.example")
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := hc.Get(srv.tlsURL + "/.well-known/did.json")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			VerificationMethod []struct {
				ID           string
				PublicKeyJwk struct{ X string }
			}
		}
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if len(doc.VerificationMethod) != 1 || doc.VerificationMethod[0].ID != "did:web:agents.example#key-7" {
			t.Fatalf("DID document %+v", doc)
		}
		docs[doc.VerificationMethod[0].PublicKeyJwk.X] = true
		srv.stop()
	}
	if len(docs) != 1 {
		t.Errorf("two servers with one --uamp-key published %d keys", len(docs))
	}
	code, _, errs := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--tls-addr", "127.0.0.1:0", "--store", "memory:", "--data", t.TempDir(), "--uamp-key", filepath.Join(dir, "missing.jwk"))
	if code != 2 || !strings.Contains(errs, "agentry uamp keygen --out") {
		t.Errorf("a missing --uamp-key: exit %d: %s", code, errs)
	}
}
