package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// `agentry serve --agents DIR` serves the agents a directory of agent
// files defines: a read_only webhook runs, a write_high_risk one waits
// for an approval given with `agentry approve`, runs once, and the run
// delivers; GET /v1/agents lists them.
func TestAgentFiles_ServeAndApprove(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Task string         `json:"task"`
			Args map[string]any `json:"args"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &req)
		mu.Lock()
		calls = append(calls, r.URL.Path+" "+req.Task)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"result": "done"}`)
	}))
	defer hooks.Close()
	dir := t.TempDir()
	files := map[string]string{
		"ops.yaml": `description: Closes tickets
model: scripted:scripts/ops.yaml
tools:
  - webhook: {name: read_ticket, url: "${HOOKS}/read", risk: read_only}
  - webhook: {name: close_ticket, url: "${HOOKS}/close", risk: write_high_risk, rollback: {url: "${HOOKS}/reopen"}}
`,
		"scripts/ops.yaml": `steps:
  - tool_calls: [{id: c1, name: read_ticket, arguments: {id: T-1}}]
  - tool_calls: [{id: c2, name: close_ticket, arguments: {id: T-1}}]
  - text: "closed T-1"
`,
		"calculator.yaml": "model: scripted:demo\ntools: [{builtin: calculate}]\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOOKS", hooks.URL)
	data := t.TempDir()
	keys := filepath.Join(data, "keys")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	srv := startServer(t, "--data", data, "--agents", dir)
	resp, err := http.Get(srv.URL + "/v1/agents")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"calculator"`) || !strings.Contains(string(b), `"ops"`) || strings.Contains(string(b), `"support"`) {
		t.Errorf("GET /v1/agents: %s", b)
	}

	code, body := postJSON(t, srv.URL+"/v1/runs", `{"agent":"ops","input":"close T-1","wait":true}`)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/runs: %d %s", code, body)
	}
	run := decodeRun(t, body)
	if run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("run before approval: %s", body)
	}
	mu.Lock()
	before := strings.Join(calls, ",")
	mu.Unlock()
	if before != "/read read_ticket" {
		t.Fatalf("webhook calls before the approval: %q", before)
	}
	if code, out, errs := runCLI(t, "approve", run.PendingApprovals[0], "--as", "alice", "--dir", keys, "--server", srv.URL); code != 0 {
		t.Fatalf("agentry approve: exit %d\n%s%s", code, out, errs)
	}
	got := waitRun(t, srv.URL, run.RequestID)
	if got.Status != "delivered" || got.Output != "closed T-1" {
		t.Fatalf("run after approval: %+v\n%s", got, srv.output.String())
	}
	mu.Lock()
	after := strings.Join(calls, ",")
	mu.Unlock()
	if after != "/read read_ticket,/close close_ticket" {
		t.Errorf("webhook calls: %q, want the close once", after)
	}
	srv.stop(t)
}

// A bad directory: serve exits non-zero before it listens, printing every
// problem with its file and line.
func TestAgentFiles_BadDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("model: scripted:demo\ntoolz: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--tls-addr", "", "--data", t.TempDir(), "--agents", dir)
	if code == 0 || !strings.Contains(errs, "x.yaml:2: /toolz: unknown key") || strings.Contains(out+errs, "listening") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}
