package runs_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/runs"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/store/memstore"
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
	g         *govern.Governor
	svc       *runs.Service
	srv       *httptest.Server
}

// start builds a governor, the support agent and the service over the
// fixture's journal and result store: calling it again is a restart.
func (f *fixture) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var svc *runs.Service
	g, err := govern.New(ctx, govern.Options{Journal: f.journal, Keyring: f.keys,
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
	a, err := agent.New(agent.Options{LLMOptions: llm.LLMOptions{Model: f.model, Tools: builtin.SupportTools(f.ledger)},
		Middleware: []agent.Middleware{g.Middleware(govern.AgentOptions{Name: builtin.SupportAgentName, TaskClass: builtin.SupportTaskClass,
			Identity: govern.Identity{AgentID: "agent:support", OwnerID: "org:test", ControlClass: govern.HumanSupervised}})}})
	if err != nil {
		t.Fatal(err)
	}
	svc = runs.New(ctx, g, map[string]*agent.Agent{builtin.SupportAgentName: a}, f.results, nil)
	if err := svc.ResumeDecided(ctx); err != nil {
		t.Fatal(err)
	}
	f.g, f.svc = g, svc
	f.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(func() { f.srv.Close(); cancel(); svc.Wait() })
}

func newFixture(t *testing.T) *fixture {
	return newFixtureWith(t, nil, llm.ModelReference{})
}

// newFixtureWith makes a fixture over j (nil: a memory journal) whose
// support agent uses model (zero: the built-in offline model).
func newFixtureWith(t *testing.T, j govern.Journal, model llm.ModelReference) *fixture {
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
