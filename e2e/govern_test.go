package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/uaicpschema"
)

// runView is what GET /v1/runs/{id} answers, the part the tests read.
type runView struct {
	RequestID        string   `json:"request_id"`
	Status           string   `json:"status"`
	Output           string   `json:"output"`
	PendingApprovals []string `json:"pending_approvals"`
	Envelope         struct {
		State   string `json:"state"`
		Outcome string `json:"outcome"`
	} `json:"envelope"`
}

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// decodeRun decodes a run's JSON and checks its envelope, as sent,
// against message-envelope.schema.json.
func decodeRun(t *testing.T, body []byte) runView {
	t.Helper()
	var raw struct {
		Envelope json.RawMessage `json:"envelope"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || len(raw.Envelope) == 0 {
		t.Fatalf("run without an envelope: %s", body)
	}
	if err := uaicpschema.ValidateEnvelope(raw.Envelope); err != nil {
		t.Errorf("the run's envelope does not validate: %v\n%s", err, raw.Envelope)
	}
	return decodeJSON[runView](t, "run", string(body))
}

// waitRun reads a run once it is settled (GET /v1/runs/{id}?wait=):
// delivered, failed safe, or paused for a human; after 100 s as it is.
func waitRun(t *testing.T, base, id string) runView {
	t.Helper()
	return getRun(t, base, id+"?wait=100s")
}

func getRun(t *testing.T, base, id string) runView {
	t.Helper()
	resp, err := http.Get(base + "/v1/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/runs/%s: %d %s", id, resp.StatusCode, b)
	}
	return decodeRun(t, b)
}

// TestUAICP_5_3_ApprovalSurvivesKill is the governance walkthrough of the
// README against the real binary: a refund (write_high_risk) pauses the
// run durably; the server is killed with SIGKILL while the run waits;
// after a restart a human approves with `agentry approve`, the run
// resumes and delivers, the refund ran exactly once (intent journaled
// before it), the journal's chain verifies with `agentry audit verify`,
// and the JSONL audit export holds every record.
func TestUAICP_5_3_ApprovalSurvivesKill(t *testing.T) {
	data := t.TempDir()
	keys := filepath.Join(data, "keys")
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	args := []string{"--data", data, "--audit-log", auditLog}

	srv := startServer(t, args...)
	code, body := postJSON(t, srv.URL+"/v1/runs", `{"agent":"support","input":"please refund order o-1001","wait":true}`)
	if code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s", code, body)
	}
	run := decodeRun(t, body)
	if run.Status != "paused" || len(run.PendingApprovals) != 1 || run.Envelope.Outcome != "pending" {
		t.Fatalf("run before approval: %s", body)
	}
	approval := run.PendingApprovals[0]

	code, out, errs := runCLI(t, "approvals", "--server", srv.URL)
	if code != 0 || !strings.Contains(out, approval) || !strings.Contains(out, "refund_order") {
		t.Fatalf("agentry approvals: exit %d\n%s%s", code, out, errs)
	}

	srv.kill(t) // the run is paused: nothing of it may be lost
	srv = startServer(t, args...)
	if got := getRun(t, srv.URL, run.RequestID); got.Status != "paused" {
		t.Fatalf("after the restart the run is %q, want paused", got.Status)
	}
	// A key the server does not trust is refused, and decides nothing.
	untrusted := filepath.Join(t.TempDir(), "keys")
	if code, _, errs := runCLI(t, "keys", "create", "mallory", "--dir", untrusted); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	code, out, errs = runCLI(t, "approve", approval, "--key", filepath.Join(untrusted, "mallory.key.json"), "--server", srv.URL)
	if code != 1 || !strings.Contains(out+errs, "APPROVAL_INVALID") {
		t.Fatalf("approve with an untrusted key: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs = runCLI(t, "approve", approval, "--as", "alice", "--dir", keys, "--server", srv.URL); code != 0 {
		t.Fatalf("agentry approve: exit %d\n%s%s", code, out, errs)
	}

	got := waitRun(t, srv.URL, run.RequestID)
	if got.Status == "paused" || got.Status == "running" {
		t.Fatalf("the run did not finish after the approval: %+v", got)
	}
	if got.Status != "delivered" || got.Envelope.State != "deliver" || got.Envelope.Outcome != "success" || !strings.Contains(got.Output, "o-1001") {
		t.Fatalf("run after approval: %+v", got)
	}
	srv.stop(t) // a graceful stop flushes the audit export

	code, out, errs = runCLI(t, "audit", "verify", "--data", data)
	if code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("agentry audit verify: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "audit", "show", "--data", data, "--run", run.RequestID, "--format", "jsonl")
	if code != 0 {
		t.Fatalf("agentry audit show: exit %d: %s", code, errs)
	}
	var kinds []string
	intents, commits := 0, 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Seq  uint64 `json:"seq"`
			Kind string `json:"kind"`
			Tool string `json:"tool"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit show line %q: %v", sc.Text(), err)
		}
		kinds = append(kinds, r.Kind)
		if r.Tool == "refund_order" {
			switch r.Kind {
			case "invocation_intent":
				intents++
				if commits != 0 {
					t.Error("the refund's commit precedes its intent")
				}
			case "invocation_commit":
				commits++
			}
		}
	}
	if intents != 1 || commits != 1 {
		t.Errorf("refund intents %d, commits %d; want exactly one each\n%s", intents, commits, strings.Join(kinds, " "))
	}
	for _, want := range []string{"approval_requested", "run_paused", "approval_decided", "run_resumed"} {
		if !strings.Contains(" "+strings.Join(kinds, " ")+" ", " "+want+" ") {
			t.Errorf("the run's records lack %s: %v", want, kinds)
		}
	}
	exported, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(exported), "\n"); n != len(kinds) {
		t.Errorf("the JSONL audit export holds %d records, the journal %d", n, len(kinds))
	}
}

// fakeOllama is a model server for the support agent (`--agent-model
// ollama:…` with OLLAMA_HOST pointing here): it looks the order up, asks
// for the refund and, once it sees the refund's result, either holds the
// request (closing held, until the server dies) or answers.
type fakeOllama struct {
	srv    *httptest.Server
	held   chan struct{} // closed when a request after the refund came in holding mode
	answer atomic.Bool   // answer after the refund instead of holding
	once   sync.Once
}

func newFakeOllama(t *testing.T) *fakeOllama {
	f := &fakeOllama{held: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/chat" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Messages []struct {
				Role     string `json:"role"`
				ToolName string `json:"tool_name"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		done := map[string]bool{}
		for _, m := range req.Messages {
			if m.Role == "tool" {
				done[m.ToolName] = true
			}
		}
		reply := map[string]any{"role": "assistant", "content": ""}
		call := func(id, name string) {
			reply["tool_calls"] = []any{map[string]any{"id": id, "function": map[string]any{"name": name, "arguments": map[string]any{"order_id": "o-1001"}}}}
		}
		switch {
		case !done["lookup_order"]:
			call("lookup-1", "lookup_order")
		case !done["refund_order"]:
			call("refund-1", "refund_order")
		case !f.answer.Load():
			f.once.Do(func() { close(f.held) })
			<-r.Context().Done() // the agentry server is killed meanwhile
			return
		default:
			reply["content"] = "Refunded order o-1001."
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"model": "fake", "created_at": "2026-01-01T00:00:00Z", "message": reply, "done": true, "done_reason": "stop"})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// TestUAICP_5_3_ApprovedRefundSurvivesKill: `agentry serve` is killed
// with SIGKILL after a human approved a refund, the refund committed and
// the model was asked to go on — before the run delivered. At the next
// start the run continues from its pause: the refund is replayed from the
// journal, not run again and not reversed, and the run delivers. The
// journal (`agentry audit show`) holds one intent and one commit of the
// refund and no rollback.
func TestUAICP_5_3_ApprovedRefundSurvivesKill(t *testing.T) {
	model := newFakeOllama(t)
	t.Setenv("OLLAMA_HOST", model.srv.URL)
	data := t.TempDir()
	keys := filepath.Join(data, "keys")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	args := []string{"--data", data, "--agent-model", "ollama:fake"}
	srv := startServer(t, args...)
	code, body := postJSON(t, srv.URL+"/v1/runs", `{"agent":"support","input":"please refund order o-1001","wait":true}`)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/runs: %d %s", code, body)
	}
	run := decodeRun(t, body)
	if run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("run before approval: %s", body)
	}
	if code, out, errs := runCLI(t, "approve", run.PendingApprovals[0], "--as", "alice", "--dir", keys, "--server", srv.URL); code != 0 {
		t.Fatalf("agentry approve: exit %d\n%s%s", code, out, errs)
	}
	select {
	case <-model.held: // the refund committed: the model is asked for the answer
	case <-time.After(60 * time.Second):
		t.Fatalf("the resumed run never asked the model for its answer:\n%s", srv.output.String())
	}
	srv.kill(t)

	model.answer.Store(true)
	srv = startServer(t, args...)
	got := waitRun(t, srv.URL, run.RequestID)
	if got.Status == "paused" || got.Status == "running" {
		t.Fatalf("the run did not finish after the restart: %+v\n%s", got, srv.output.String())
	}
	if got.Status != "delivered" || got.Envelope.Outcome != "success" || !strings.Contains(got.Output, "o-1001") {
		t.Fatalf("run after the restart: %+v\n%s", got, srv.output.String())
	}
	srv.stop(t)

	code, out, errs := runCLI(t, "audit", "show", "--data", data, "--run", run.RequestID, "--format", "jsonl")
	if code != 0 {
		t.Fatalf("agentry audit show: exit %d: %s", code, errs)
	}
	var kinds []string
	counts := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Kind string `json:"kind"`
			Tool string `json:"tool"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit show line %q: %v", sc.Text(), err)
		}
		kinds = append(kinds, r.Kind)
		counts[r.Kind+" "+r.Tool]++
	}
	if counts["invocation_intent refund_order"] != 1 || counts["invocation_commit refund_order"] != 1 ||
		counts["rollback_started refund_order"] != 0 || counts["run_paused "] != 2 {
		t.Errorf("the run's journal: %v\n%s", counts, strings.Join(kinds, " "))
	}
	if code, out, errs := runCLI(t, "audit", "verify", "--data", data); code != 0 {
		t.Errorf("agentry audit verify: exit %d\n%s%s", code, out, errs)
	}
}

// TestDESIGN_5_KeysCreatedWhileServing is the README's walkthrough in the
// order it is written: `agentry serve` first, with no keyring yet; a
// refund pauses; `agentry keys create alice` afterwards; `agentry approve
// --as alice` is accepted without a restart and the run delivers. A key
// the server does not hold is refused with the fix named.
func TestDESIGN_5_KeysCreatedWhileServing(t *testing.T) {
	data := t.TempDir()
	keys := filepath.Join(data, "keys")
	srv := startServer(t, "--data", data)
	code, body := postJSON(t, srv.URL+"/v1/runs", `{"agent":"support","input":"please refund order o-1001","wait":true}`)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/runs: %d %s", code, body)
	}
	run := decodeRun(t, body)
	if run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("run before approval: %s", body)
	}
	other := filepath.Join(t.TempDir(), "keys")
	if code, _, errs := runCLI(t, "keys", "create", "mallory", "--dir", other); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI(t, "approve", run.PendingApprovals[0], "--key", filepath.Join(other, "mallory.key.json"), "--server", srv.URL)
	if code == 0 || !strings.Contains(out+errs, "not a trusted approver key; add it with `agentry keys create NAME --dir "+keys+"`") {
		t.Fatalf("approve with a key the server does not hold: exit %d\n%s%s", code, out, errs)
	}

	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	if code, out, errs := runCLI(t, "approve", run.PendingApprovals[0], "--as", "alice", "--dir", keys, "--server", srv.URL); code != 0 {
		t.Fatalf("agentry approve after keys create, without a restart: exit %d\n%s%s", code, out, errs)
	}
	got := waitRun(t, srv.URL, run.RequestID)
	if got.Status == "paused" || got.Status == "running" {
		t.Fatalf("the run did not finish after the approval: %+v", got)
	}
	if got.Status != "delivered" || !strings.Contains(got.Output, "o-1001") {
		t.Fatalf("run after approval: %+v", got)
	}
}
