package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
)

// safety bounds a wait in these tests: far beyond the work, never the
// thing under test.
const safety = time.Minute

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}

// bench is a service running one agent, "clerk", whose tools are
// charge (write_low_risk, undone by charge.undo) and hold (read_only: it
// waits until its call is cancelled), over a journal that survives
// restarts of the service.
type bench struct {
	journal govern.Journal
	results agent.CheckpointStore
	model   *scripted.Model
	opts    runs.Options // Governor and Agents are set by start

	mu      sync.Mutex
	charged []string
	undone  []string
	held    chan struct{} // closed when hold started

	g   *govern.Governor
	svc *runs.Service
	srv *httptest.Server
}

func newBench(t *testing.T, model *scripted.Model, opts runs.Options) *bench {
	b := &bench{journal: govern.NewMemoryJournal(), results: memstore.New().Checkpoints(), model: model, opts: opts, held: make(chan struct{})}
	auditJournal(t, b.journal)
	b.start(t)
	return b
}

func (b *bench) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var svc *runs.Service
	g, err := govern.New(ctx, &govern.Options{Journal: b.journal,
		Rollbacks: map[string]govern.RollbackFunc{"charge.undo": func(ctx context.Context, a govern.RollbackAction) error {
			b.mu.Lock()
			b.undone = append(b.undone, a.Target)
			b.mu.Unlock()
			return nil
		}},
		OnDecision: func(req govern.ApprovalRequest) { svc.OnDecision(req) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	charge := govern.Declare(llm.Tool{Name: "charge", Description: "Charges an account.", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.charged = append(b.charged, args["account"].(string))
			return "charged", nil
		}}, govern.Declaration{Tier: govern.WriteLowRisk, Rollback: func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "charge.undo", Target: c.Args["account"].(string)}, nil
	}})
	var once sync.Once
	hold := govern.Declare(llm.Tool{Name: "hold", Description: "Waits.", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			once.Do(func() { close(b.held) })
			<-ctx.Done()
			return nil, ctx.Err()
		}}, govern.Declaration{Tier: govern.ReadOnly})
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: b.model.Ref(), Tools: []llm.Tool{charge, hold}},
		Middleware: []agent.Middleware{g.Middleware(&govern.AgentOptions{Name: "clerk",
			Identity: govern.Identity{AgentID: "agent:clerk", OwnerID: "org:test"}})}})
	if err != nil {
		t.Fatal(err)
	}
	o := b.opts
	o.Governor, o.Agents, o.Results = g, map[string]*agent.Agent{"clerk": a}, b.results
	if svc, err = runs.New(ctx, &o); err != nil {
		t.Fatal(err)
	}
	b.g, b.svc = g, svc
	b.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(func() { b.srv.Close(); cancel(); svc.Close() })
}

func (b *bench) restart(t *testing.T) {
	t.Helper()
	b.srv.Close()
	b.svc.Close()
	b.start(t)
}

func (b *bench) ledger() (charged, undone []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.charged), slices.Clone(b.undone)
}

func call(id, tool string, args map[string]any) scripted.Step {
	return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: id, ToolName: tool, Arguments: args}}}
}

// TestCancel_Running: cancelling a run that executes — its hold call
// waiting — stops it: it fails safe with CANCELLED, the write it made
// before (a charge) is rolled back, and Cancel returns once it is so.
// Cancelling it again is RunFinished (409 over HTTP).
func TestCancel_Running(t *testing.T) {
	ctx := ctxT(t)
	model := scripted.New(
		call("c1", "charge", map[string]any{"account": "acct-1"}),
		call("c2", "hold", map[string]any{}),
		scripted.Step{Text: "never said"},
	)
	b := newBench(t, model, runs.Options{})
	run, err := b.svc.Start(ctx, &runs.StartParams{Agent: "clerk", Input: "charge acct-1, then hold"})
	if err != nil {
		t.Fatal(err)
	}
	<-b.held
	if err := b.svc.Cancel(ctx, run.RequestID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	got, err := b.svc.Get(ctx, run.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runs.FailSafe || !slices.Contains(got.Reasons, govern.Cancelled) || got.Envelope.Outcome != govern.Uncertain {
		t.Errorf("cancelled run = %+v, want fail_safe with CANCELLED", got)
	}
	charged, undone := b.ledger()
	if diff := cmp.Diff([]string{"acct-1"}, charged); diff != "" {
		t.Errorf("charged (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"acct-1"}, undone); diff != "" {
		t.Errorf("rolled back (-want +got):\n%s", diff)
	}
	if err := b.svc.Cancel(ctx, run.RequestID); !errors.Is(err, runs.RunFinished) {
		t.Errorf("second Cancel: %v, want RunFinished", err)
	}
	resp, err := http.Post(b.srv.URL+"/v1/runs/"+run.RequestID+"/cancel", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, e := readError(t, resp); code != http.StatusConflict || e.Code != "RUN_FINISHED" {
		t.Errorf("POST cancel of a finished run: %d %+v, want 409 RUN_FINISHED", code, e)
	}
}

type wireError struct{ Code, Message string }

// readError reads an error answer.
func readError(t *testing.T, resp *http.Response) (int, wireError) {
	t.Helper()
	defer resp.Body.Close()
	var body struct{ Error wireError }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", resp.Status, err)
	}
	return resp.StatusCode, body.Error
}

// TestCancel_Paused: cancelling a run paused for an approval closes it:
// it fails safe with CANCELLED and waits for nothing any more — no
// pending approval, the approval cannot be decided, the refund never
// runs — also after a restart. An unknown run is UnknownRun (404).
func TestCancel_Paused(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t)
	code, r := f.post(t, `{"agent":"support","input":"please refund o-1001","wait":true}`)
	if code != 200 || r.Status != runs.Paused || len(r.PendingApprovals) != 1 {
		t.Fatalf("%d %+v", code, r)
	}
	resp, err := http.Post(f.srv.URL+"/v1/runs/"+r.RequestID+"/cancel", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeRun(t, resp); resp.StatusCode != 200 || got.Status != runs.FailSafe || !slices.Equal(got.Reasons, []govern.Reason{govern.Cancelled}) {
		t.Fatalf("POST cancel: %d %+v", resp.StatusCode, got)
	}
	for _, when := range []string{"cancelled", "after a restart"} {
		if when == "after a restart" {
			f.srv.Close()
			f.start(t)
		}
		got, err := f.svc.Get(ctx, r.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runs.FailSafe || len(got.PendingApprovals) != 0 || got.Envelope.Metadata[govern.MetaPendingApprovals] != nil {
			t.Errorf("%s: run %+v, want fail_safe waiting for nothing", when, got)
		}
		if pending, err := f.g.Approvals(ctx, true); err != nil || len(pending) != 0 {
			t.Errorf("%s: pending approvals %+v, %v", when, pending, err)
		}
		if err := f.svc.Cancel(ctx, r.RequestID); !errors.Is(err, runs.RunFinished) {
			t.Errorf("%s: Cancel again: %v, want RunFinished", when, err)
		}
	}
	if _, err := f.g.Decide(ctx, r.PendingApprovals[0], govern.ApprovalInput{Approver: "bob"}); !errors.Is(err, govern.ErrUnknownApproval) {
		t.Errorf("deciding the cancelled run's approval: %v", err)
	}
	if log := f.ledger.Log(); len(log) != 0 {
		t.Errorf("ledger %v", log)
	}
	const unknown = "f47ac10b-58cc-4372-a567-0e02b2c3d479"
	if err := f.svc.Cancel(ctx, unknown); !errors.Is(err, runs.UnknownRun) {
		t.Errorf("Cancel of an unknown run: %v", err)
	}
	resp, err = http.Post(f.srv.URL+"/v1/runs/"+unknown+"/cancel", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, e := readError(t, resp); code != 404 || e.Code != "UNKNOWN_RUN" {
		t.Errorf("POST cancel of an unknown run: %d %+v", code, e)
	}
}

// TestCancel_PausedRunClaimedElsewhere: with leases, a paused run that
// another replica claimed (to resume it) meanwhile is not closed from
// here: Cancel answers RunElsewhere (409), and the run stays paused.
func TestCancel_PausedRunClaimedElsewhere(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t)
	f.lease = time.Hour
	f.srv.Close()
	f.start(t)
	code, r := f.post(t, `{"agent":"support","input":"please refund o-1001","wait":true}`)
	if code != 200 || r.Status != runs.Paused {
		t.Fatalf("%d %+v", code, r)
	}
	other, ok := f.journal.(interface {
		Claim(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error)
	})
	if !ok {
		t.Fatal("the memory journal keeps no leases")
	}
	if _, err := other.Claim(ctx, r.RequestID, "another-replica", time.Hour); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(f.srv.URL+"/v1/runs/"+r.RequestID+"/cancel", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, e := readError(t, resp); code != http.StatusConflict || e.Code != "RUN_ELSEWHERE" {
		t.Errorf("POST cancel of a run another replica holds: %d %+v", code, e)
	}
	if got := f.get(t, r.RequestID); got.Status != runs.Paused {
		t.Errorf("the run after the refused cancel: %+v", got)
	}
}

// TestWait: Wait returns a run paused for a human at once, and after the
// decision the run that followed, delivered; a run that does not settle
// before ctx ends comes back as it is, with ctx's error; an unknown run
// is UnknownRun.
func TestWait(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t)
	run, err := f.svc.Start(ctx, &runs.StartParams{Agent: "support", Input: "please refund o-1001"})
	if err != nil {
		t.Fatal(err)
	}
	paused, err := f.svc.Wait(ctx, run.RequestID)
	if err != nil || paused.Status != runs.Paused || len(paused.PendingApprovals) != 1 {
		t.Fatalf("Wait = %+v, %v; want paused", paused, err)
	}
	f.approve(t, paused.PendingApprovals[0])
	done, err := f.svc.Wait(ctx, run.RequestID)
	if err != nil || done.Status != runs.Delivered || done.Output == "" {
		t.Errorf("Wait after the approval = %+v, %v; want delivered", done, err)
	}
	if _, err := f.svc.Wait(ctx, "f47ac10b-58cc-4372-a567-0e02b2c3d479"); !errors.Is(err, runs.UnknownRun) {
		t.Errorf("Wait of an unknown run: %v", err)
	}

	model := scripted.New(call("c1", "hold", map[string]any{}), scripted.Step{Text: "never said"})
	b := newBench(t, model, runs.Options{})
	held, err := b.svc.Start(ctx, &runs.StartParams{Agent: "clerk", Input: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	<-b.held
	short, cancel := context.WithCancel(ctx)
	cancel() // the run cannot settle: its call holds until cancelled
	got, err := b.svc.Wait(short, held.RequestID)
	if !errors.Is(err, context.Canceled) || got == nil || got.Status != runs.Running {
		t.Errorf("Wait with an ended context = %+v, %v; want the running run and context.Canceled", got, err)
	}
}

// TestStart_Errors: Start refuses an unknown agent (UnknownAgent) and an
// empty input (InvalidParams), and a closed service starts nothing
// (Unavailable).
func TestStart_Errors(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t)
	for _, tc := range []struct {
		p    *runs.StartParams
		want runs.Code
	}{
		{&runs.StartParams{Agent: "nobody", Input: "x"}, runs.UnknownAgent},
		{&runs.StartParams{Agent: "support"}, runs.InvalidParams},
		{nil, runs.InvalidParams},
	} {
		if _, err := f.svc.Start(ctx, tc.p); !errors.Is(err, tc.want) {
			t.Errorf("Start(%+v): %v, want %s", tc.p, err, tc.want)
		}
	}
	f.svc.Close()
	if _, err := f.svc.Start(ctx, &runs.StartParams{Agent: "support", Input: "status of o-1002?"}); !errors.Is(err, runs.Unavailable) {
		t.Errorf("Start on a closed service: %v", err)
	}
	if _, err := runs.New(ctx, nil); !errors.Is(err, runs.InvalidParams) {
		t.Errorf("New without a governor: %v", err)
	}
}

// countingResults counts the loads of a result store.
type countingResults struct {
	agent.CheckpointStore
	loads atomic.Int32
}

func (c *countingResults) Load(ctx context.Context, id string) (*agent.State, error) {
	c.loads.Add(1)
	return c.CheckpointStore.Load(ctx, id)
}

// TestGet_DeliveredHereFromMemory: the answer of a run delivered in this
// process is reported without loading it from the result store; a
// service that did not run it loads it.
func TestGet_DeliveredHereFromMemory(t *testing.T) {
	ctx := ctxT(t)
	b := newBench(t, scripted.NewT(t, scripted.Step{Text: "done: 42"}), runs.Options{})
	counting := &countingResults{CheckpointStore: b.results}
	b.results = counting
	b.start(t) // a service over the counting store
	run, err := b.svc.Start(ctx, &runs.StartParams{Agent: "clerk", Input: "answer"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.svc.Wait(ctx, run.RequestID)
	if err != nil || got.Status != runs.Delivered || got.Output != "done: 42" {
		t.Fatalf("Wait = %+v, %v; want delivered with its answer", got, err)
	}
	if n := counting.loads.Load(); n != 0 {
		t.Errorf("the answer of a run delivered here was loaded %d times", n)
	}
	b.start(t) // another process
	got, err = b.svc.Get(ctx, run.RequestID)
	if err != nil || got.Output != "done: 42" || counting.loads.Load() == 0 {
		t.Errorf("another service: Get = %+v, %v after %d loads; want the answer, loaded", got, err, counting.loads.Load())
	}
}
