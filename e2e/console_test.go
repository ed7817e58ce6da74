package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// consoleScript drives the console in headless Chromium (see
// e2e/browser/console.mjs).
const consoleScript = "browser/console.mjs"

// TestConsole_BrowserApprovalFlow: in headless Chromium, a person logs
// in to /console/ with the server's token (an HttpOnly, SameSite=Strict
// session cookie), starts the support agent's refund run from the agents
// page, sees it pause live, approves it in the inbox with a token the
// page signs with the approver's key (WebCrypto Ed25519), and sees the
// run deliver live and its audit chain verify; a second refund denied in
// the inbox shows as denied in its run. Screenshots of every page are
// written as artifacts (docs/console.md shows them).
func TestConsole_BrowserApprovalFlow(t *testing.T) {
	node, chromium := requireBrowser(t)
	data := t.TempDir()
	keys := filepath.Join(data, "keys")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	const token = "console-e2e-token"
	srv := startServer(t, "--data", data, "--token", token, "--tls-addr", "")
	// A workflow session, for the workflows page.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/initialize", strings.NewReader(`{"workflow_name":"store"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, consoleScript, "flow", srv.URL, token, filepath.Join(keys, "alice.key.json"), shots, chromium)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("browser driver: %v\nstderr:\n%s\nstdout:\n%s\nserver:\n%s", err, stderr.String(), stdout.String(), srv.output.String())
	}
	var got struct {
		LoginStatus int `json:"loginStatus"`
		Cookie      *struct {
			HTTPOnly bool   `json:"httpOnly"`
			SameSite string `json:"sameSite"`
		} `json:"cookie"`
		AgentTools       []string `json:"agentTools"`
		Run              string   `json:"run"`
		PausedEvents     []string `json:"pausedEvents"`
		ApprovalCard     string   `json:"approvalCard"`
		ApprovalArgs     string   `json:"approvalArgs"`
		ApprovalRollback string   `json:"approvalRollback"`
		ApprovalCommand  string   `json:"approvalCommand"`
		KeyStatus        string   `json:"keyStatus"`
		Output           string   `json:"output"`
		Chain            string   `json:"chain"`
		AuditRows        int      `json:"auditRows"`
		DeliveredEvents  []string `json:"deliveredEvents"`
		ApprovedEvent    string   `json:"approvedEvent"`
		DeniedRun        string   `json:"deniedRun"`
		DeniedEvent      string   `json:"deniedEvent"`
		DeniedStatus     string   `json:"deniedStatus"`
		DeniedAnswer     string   `json:"deniedAnswer"`
		RunsRows         int      `json:"runsRows"`
		RunsStatuses     []string `json:"runsStatuses"`
		WorkflowSessions []string `json:"workflowSessions"`
		PhoneOverflow    int      `json:"phoneOverflow"`
		Console          []string `json:"console"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &got); err != nil {
		t.Fatalf("driver output: %v\n%s", err, stdout.String())
	}
	check := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Errorf(format, args...)
		}
	}
	check(got.LoginStatus == http.StatusUnauthorized, "the console without a session answered %d, want 401 (the login form)", got.LoginStatus)
	check(got.Cookie != nil && got.Cookie.HTTPOnly && got.Cookie.SameSite == "Strict", "session cookie: %+v", got.Cookie)
	check(strings.Join(got.AgentTools, "|") == "lookup_orderread_only|refund_orderwrite_high_risk", "support's tools on the agents page: %q", got.AgentTools)
	check(contains(got.PausedEvents, "approval_requested") && contains(got.PausedEvents, "paused"), "events before the pause: %v", got.PausedEvents)
	check(strings.Contains(got.ApprovalCard, "refund_order") && strings.Contains(got.ApprovalCard, "write_high_risk"), "approval card: %q", got.ApprovalCard)
	check(strings.Contains(got.ApprovalArgs, `"o-1001"`), "approval arguments: %q", got.ApprovalArgs)
	check(got.ApprovalRollback != "", "the approval card shows no rollback")
	check(strings.Contains(got.ApprovalCommand, "agentry approve "), "the terminal command: %q", got.ApprovalCommand)
	check(strings.HasPrefix(got.KeyStatus, "Signing as alice"), "key status: %q", got.KeyStatus)
	check(strings.Contains(got.Output, "o-1001"), "answer: %q", got.Output)
	check(strings.Contains(got.Chain, "verified") && got.AuditRows > 5, "audit: %q, %d records", got.Chain, got.AuditRows)
	check(contains(got.DeliveredEvents, "resumed") && contains(got.DeliveredEvents, "tool_result") && got.DeliveredEvents[len(got.DeliveredEvents)-1] == "ended",
		"events of the delivered run: %v", got.DeliveredEvents)
	check(strings.Contains(got.ApprovedEvent, "approved") && strings.Contains(got.ApprovedEvent, "alice"), "approval event: %q", got.ApprovedEvent)
	check(strings.Contains(got.DeniedEvent, "denied") && strings.Contains(got.DeniedEvent, "bob") && strings.Contains(got.DeniedEvent, "refunds are frozen"), "denial event: %q", got.DeniedEvent)
	check(strings.Contains(got.DeniedAnswer, "refund_order"), "denied run's answer lists the refused call: %q (status %s)", got.DeniedAnswer, got.DeniedStatus)
	check(got.RunsRows == 2, "runs list: %d rows (%v)", got.RunsRows, got.RunsStatuses)
	check(len(got.WorkflowSessions) == 1 && strings.Contains(got.WorkflowSessions[0], "browse"), "workflow sessions: %q", got.WorkflowSessions)
	check(got.PhoneOverflow <= 0, "on a phone the run page is %d px wider than the screen", got.PhoneOverflow)
	for _, l := range got.Console {
		if strings.HasPrefix(l, "error:") || strings.HasPrefix(l, "pageerror:") {
			t.Errorf("browser console: %s", l)
		}
	}

	// What the page decided is what the server recorded.
	code, out, errs := runCLI(t, "audit", "show", "--data", data, "--run", got.Run)
	if code != 0 || !strings.Contains(out, "approval_decided") || !strings.Contains(out, "actor=alice (human)") {
		t.Errorf("audit show --run %s: exit %d\n%s%s", got.Run, code, out, errs)
	}
	t.Logf("screenshots in %s", shots)
}

// TestConsole_BrowserKeepsUpWithAFastRun: a run whose model streams
// 1,000 text chunks in about a second; the run page, opened before the
// model starts, renders every event it receives — counted by the page —
// and its text is the chunks received, in order. On an idle machine it
// receives all of them (logged).
func TestConsole_BrowserKeepsUpWithAFastRun(t *testing.T) {
	node, chromium := requireBrowser(t)
	const chunks = 1000
	gate := make(chan struct{})
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-gate:
		case <-time.After(120 * time.Second):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		chunk := func(delta, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764300000, "model": "fake",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			rc.Flush()
		}
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		start := time.Now()
		for i := range chunks {
			chunk(map[string]any{"content": fmt.Sprintf("w%d ", i)}, nil)
			// 1,000 chunks spread over a second.
			if d := time.Duration(i+1)*time.Millisecond - time.Since(start); d > 0 {
				time.Sleep(d)
			}
		}
		chunk(map[string]any{}, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer model.Close()
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	agents := t.TempDir()
	os.WriteFile(filepath.Join(agents, "streamer.yaml"), []byte("description: Streams a long answer\nmodel: compat:fake\ninstructions: Answer at length.\n"), 0o600)
	t.Setenv("COMPAT_BASE_URL", model.URL+"/v1")
	const token = "console-e2e-token"
	srv := startServer(t, "--data", t.TempDir(), "--agents", agents, "--token", token, "--tls-addr", "")
	shots := artifactDir(t)

	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, consoleScript, "stream", srv.URL, token, "streamer", shots, chromium)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var result string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "READY ") {
			close(gate) // the page follows the run: the model may stream
			continue
		}
		result = line
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("browser driver: %v\nstderr:\n%s\nstdout:\n%s\nserver:\n%s", err, stderr.String(), result, srv.output.String())
	}
	var got struct {
		Received int      `json:"received"`
		Rendered int      `json:"rendered"`
		Text     []string `json:"text"`
		Types    []string `json:"types"`
	}
	if err := json.Unmarshal([]byte(result), &got); err != nil {
		t.Fatalf("driver output: %v\n%s", err, result)
	}
	// The page renders what it receives, all of it, in order. (What it
	// receives may fall short of what the model streamed on a machine so
	// loaded that the server's buffer for a slow subscriber overflows: a
	// run's transient events are not kept, docs/agents.md. That depends
	// on the load; what the page does with what arrives does not.)
	if got.Rendered != got.Received {
		t.Errorf("the page rendered %d of the %d events it received", got.Rendered, got.Received)
	}
	if !contains(got.Types, "run_started") || got.Types[len(got.Types)-1] != "ended" {
		t.Errorf("the run's own events: %v", got.Types)
	}
	nonText := 0
	for _, ty := range got.Types {
		if ty != "model_text" {
			nonText++
		}
	}
	text := strings.Join(got.Text, "")
	chunksShown, prev := 0, -1
	for _, w := range strings.SplitAfter(text, " ") {
		if w == "" {
			continue
		}
		var i int
		if _, err := fmt.Sscanf(w, "w%d ", &i); err != nil || i <= prev || i >= chunks || w != fmt.Sprintf("w%d ", i) {
			t.Fatalf("the page's text is not the streamed chunks in order: %q after w%d", w, prev)
		}
		prev = i
		chunksShown++
	}
	if chunksShown != got.Received-nonText {
		t.Errorf("the page shows %d text chunks, and received %d", chunksShown, got.Received-nonText)
	}
	t.Logf("the page received and rendered %d events: %d of the %d chunks streamed and %d of the run's own; screenshot in %s",
		got.Rendered, chunksShown, chunks, nonText, shots)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
