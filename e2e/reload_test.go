package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentFiles_SIGHUPReloads: SIGHUP makes `agentry serve --agents DIR`
// load DIR again. A new agent is served, a changed one runs its new
// definition for new runs, while a run executing across the reload
// finishes on the definition it started with; a directory with an error
// keeps the agents served and the server says why, with file and line.
func TestAgentFiles_SIGHUPReloads(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"result": "done"}`)
	}))
	defer hooks.Close()
	defer close(release)
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agent := `description: Waits on a webhook
model: scripted:scripts/waiter.yaml
tools:
  - webhook: {name: wait, url: "` + hooks.URL + `/wait", risk: read_only}
`
	write("waiter.yaml", agent)
	write("scripts/waiter.yaml", "steps:\n  - tool_calls: [{id: w1, name: wait, arguments: {}}]\n  - text: \"old definition\"\n")
	srv := startServer(t, "--data", t.TempDir(), "--agents", dir, "--tls-addr", "")

	// A run that is executing (its webhook holds) across the reload.
	code, body := postJSON(t, srv.URL+"/v1/runs", `{"agent":"waiter","input":"go"}`)
	if code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s", code, body)
	}
	old := decodeJSON[runView](t, "run", string(body))
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the run never called its webhook")
	}

	// A changed definition and a new agent; SIGHUP.
	write("waiter.yaml", strings.Replace(agent, "Waits on a webhook", "Waits, changed", 1))
	write("scripts/waiter.yaml", "steps:\n  - text: \"new definition\"\n")
	write("calculator.yaml", "model: scripted:demo\ntools: [{builtin: calculate}]\n")
	reloaded := strings.Count(srv.output.String(), "agentry: reloaded")
	srv.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, srv, func(out string) bool { return strings.Count(out, "agentry: reloaded") > reloaded })
	if !strings.Contains(srv.output.String(), "agentry: reloaded 2 agents from "+dir+": calculator, waiter") {
		t.Errorf("reload output:\n%s", srv.output.String())
	}
	agents := getAgents(t, srv.URL)
	if _, ok := agents["calculator"]; !ok || agents["waiter"] != "Waits, changed" || len(agents) != 2 {
		t.Errorf("GET /v1/agents after the reload: %v", agents)
	}
	code, body = postJSON(t, srv.URL+"/v1/runs", `{"agent":"waiter","input":"go","wait":true}`)
	if run := decodeRun(t, body); code != http.StatusOK || run.Status != "delivered" || run.Output != "new definition" {
		t.Errorf("a new run of the changed agent: %d %s", code, body)
	}
	code, body = postJSON(t, srv.URL+"/v1/runs", `{"agent":"calculator","input":"What is 6*7?","wait":true}`)
	if run := decodeRun(t, body); code != http.StatusOK || run.Status != "delivered" || !strings.Contains(run.Output, "42") {
		t.Errorf("a run of the new agent: %d %s", code, body)
	}
	// The run executing across the reload finishes on its definition.
	release <- struct{}{}
	if run := waitRun(t, srv.URL, old.RequestID); run.Status != "delivered" || run.Output != "old definition" {
		t.Errorf("the run started before the reload: %+v", run)
	}

	// A bad directory: nothing changes, and the server says why.
	write("broken.yaml", "model: scripted:demo\ntoolz: []\n")
	srv.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, srv, func(out string) bool { return strings.Contains(out, "agents not reloaded") })
	if out := srv.output.String(); !strings.Contains(out, "broken.yaml:2: /toolz: unknown key") {
		t.Errorf("a bad reload's output:\n%s", out)
	}
	if agents := getAgents(t, srv.URL); len(agents) != 2 || agents["waiter"] != "Waits, changed" {
		t.Errorf("GET /v1/agents after a bad reload: %v", agents)
	}
	select {
	case <-srv.exited:
		t.Fatalf("the server exited on a bad reload:\n%s", srv.output.String())
	default:
	}
}

// waitFor waits until the server's output satisfies ok.
func waitFor(t *testing.T, srv *server, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok(srv.output.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's output never showed what was awaited:\n%s", srv.output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getAgents returns GET /v1/agents as name → description.
func getAgents(t *testing.T, base string) map[string]string {
	t.Helper()
	resp, err := http.Get(base + "/v1/agents")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Agents []struct{ Name, Description string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range list.Agents {
		out[a.Name] = a.Description
	}
	return out
}
