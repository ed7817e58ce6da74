package govern_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// TestUAICP_4_3_ParentTraceID: a child run names its parent's trace as
// parent_trace_id on its envelopes, its evidence and its journal records.
func TestUAICP_4_3_ParentTraceID(t *testing.T) {
	g := newGov(t, govern.Options{})
	parent := start(t, g, govern.RunOptions{})
	child := start(t, g, govern.RunOptions{Parent: parent})
	if child.ParentTraceID() != parent.TraceID() || child.TraceID() == parent.TraceID() || !govern.ValidTraceID(child.TraceID()) {
		t.Fatalf("child trace %s parent trace %s, parent's %s", child.TraceID(), child.ParentTraceID(), parent.TraceID())
	}
	if env := child.Envelope(); env.ParentTraceID != parent.TraceID() {
		t.Errorf("child envelope parent_trace_id %q", env.ParentTraceID)
	}
	inv := invoke(t, child, readOnly("look"), govern.Call{ID: "c1"}, &tool{})
	if inv.Envelope.ParentTraceID != parent.TraceID() || inv.Evidence[0].ParentTraceID != parent.TraceID() {
		t.Errorf("call envelope / evidence parent trace %q / %q", inv.Envelope.ParentTraceID, inv.Evidence[0].ParentTraceID)
	}
	ev, err := child.AddEvidence(bg, govern.Evidence{Source: "s", Payload: json.RawMessage(`1`)})
	if err != nil || ev.ParentTraceID != parent.TraceID() {
		t.Errorf("evidence parent trace %q (%v)", ev.ParentTraceID, err)
	}
	env := verifyPass(t, child, "child result")
	if env.ParentTraceID != parent.TraceID() {
		t.Errorf("deliver envelope parent trace %q", env.ParentTraceID)
	}
	for _, rec := range runRecords(t, g.Journal(), child.RequestID()) {
		if rec.ParentTraceID != parent.TraceID() {
			t.Errorf("child record %d (%s) parent_trace_id %q", rec.Seq, rec.Kind, rec.ParentTraceID)
		}
	}
	if env := parent.Envelope(); env.ParentTraceID != "" {
		t.Errorf("parent envelope has a parent trace %q", env.ParentTraceID)
	}
	// A parent governed elsewhere is named by its trace alone.
	remote := govern.NewTraceID()
	orphan := start(t, g, govern.RunOptions{ParentTraceID: remote})
	if orphan.Envelope().ParentTraceID != remote {
		t.Errorf("orphan parent trace %q", orphan.Envelope().ParentTraceID)
	}
	verifyPass(t, orphan, "x")
	verifyPass(t, parent, "parent result")
}

// TestUAICP_4_3_ChildFailureBubblesUp: a child in fail_safe, or one not
// resolved yet, makes the parent's verification fail with CHILD_FAILED,
// so the parent cannot deliver; a delivered child lets it.
func TestUAICP_4_3_ChildFailureBubblesUp(t *testing.T) {
	t.Run("failed child", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		parent := start(t, g, govern.RunOptions{})
		ok := start(t, g, govern.RunOptions{Parent: parent})
		verifyPass(t, ok, "fine")
		_, err := g.Execute(bg, &govern.RunOptions{Identity: testIdentity(), Parent: parent}, func(context.Context, *govern.Run, *govern.Verdict) (any, error) {
			return nil, govern.Reason(govern.PolicyBlocked)
		})
		wantReasons(t, err, govern.PolicyBlocked)
		v, err := parent.Verify(bg, "out")
		if err != nil {
			t.Fatal(err)
		}
		checkVerdict(t, v)
		if v.Passed || !slices.Contains(v.Reasons, govern.ChildFailed) {
			t.Fatalf("parent verdict passed=%v reasons=%v, want CHILD_FAILED", v.Passed, v.Reasons)
		}
		if _, err := parent.Deliver(bg, "out"); !errors.Is(err, govern.ErrNotVerified) {
			t.Errorf("parent Deliver: %v", err)
		}
		var childRecs []govern.ChildData
		for _, rec := range runRecords(t, g.Journal(), parent.RequestID()) {
			if rec.Kind == recordkind.Child {
				var d govern.ChildData
				if err := json.Unmarshal(rec.Data, &d); err != nil {
					t.Fatal(err)
				}
				childRecs = append(childRecs, d)
				if d.Phase == govern.FailSafe && (rec.Outcome != govern.Uncertain || !slices.Contains(rec.Reasons, govern.ChildFailed)) {
					t.Errorf("child_finished record of a failed child: %+v", rec)
				}
			}
		}
		if len(childRecs) != 4 { // two started, two finished
			t.Errorf("child records %+v", childRecs)
		}
		env, err := parent.Fail(bg, "a child failed", v.Reasons...)
		if err != nil {
			t.Fatal(err)
		}
		wantEnvReasons(t, env, govern.ChildFailed)
	})
	t.Run("unresolved child", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		parent := start(t, g, govern.RunOptions{})
		child := start(t, g, govern.RunOptions{Parent: parent})
		v, err := parent.Verify(bg, "out")
		if err != nil || v.Passed || !slices.Contains(v.Reasons, govern.ChildFailed) {
			t.Fatalf("parent verdict with a running child: %+v %v", v, err)
		}
		// Once the child delivers, a repair lets the parent deliver.
		verifyPass(t, child, "done")
		if err := parent.Repair(bg, govern.Execute, "child resolved"); err != nil {
			t.Fatal(err)
		}
		verifyPass(t, parent, "out")
	})
	t.Run("child started after verification", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		parent := start(t, g, govern.RunOptions{})
		if v, err := parent.Verify(bg, "out"); err != nil || !v.Passed {
			t.Fatal(v, err)
		}
		late := start(t, g, govern.RunOptions{Parent: parent})
		if _, err := parent.Deliver(bg, "out"); !errors.Is(err, govern.ErrNotVerified) {
			t.Errorf("Deliver past an unresolved child: err = %v, want ErrNotVerified", err)
		}
		verifyPass(t, late, "x")
		verifyDeliverOnly(t, parent, "out")
	})
	t.Run("delivered children", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		parent := start(t, g, govern.RunOptions{})
		for range 3 {
			d, err := g.Execute(bg, &govern.RunOptions{Identity: testIdentity(), Parent: parent}, func(context.Context, *govern.Run, *govern.Verdict) (any, error) {
				return "part", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			checkWire(t, d.Envelope)
		}
		verifyPass(t, parent, "whole")
	})
}

// TestUAICP_4_3_ChildRunCannotWaitForApproval: a child run's
// write_high_risk call is refused (POLICY_BLOCKED) instead of opening an
// approval request — the child runs inside its parent's call, which
// cannot pause on it — the tool does not run, and nothing is left
// pending; the same call in a top-level run opens a request.
func TestUAICP_4_3_ChildRunCannotWaitForApproval(t *testing.T) {
	g := newGov(t, baseOpts(t, nil))
	parent := start(t, g, govern.RunOptions{})
	child := start(t, g, govern.RunOptions{Parent: parent})
	_, err := child.Invoke(bg, highRisk("refund"), govern.Call{ID: "c1", Args: map[string]any{"order": "o-1"}}, notCalled(t))
	wantReasons(t, err, govern.PolicyBlocked)
	if ge := (*govern.Error)(nil); !errors.As(err, &ge) || ge.ApprovalID != "" {
		t.Errorf("child refusal %+v names an approval", err)
	}
	if p := child.PendingApprovals(); len(p) != 0 {
		t.Errorf("the child has pending approvals %v", p)
	}
	if pending, err := g.Approvals(bg, true); err != nil || len(pending) != 0 {
		t.Errorf("pending approvals %v %v", pending, err)
	}
	_, err = parent.Invoke(bg, highRisk("refund"), govern.Call{ID: "p1", Args: map[string]any{"order": "o-1"}}, notCalled(t))
	approvalOf(t, g, err)
}

// replicas returns two governors on one journal, as two replicas on one
// store (nodes "a" and "b").
func replicas(t *testing.T) (a, b *govern.Governor, journal govern.Journal) {
	t.Helper()
	opts := baseOpts(t, nil)
	opts.Journal, opts.Node = govern.NewMemoryJournal(), "a"
	a = newGov(t, opts)
	opts.Node = "b"
	return a, newGov(t, opts), opts.Journal
}

// Two governors on one journal, as two replicas on one store: a run the
// first pauses, the second reads as paused; once the first resumes and
// delivers it, the second reads it delivered — Attach reads the journal
// again instead of keeping what it read, and keeps nothing it does not
// execute.
func TestAttachReadsWhatAnotherProcessDid(t *testing.T) {
	a, b, _ := replicas(t)
	run := start(t, a, govern.RunOptions{})
	call := govern.Call{ID: "c1", Args: map[string]any{"order": "o-1"}}
	_, err := run.Invoke(bg, highRisk("refund"), call, notCalled(t))
	req := approvalOf(t, a, err)
	if err := run.Pause(bg, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Attach(bg, run.RequestID()); err != nil || !r.Paused() {
		t.Fatalf("b reads the run: paused=%v %v", r != nil && r.Paused(), err)
	}
	if _, err := a.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); err != nil {
		t.Fatal(err)
	}
	resumed, err := a.Attach(bg, run.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resumed.Resume(bg); err != nil {
		t.Fatal(err)
	}
	if again, _ := a.Attach(bg, run.RequestID()); again != resumed {
		t.Error("a's Attach does not return the run a executes")
	}
	invoke(t, resumed, highRisk("refund"), call, &tool{})
	verifyPass(t, resumed, "refunded")
	r, err := b.Attach(bg, run.RequestID())
	if err != nil || r.Phase() != govern.Deliver {
		t.Errorf("b reads the run after a delivered it: %v %v (approval %s)", r.Phase(), err, req.ID)
	}
}

// TestUAICP_5_3_OneResumePerPause: two governors on one journal (two
// replicas) resume the same decided pause at once: the journal takes one
// run_resumed for that pause, the other Resume fails with ErrDuplicate
// and the run is resumed once. A later pause of the run is resumed again.
func TestUAICP_5_3_OneResumePerPause(t *testing.T) {
	a, b, journal := replicas(t)
	run := start(t, a, govern.RunOptions{})
	// pauseDecided pauses r, executing on g, on a refund approved at once.
	pauseDecided := func(g *govern.Governor, r *govern.Run, callID string) {
		t.Helper()
		_, err := r.Invoke(bg, highRisk("refund"), govern.Call{ID: callID, Args: map[string]any{"order": callID}}, notCalled(t))
		req := approvalOf(t, g, err)
		if err := r.Pause(bg, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); err != nil {
			t.Fatal(err)
		}
	}
	pauseDecided(a, run, "c1")
	ra, err := a.Attach(bg, run.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Attach(bg, run.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, r := range []*govern.Run{ra, rb} {
		wg.Go(func() { _, errs[i] = r.Resume(bg) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), govern.ErrDuplicate) {
		t.Fatalf("two resumes of one pause: %v, %v; want one nil and one ErrDuplicate", errs[0], errs[1])
	}
	resumed := 0
	for _, rec := range runRecords(t, journal, run.RequestID()) {
		if rec.Kind == recordkind.Resumed {
			resumed++
		}
	}
	if resumed != 1 {
		t.Errorf("%d run_resumed records, want 1", resumed)
	}
	// The winner goes on: the approved call runs, and a later pause is
	// resumed once more.
	winner, g := ra, a
	if errs[0] != nil {
		winner, g = rb, b
	}
	invoke(t, winner, highRisk("refund"), govern.Call{ID: "c1", Args: map[string]any{"order": "c1"}}, &tool{})
	pauseDecided(g, winner, "c2")
	again, err := a.Attach(bg, run.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Resume(bg); err != nil {
		t.Errorf("resuming the second pause: %v", err)
	}
}

// TestUAICP_4_1_OneEndPerRun: a run ends once in the journal, also when
// two processes hold it: after a delivered it, b's stale copy cannot fail
// it safe — the journal refuses a second terminal transition.
func TestUAICP_4_1_OneEndPerRun(t *testing.T) {
	a, b, journal := replicas(t)
	run := start(t, a, govern.RunOptions{})
	stale, err := b.Attach(bg, run.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	verifyPass(t, run, "done")
	if _, err := stale.Fail(bg, "b thinks the run is lost", govern.InternalError); !errors.Is(err, govern.ErrDuplicate) {
		t.Errorf("a second end: %v, want ErrDuplicate", err)
	}
	ends := 0
	for _, rec := range runRecords(t, journal, run.RequestID()) {
		if rec.Kind == recordkind.Transition && rec.To.Terminal() {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("%d terminal transitions, want 1", ends)
	}
	if r, err := b.Attach(bg, run.RequestID()); err != nil || r.Phase() != govern.Deliver {
		t.Errorf("b reads the run: %v %v, want deliver", r.Phase(), err)
	}
}
