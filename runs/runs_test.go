package runs_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
	"github.com/google/go-cmp/cmp"
)

type fixture struct {
	journal govern.Journal
	results agent.CheckpointStore
	keys    *govern.Keyring
	priv    ed25519.PrivateKey
	ledger  *builtin.Ledger
	model   llm.ModelReference // the support agent's model
	// onDecided, when set, is called after the service handled a
	// decision (its resume, if any, is then under way: svc.Wait waits
	// for it).
	onDecided func()
	// lease, when set, is the governor's run lease (govern.Options.Lease).
	lease time.Duration
	g     *govern.Governor
	svc   *runs.Service
	srv   *httptest.Server
}

// start builds a governor, the support agent and the service over the
// fixture's journal and result store: calling it again is a restart.
func (f *fixture) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var svc *runs.Service
	g, err := govern.New(ctx, &govern.Options{Journal: f.journal, Keyring: f.keys, Lease: f.lease,
		Classes:   []govern.TaskClass{builtin.SupportClass()},
		Rollbacks: map[string]govern.RollbackFunc{builtin.RefundReversal: f.ledger.RollbackHandler()},
		OnDecision: func(req govern.ApprovalRequest) {
			svc.OnDecision(req)
			if f.onDecided != nil {
				f.onDecided()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: f.model, Tools: builtin.SupportTools(f.ledger)},
		Middleware: []agent.Middleware{g.Middleware(&govern.AgentOptions{Name: builtin.SupportAgentName, TaskClass: builtin.SupportTaskClass,
			Identity: govern.Identity{AgentID: "agent:support", OwnerID: "org:test", ControlClass: govern.HumanSupervised}})}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err = runs.New(ctx, &runs.Options{Governor: g, Agents: map[string]*agent.Agent{builtin.SupportAgentName: a}, Results: f.results})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.ResumeDecided(ctx); err != nil {
		t.Fatal(err)
	}
	f.g, f.svc = g, svc
	f.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(func() { f.srv.Close(); cancel(); svc.Close() })
}

func newFixture(t *testing.T) *fixture {
	return newFixtureWith(t, nil, llm.ModelReference{})
}

// newFixtureWith makes a fixture over j (nil: a memory journal) whose
// support agent uses model (zero: the built-in offline model).
func newFixtureWith(t testing.TB, j govern.Journal, model llm.ModelReference) *fixture {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := govern.NewKeyring()
	if _, err := keys.Add("alice", pub); err != nil {
		t.Fatal(err)
	}
	if j == nil {
		j = govern.NewMemoryJournal()
	}
	if model == (llm.ModelReference{}) {
		model = builtin.SupportModel().Ref()
	}
	f := &fixture{journal: j, results: memstore.New().Checkpoints(), keys: keys, priv: priv, ledger: builtin.NewLedger(), model: model}
	auditJournal(t, f.journal) // registered first: runs after every service stopped
	f.start(t)
	return f
}

func (f *fixture) post(t *testing.T, body string) (int, runs.Run) {
	t.Helper()
	resp, err := http.Post(f.srv.URL+"/v1/runs", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, decodeRun(t, resp)
}

func (f *fixture) get(t *testing.T, id string) runs.Run {
	t.Helper()
	resp, err := http.Get(f.srv.URL + "/v1/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	return decodeRun(t, resp)
}

// decodeRun reads a run from resp, checking its envelope on the wire. A
// body that is not a run decodes to the zero Run.
func decodeRun(t *testing.T, resp *http.Response) runs.Run {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkRunWire(t, body)
	var r runs.Run
	json.Unmarshal(body, &r)
	return r
}

// waitFor polls a run until it has status (the resume runs in the
// background). The minute is a safety net far beyond the work, not a
// measure: on a loaded machine a resume can take seconds.
func (f *fixture) waitFor(t *testing.T, id string, status runs.Status) runs.Run {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if r := f.get(t, id); r.Status == status {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s never reached %s: %+v", id, status, f.get(t, id))
	return runs.Run{}
}

func (f *fixture) approve(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	req, err := f.g.Approval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := govern.SignApproval(f.priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "jti-" + id,
		IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.g.Decide(ctx, id, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
		t.Fatal(err)
	}
}

func TestReadOnlyRunDelivers(t *testing.T) {
	f := newFixture(t)
	code, r := f.post(t, `{"agent":"support","input":"status of o-1002?","wait":true}`)
	if code != 200 || r.Status != runs.Delivered || r.Envelope == nil || r.Envelope.Outcome != govern.Success || r.Output == "" {
		t.Fatalf("%d %+v", code, r)
	}
}

func TestRefundPausesAndResumesAfterRestart(t *testing.T) {
	f := newFixture(t)
	code, r := f.post(t, `{"agent":"support","input":"please refund o-1001","wait":true}`)
	if code != 200 || r.Status != runs.Paused || len(r.PendingApprovals) != 1 || r.Envelope.Outcome != govern.Pending {
		t.Fatalf("%d %+v", code, r)
	}
	if log := f.ledger.Log(); len(log) != 0 {
		t.Fatalf("refunded before approval: %v", log)
	}
	f.srv.Close()
	f.start(t) // restart: a new governor and service over the same journal
	if got := f.get(t, r.RequestID); got.Status != runs.Paused {
		t.Fatalf("after restart: %+v", got)
	}
	f.approve(t, r.PendingApprovals[0])
	done := f.waitFor(t, r.RequestID, runs.Delivered)
	if done.Output == "" || done.Envelope.Outcome != govern.Success {
		t.Errorf("delivered run = %+v", done)
	}
	if log := f.ledger.Log(); !slices.Equal(log, []string{"refund o-1001"}) {
		t.Errorf("ledger = %v", log)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t)
	for body, want := range map[string]int{
		`{"agent":"nobody","input":"x"}`:          404,
		`{"agent":"support"}`:                     400,
		`[1]`:                                     400,
		`{"agent":"support","input":"x","zz":1}`:  400,
		`{"agent":"support","input":"x"} {"a":1}`: 400,
	} {
		if code, _ := f.post(t, body); code != want {
			t.Errorf("%s: status %d, want %d", body, code, want)
		}
	}
	if r := f.get(t, "f47ac10b-58cc-4372-a567-0e02b2c3d479"); r.Status != "" {
		t.Errorf("unknown run: %+v", r)
	}
}

// deny denies an approval request as bob.
func (f *fixture) deny(t *testing.T, id, reason string) {
	t.Helper()
	if _, err := f.g.Decide(context.Background(), id, govern.ApprovalInput{Approver: "bob", Reason: reason}); err != nil {
		t.Fatal(err)
	}
}

// rawRun returns GET /v1/runs/{id} as generic JSON, to read field names
// as sent.
func (f *fixture) rawRun(t *testing.T, id string) map[string]any {
	t.Helper()
	resp, err := http.Get(f.srv.URL + "/v1/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkRunWire(t, body)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("GET /v1/runs/%s: %v: %s", id, err, body)
	}
	return m
}

// TestUAICP_7_RunReportsDeniedCalls: a run whose refund an approver denied
// delivers (the agent answers without it) and says so: GET /v1/runs/{id}
// lists the denied call with its approval, reasons, detail and approver —
// from the journal, so after a restart too.
func TestUAICP_7_RunReportsDeniedCalls(t *testing.T) {
	f := newFixture(t)
	code, r := f.post(t, `{"agent":"support","input":"please refund o-1001","wait":true}`)
	if code != 200 || r.Status != runs.Paused || len(r.PendingApprovals) != 1 {
		t.Fatalf("%d %+v", code, r)
	}
	approval := r.PendingApprovals[0]
	f.deny(t, approval, "outside the refund window")
	f.waitFor(t, r.RequestID, runs.Delivered)
	want := map[string]any{
		"status": "delivered",
		"denied_calls": []any{map[string]any{
			"tool": "refund_order", "call_id": "refund-o-1001", "approval_id": approval,
			"reasons": []any{"APPROVAL_DENIED"}, "detail": "denied by bob: outside the refund window", "approver": "bob",
		}},
	}
	for _, when := range []string{"delivered", "after a restart"} {
		if when == "after a restart" {
			f.srv.Close()
			f.start(t)
		}
		got := f.rawRun(t, r.RequestID)
		if diff := cmp.Diff(want, map[string]any{"status": got["status"], "denied_calls": got["denied_calls"]}); diff != "" {
			t.Errorf("%s: run (-want +got):\n%s", when, diff)
		}
		if _, ok := got["error"]; ok {
			t.Errorf("%s: a delivered run carries an error: %v", when, got["error"])
		}
	}
	if log := f.ledger.Log(); len(log) != 0 {
		t.Errorf("ledger %v: the denied refund ran", log)
	}
}

// TestUAICP_7_RunReportsModelFailure: a run whose model fails ends in
// fail_safe with its own reason, MODEL_FAILED (not TOOL_FAILED), and GET
// /v1/runs/{id} carries the provider's error code and message — not the
// Go error under it — also after a restart.
func TestUAICP_7_RunReportsModelFailure(t *testing.T) {
	cases := []struct {
		name string
		err  *llm.Error
		want map[string]any
	}{
		{"rate limited", &llm.Error{Code: llm.RateLimited, Provider: "acme", Message: "rate limit exceeded, retry in 20s", StatusCode: 429,
			Cause: errors.New("json: cannot unmarshal string into Go value of type float64")},
			map[string]any{"code": "RATE_LIMITED", "message": "rate limit exceeded, retry in 20s", "provider": "acme", "status": float64(429)}},
		{"unreachable, no message", &llm.Error{Code: llm.NetworkError, Provider: "acme", Cause: errors.New("dial tcp 10.0.0.1:443: connect: connection refused")},
			map[string]any{"code": "NETWORK_ERROR", "message": "the model's provider failed", "provider": "acme"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) { return scripted.Step{}, tc.err })
			f := newFixtureWith(t, nil, model.Ref())
			code, r := f.post(t, `{"agent":"support","input":"status of o-1002?","wait":true}`)
			if code != 200 || r.Status != runs.FailSafe {
				t.Fatalf("%d %+v", code, r)
			}
			want := map[string]any{"status": "fail_safe", "reasons": []any{"MODEL_FAILED"}, "error": tc.want}
			for _, when := range []string{"failed", "after a restart"} {
				if when == "after a restart" {
					f.srv.Close()
					f.start(t)
				}
				got := f.rawRun(t, r.RequestID)
				if diff := cmp.Diff(want, map[string]any{"status": got["status"], "reasons": got["reasons"], "error": got["error"]}); diff != "" {
					t.Errorf("%s: run (-want +got):\n%s", when, diff)
				}
				if b, _ := json.Marshal(got); strings.Contains(string(b), "Go value") || strings.Contains(string(b), "dial tcp") {
					t.Errorf("%s: the run leaks the Go error: %s", when, b)
				}
			}
		})
	}
}

// GET /v1/runs/{id}?wait=DURATION answers once the run is settled: right
// after an approval it waits through the resume (which starts in the
// background) until the run delivered; a run paused for a human is
// settled at once; a bad duration is a 400.
func TestGetWaitsUntilSettled(t *testing.T) {
	f := newFixture(t)
	_, r := f.post(t, `{"agent":"support","input":"please refund o-1001","wait":true}`)
	if r.Status != runs.Paused {
		t.Fatalf("%+v", r)
	}
	resp, err := http.Get(f.srv.URL + "/v1/runs/" + r.RequestID + "?wait=1h") // paused for a human: settled
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeRun(t, resp); got.Status != runs.Paused {
		t.Fatalf("paused run with ?wait: %+v", got)
	}
	f.approve(t, r.PendingApprovals[0])
	resp, err = http.Get(f.srv.URL + "/v1/runs/" + r.RequestID + "?wait=100s")
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeRun(t, resp); got.Status != runs.Delivered || got.Output == "" {
		t.Errorf("after the approval, ?wait answered %+v", got)
	}
	for _, q := range []string{"soon", "-1s"} {
		resp, err := http.Get(f.srv.URL + "/v1/runs/" + r.RequestID + "?wait=" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("wait=%s: %s", q, resp.Status)
		}
	}
}
