package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A program of its own built on server.New (examples/embed) serves its
// own workflow and its own agent under governance, and what it
// acknowledged survives its restart on the same store.
func TestEmbed_ServerNewInAProgram(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "embed")
	build := exec.Command("go", "build", "-race", "-o", bin, "./examples/embed")
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/embed: %v\n%s", err, out)
	}
	store := "sqlite://" + filepath.Join(dir, "embed.db")

	s := startProgram(t, bin, "-addr", "127.0.0.1:0", "-store", store)
	ctx := context.Background()
	c := s.client(httpClient(2))
	init, err := c.Initialize(ctx, "helpdesk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, init.SessionID, "helpdesk", "file_ticket", map[string]any{"summary": "printer jammed"}); err != nil {
		t.Fatalf("file_ticket: %v", err)
	}
	if _, err := c.Transition(ctx, init.SessionID, "helpdesk", "filed"); err != nil {
		t.Fatalf("transition to filed: %v", err)
	}
	code, body := postJSON(t, s.URL+"/v1/runs", `{"agent":"triage","input":"status of T-7?","wait":true}`)
	run := decodeRun(t, body)
	if code != http.StatusOK || run.Status != "delivered" || !strings.Contains(run.Output, "printer on floor 2") {
		t.Fatalf("a run of the program's agent: %d %s", code, body)
	}
	s.stop(t)

	s = startProgram(t, bin, "-addr", "127.0.0.1:0", "-store", store)
	if sess, err := s.client(httpClient(2)).Session(ctx, init.SessionID); err != nil || sess.Stage != "filed" {
		t.Errorf("the session after a restart: %+v, %v; want it in stage filed", sess, err)
	}
	if got := getRun(t, s.URL, run.RequestID); got.Status != "delivered" || got.Output != run.Output {
		t.Errorf("the run after a restart: %+v, want delivered with %q", got, run.Output)
	}
	s.stop(t)
}
