package govern_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/google/go-cmp/cmp"
)

// pausedRun starts a run on opts that wrote once (call "w1", with a
// rollback) and paused for the approval of a high-risk call; it returns
// the run's request ID and the approval request.
func pausedRun(t *testing.T, opts govern.Options) (string, govern.ApprovalRequest) {
	t.Helper()
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{Resumer: "agent-x"})
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "w1"}, &tool{result: "written"})
	_, err := r.Invoke(bg, highRisk("deploy"), govern.Call{ID: "c2"}, notCalled(t))
	req := approvalOf(t, g, err)
	if err := r.Pause(bg, json.RawMessage(`{"step":2}`)); err != nil {
		t.Fatal(err)
	}
	return r.RequestID(), req
}

// TestUAICP_7_FailSafePausedRun: a paused run can be closed — cancelled
// by an operator — with Attach then Fail: it ends in fail_safe with the
// reason given, the writes it recorded before its pause are rolled back,
// and it waits for nothing any more: its envelope lists no pending
// approval (a closed run's approvals cannot be decided), the governor
// lists none, a decision on one is refused and the run cannot resume —
// in this governor and after a restart.
func TestUAICP_7_FailSafePausedRun(t *testing.T) {
	log := &rollbackLog{}
	opts := baseOpts(t, log)
	opts.Journal = govern.NewMemoryJournal()
	id, req := pausedRun(t, opts)

	g := newGov(t, opts) // the process that cancels: another one, or the same after a restart
	r, err := g.Attach(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	env, err := r.Fail(bg, "cancelled while paused", govern.Cancelled)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"w1"}, log.targets()); diff != "" {
		t.Errorf("rolled back (-want +got):\n%s", diff)
	}
	for _, when := range []string{"failed", "after a restart"} {
		if when == "after a restart" {
			g = newGov(t, opts)
			if r, err = g.Attach(bg, id); err != nil {
				t.Fatal(err)
			}
			e := r.Envelope()
			env = &e
		}
		checkWire(t, env)
		if env.State != govern.FailSafe || env.Outcome != govern.Uncertain {
			t.Errorf("%s: envelope %s %s, want fail_safe uncertain", when, env.State, env.Outcome)
		}
		wantEnvReasons(t, env, govern.Cancelled)
		if p, ok := env.Metadata[govern.MetaPendingApprovals]; ok {
			t.Errorf("%s: the closed run's envelope lists pending approvals %v", when, p)
		}
		if list, err := g.Approvals(bg, true); err != nil || len(list) != 0 {
			t.Errorf("%s: pending approvals %+v, %v", when, list, err)
		}
		if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); !errors.Is(err, govern.ErrUnknownApproval) {
			t.Errorf("%s: deciding the closed run's approval: %v, want ErrUnknownApproval", when, err)
		}
		if _, err := r.Resume(bg); !errors.Is(err, govern.ErrRunClosed) {
			t.Errorf("%s: Resume: %v, want ErrRunClosed", when, err)
		}
	}
	if got := log.targets(); len(got) != 1 {
		t.Errorf("rollbacks %v: a write was undone twice", got)
	}
}

// TestUAICP_7_NoResumeWhileFailing: a decided paused run that is being
// failed (its rollback under way) does not resume: Resume refuses with
// ErrRunClosed and journals nothing, and the run ends in fail_safe.
func TestUAICP_7_NoResumeWhileFailing(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	opts := baseOpts(t, nil)
	opts.Journal = govern.NewMemoryJournal()
	opts.Rollbacks = map[string]govern.RollbackFunc{undoType: func(ctx context.Context, a govern.RollbackAction) error {
		close(entered)
		<-release
		return nil
	}}
	opts.RollbackTimeout = time.Hour // the test releases it
	id, req := pausedRun(t, opts)
	g := newGov(t, opts)
	if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); err != nil {
		t.Fatal(err)
	}
	r, err := g.Attach(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := r.Fail(bg, "cancelled while paused", govern.Cancelled)
		failed <- err
	}()
	<-entered
	before := len(runRecords(t, g.Journal(), id))
	_, rerr := r.Resume(bg)
	after := runRecords(t, g.Journal(), id)
	close(release)
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rerr, govern.ErrRunClosed) {
		t.Errorf("Resume during the fail: %v, want ErrRunClosed", rerr)
	}
	if slices.ContainsFunc(after[before:], func(rec govern.Record) bool { return rec.Kind == recordkind.Resumed }) {
		t.Errorf("a run_resumed was journaled during the fail: %v", kinds(after[before:]))
	}
	if r.Phase() != govern.FailSafe {
		t.Errorf("phase %s, want fail_safe", r.Phase())
	}
}
