package govern_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/google/go-cmp/cmp"
)

// rollbackRecords returns "kind call_id" for each rollback record of a run.
func rollbackRecords(t *testing.T, j govern.Journal, requestID string) []string {
	t.Helper()
	var out []string
	for _, rec := range runRecords(t, j, requestID) {
		switch rec.Kind {
		case recordkind.RollbackStarted, recordkind.RollbackDone, recordkind.RollbackFailed:
			out = append(out, string(rec.Kind)+" "+rec.CallID)
		}
	}
	return out
}

// writeSome makes the writes the rollback tests undo, in this order: w1
// (write_low_risk), r1 (read_only, nothing to undo), w2 (write_high_risk,
// approved), w3 (write_low_risk whose tool failed: in doubt), w4
// (write_low_risk without rollback metadata), w5 (write_low_risk).
func writeSome(t *testing.T, g *govern.Governor, r *govern.Run) {
	t.Helper()
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "w1", Args: map[string]any{"n": 1}}, &tool{})
	invoke(t, r, readOnly("get"), govern.Call{ID: "r1"}, &tool{})
	approveAndRun(t, g, r, highRisk("wire"), govern.Call{ID: "w2", Args: map[string]any{"n": 2}})
	if _, err := r.Invoke(bg, withRollback(lowRisk("put")), govern.Call{ID: "w3", Args: map[string]any{"n": 3}}, (&tool{err: errors.New("timeout talking to the bank")}).fn); !errors.Is(err, govern.ToolFailed) {
		t.Fatalf("w3: %v", err)
	}
	invoke(t, r, lowRisk("log"), govern.Call{ID: "w4"}, &tool{})
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "w5", Args: map[string]any{"n": 5}}, &tool{})
}

// TestUAICP_5_3_RollbackReverseOrder: when a run fails, its writes with
// rollback metadata — committed and in doubt — are rolled back newest
// first, each exactly once however often Fail is called, and journaled
// as rollback_started then rollback_done.
func TestUAICP_5_3_RollbackReverseOrder(t *testing.T) {
	log := &rollbackLog{}
	g := newGov(t, baseOpts(t, log))
	r := start(t, g, govern.RunOptions{})
	writeSome(t, g, r)
	env, err := r.Fail(bg, "the model changed its mind", govern.VerificationFailed)
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, env)
	if diff := cmp.Diff([]string{"w5", "w3", "w2", "w1"}, log.targets()); diff != "" {
		t.Errorf("rollbacks (-want +got):\n%s", diff)
	}
	if got := envReasons(env); !slices.Equal(got, []govern.Reason{govern.VerificationFailed}) {
		t.Errorf("reasons %v", got)
	}
	for range 3 {
		if _, err := r.Fail(bg, "again", govern.InternalError); !errors.Is(err, govern.ErrRunClosed) {
			t.Errorf("Fail again: %v", err)
		}
	}
	if len(log.targets()) != 4 {
		t.Errorf("rollbacks after repeated Fail: %v", log.targets())
	}
	want := []string{
		"rollback_started w5", "rollback_done w5", "rollback_started w3", "rollback_done w3",
		"rollback_started w2", "rollback_done w2", "rollback_started w1", "rollback_done w1",
	}
	if diff := cmp.Diff(want, rollbackRecords(t, g.Journal(), r.RequestID())); diff != "" {
		t.Errorf("rollback records (-want +got):\n%s", diff)
	}
	// Every rollback precedes the fail_safe transition, which is last.
	recs := runRecords(t, g.Journal(), r.RequestID())
	if last := recs[len(recs)-1]; last.Kind != recordkind.Transition || last.To != govern.FailSafe {
		t.Errorf("last record %s→%s (%s), want the fail_safe transition", last.From, last.To, last.Kind)
	}
	for _, rec := range recs {
		if rec.Kind == recordkind.RollbackStarted {
			var d govern.RollbackData
			if err := json.Unmarshal(rec.Data, &d); err != nil || d.Action == nil || d.Action.Type != undoType || d.Action.Target != rec.CallID {
				t.Errorf("rollback_started data %s (%v)", rec.Data, err)
			}
		}
	}
}

// TestUAICP_5_3_RollbackFailure: a failing, panicking or hanging
// rollback handler marks the run ROLLBACK_FAILED and NEEDS_REVIEW; the
// other rollbacks still run, and nothing is retried by a second Fail.
//
// It runs in a synctest bubble: the 1 ms rollback timeout fires only when
// every goroutine is blocked (the hanging handler), never before a quick
// handler has been scheduled, however loaded the machine.
func TestUAICP_5_3_RollbackFailure(t *testing.T) { synctest.Test(t, testRollbackFailure) }

func testRollbackFailure(t *testing.T) {
	log := &rollbackLog{fail: map[string]bool{"w2": true}, panic: map[string]bool{"w3": true}}
	opts := baseOpts(t, log)
	opts.RollbackTimeout = time.Millisecond
	var hung atomic.Int32
	opts.Rollbacks["hang"] = func(ctx context.Context, a govern.RollbackAction) error {
		hung.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{})
	writeSome(t, g, r)
	hanging := govern.ToolSpec{Name: "slowput", Tier: govern.WriteLowRisk, Rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "hang", Target: "w6"}, nil
	}}
	invoke(t, r, hanging, govern.Call{ID: "w6"}, &tool{})
	env, err := r.Fail(bg, "give up", govern.VerificationFailed)
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, env)
	wantEnvReasons(t, env, govern.VerificationFailed, govern.RollbackFailed, govern.NeedsReview)
	if diff := cmp.Diff([]string{"w5", "w3", "w2", "w1"}, log.targets()); diff != "" {
		t.Errorf("rollbacks (-want +got):\n%s", diff)
	}
	if hung.Load() != 1 {
		t.Errorf("hanging rollback called %d times", hung.Load())
	}
	if !slices.Contains(r.Reasons(), govern.RollbackFailed) {
		t.Errorf("run reasons %v", r.Reasons())
	}
	want := []string{
		"rollback_started w6", "rollback_failed w6",
		"rollback_started w5", "rollback_done w5", "rollback_started w3", "rollback_failed w3",
		"rollback_started w2", "rollback_failed w2", "rollback_started w1", "rollback_done w1",
	}
	if diff := cmp.Diff(want, rollbackRecords(t, g.Journal(), r.RequestID())); diff != "" {
		t.Errorf("rollback records (-want +got):\n%s", diff)
	}
	for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
		if rec.Kind == recordkind.RollbackFailed && (rec.Outcome != govern.Failure || !slices.Contains(rec.Reasons, govern.RollbackFailed)) {
			t.Errorf("rollback_failed record %+v", rec)
		}
	}
	if _, err := r.Fail(bg, "again"); !errors.Is(err, govern.ErrRunClosed) {
		t.Errorf("Fail again: %v", err)
	}
	if len(log.targets()) != 4 || hung.Load() != 1 {
		t.Errorf("rollbacks retried: %v, hung %d", log.targets(), hung.Load())
	}
}

// TestUAICP_5_3_RecoverInDoubt: a new governor over the journal of one
// that died mid-run closes the abandoned run as fail_safe with
// RECOVERED_IN_DOUBT after rolling back its writes newest first; closed
// and paused runs are left alone, and Recover is idempotent.
func TestUAICP_5_3_RecoverInDoubt(t *testing.T) {
	j := govern.NewMemoryJournal()
	log := &rollbackLog{}
	opts := baseOpts(t, log)
	opts.Journal = j
	g1 := newGov(t, opts)
	abandoned := start(t, g1, govern.RunOptions{})
	writeSome(t, g1, abandoned)
	delivered := start(t, g1, govern.RunOptions{})
	invoke(t, delivered, withRollback(lowRisk("put")), govern.Call{ID: "d1"}, &tool{})
	verifyPass(t, delivered, "ok")
	paused := start(t, g1, govern.RunOptions{})
	invoke(t, paused, withRollback(lowRisk("put")), govern.Call{ID: "p1"}, &tool{})
	_, err := paused.Invoke(bg, highRisk("wire"), govern.Call{ID: "p2"}, notCalled(t))
	approvalOf(t, g1, err)
	if err := paused.Pause(bg, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}

	// g1 "crashes": a new governor takes over the journal.
	g2 := newGov(t, opts)
	rep, err := g2.Recover(bg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Closed, []string{abandoned.RequestID()}) || rep.RolledBack != 4 || rep.RollbackFailures != 0 ||
		!slices.Equal(rep.Paused, []string{paused.RequestID()}) {
		t.Errorf("recovery report %+v", rep)
	}
	if diff := cmp.Diff([]string{"w5", "w3", "w2", "w1"}, log.targets()); diff != "" {
		t.Errorf("rollbacks (-want +got):\n%s", diff)
	}
	r, err := g2.Attach(bg, abandoned.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if r.Phase() != govern.FailSafe || !slices.Contains(r.Reasons(), govern.RecoveredInDoubt) {
		t.Errorf("recovered run: phase %s reasons %v", r.Phase(), r.Reasons())
	}
	env := r.Envelope()
	checkWire(t, env)
	if env.Outcome != govern.Uncertain {
		t.Errorf("outcome %s", env.Outcome)
	}
	wantEnvReasons(t, &env, govern.RecoveredInDoubt)
	recs := runRecords(t, j, abandoned.RequestID())
	last := recs[len(recs)-1]
	if last.To != govern.FailSafe || last.Actor.Kind != govern.ActorSystem || !slices.Contains(last.Reasons, govern.RecoveredInDoubt) {
		t.Errorf("recovery transition %+v", last)
	}
	// Idempotent, on this governor and the next.
	for _, g := range []*govern.Governor{g2, newGov(t, opts)} {
		rep, err := g.Recover(bg)
		if err != nil || len(rep.Closed) != 0 || rep.RolledBack != 0 || !slices.Equal(rep.Paused, []string{paused.RequestID()}) {
			t.Errorf("second Recover: %+v %v", rep, err)
		}
	}
	if len(log.targets()) != 4 {
		t.Errorf("rollbacks after repeated recovery: %v", log.targets())
	}
	// The paused run is intact: still waiting for its approval.
	p, err := g2.Attach(bg, paused.RequestID())
	if err != nil || !p.Paused() || p.Phase() != govern.Execute || len(p.PendingApprovals()) != 1 {
		t.Errorf("paused run after recovery: %v paused=%v phase=%s", err, p != nil && p.Paused(), p.Phase())
	}
}

// TestUAICP_5_3_RecoverResumesRollback: recovery runs the rollbacks a
// crash interrupted — started but not done — and skips those done.
func TestUAICP_5_3_RecoverResumesRollback(t *testing.T) {
	j := govern.NewMemoryJournal()
	log := &rollbackLog{}
	opts := baseOpts(t, log)
	opts.Journal = j
	g1 := newGov(t, opts)
	r := start(t, g1, govern.RunOptions{})
	for _, id := range []string{"w1", "w2"} {
		invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: id}, &tool{})
	}
	// Simulate a Fail that crashed after undoing w2 and while undoing w1.
	rb := func(kind govern.RecordKind, callID string, outcome govern.Outcome) *govern.Record {
		data, _ := json.Marshal(govern.RollbackData{Action: &govern.RollbackAction{Type: undoType, Target: callID, Payload: map[string]any{"call": callID}}})
		return &govern.Record{Kind: kind, RequestID: r.RequestID(), TraceID: r.TraceID(), Actor: govern.Actor{ID: agentID, Kind: govern.ActorAgent},
			Timestamp: govern.Time{Time: time.Now().UTC()}, Tool: "put", CallID: callID, Outcome: outcome, Data: data}
	}
	if err := j.Append(bg, true, rb(recordkind.RollbackStarted, "w2", govern.Pending), rb(recordkind.RollbackDone, "w2", govern.Success),
		rb(recordkind.RollbackStarted, "w1", govern.Pending)); err != nil {
		t.Fatal(err)
	}
	g2 := newGov(t, opts)
	rep, err := g2.Recover(bg)
	if err != nil || rep.RolledBack != 1 || len(rep.Closed) != 1 {
		t.Fatalf("Recover = %+v, %v", rep, err)
	}
	if diff := cmp.Diff([]string{"w1"}, log.targets()); diff != "" {
		t.Errorf("rollbacks (-want +got):\n%s", diff)
	}
}

// TestUAICP_5_3_RecoverFailingRollback: a rollback that fails during
// recovery leaves the run closed and flagged for review.
func TestUAICP_5_3_RecoverFailingRollback(t *testing.T) {
	j := govern.NewMemoryJournal()
	log := &rollbackLog{fail: map[string]bool{"w1": true}}
	opts := baseOpts(t, log)
	opts.Journal = j
	g1 := newGov(t, opts)
	r := start(t, g1, govern.RunOptions{})
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "w1"}, &tool{})
	g2 := newGov(t, opts)
	rep, err := g2.Recover(bg)
	if err != nil || rep.RollbackFailures != 1 || len(rep.Closed) != 1 {
		t.Fatalf("Recover = %+v, %v", rep, err)
	}
	a, err := g2.Attach(bg, r.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []govern.Reason{govern.RecoveredInDoubt, govern.RollbackFailed, govern.NeedsReview} {
		if !slices.Contains(a.Reasons(), want) {
			t.Errorf("reasons %v, want %s", a.Reasons(), want)
		}
	}
}

// TestUAICP_5_3_RecoverOwnNodeOnly: replicas sharing a journal recover
// only the runs of their own node.
func TestUAICP_5_3_RecoverOwnNodeOnly(t *testing.T) {
	j := govern.NewMemoryJournal()
	log := &rollbackLog{}
	opts := baseOpts(t, log)
	opts.Journal, opts.Node = j, "node-a"
	ga := newGov(t, opts)
	r := start(t, ga, govern.RunOptions{})
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "w1"}, &tool{})
	opts.Node = "node-b"
	if rep, err := newGov(t, opts).Recover(bg); err != nil || len(rep.Closed) != 0 {
		t.Fatalf("node-b recovered node-a's run: %+v %v", rep, err)
	}
	opts.Node = "node-a"
	if rep, err := newGov(t, opts).Recover(bg); err != nil || !slices.Equal(rep.Closed, []string{r.RequestID()}) {
		t.Fatalf("node-a restarted: %+v %v", rep, err)
	}
	if !slices.Equal(log.targets(), []string{"w1"}) {
		t.Errorf("rollbacks %v", log.targets())
	}
}
