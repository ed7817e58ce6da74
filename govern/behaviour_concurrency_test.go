package govern_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// TestUAICP_4_2_ParallelInvokes: 32 calls of one run in parallel — read
// only, low risk and approved high risk — each run and commit exactly
// once, and asked again in parallel they are replayed; the journal chain
// holds (checked by newGov's audit).
func TestUAICP_4_2_ParallelInvokes(t *testing.T) {
	log := &rollbackLog{}
	g := newGov(t, baseOpts(t, log))
	r := start(t, g, govern.RunOptions{})
	type job struct {
		spec govern.ToolSpec
		call govern.Call
		f    *tool
	}
	var jobs []job
	for i := range 32 {
		call := govern.Call{ID: fmt.Sprintf("c%02d", i), Args: map[string]any{"i": i}}
		var spec govern.ToolSpec
		switch i % 4 {
		case 0, 1:
			spec = readOnly("read")
		case 2:
			spec = withRollback(lowRisk("write"))
		case 3:
			spec = highRisk("risky")
			approve(t, g, r, spec, call, alice) // decided before the race
		}
		jobs = append(jobs, job{spec, call, &tool{result: i}})
	}
	runAll := func() []*govern.Invocation {
		invs := make([]*govern.Invocation, len(jobs))
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for i, j := range jobs {
			wg.Go(func() {
				<-gate
				inv, err := r.Invoke(bg, j.spec, j.call, j.f.fn)
				if err != nil {
					t.Errorf("%s: %v", j.call.ID, err)
					return
				}
				invs[i] = inv
			})
		}
		close(gate)
		wg.Wait()
		return invs
	}
	for i, inv := range runAll() {
		if inv == nil {
			continue
		}
		checkInvocation(t, inv)
		if inv.Replayed || inv.CallID != jobs[i].call.ID || inv.Result != i {
			t.Errorf("%s: %+v", jobs[i].call.ID, inv)
		}
	}
	for i, inv := range runAll() {
		if inv != nil && (!inv.Replayed || fmt.Sprint(inv.Result) != fmt.Sprint(i)) {
			t.Errorf("%s asked again: replayed %v result %v", jobs[i].call.ID, inv.Replayed, inv.Result)
		}
	}
	for _, j := range jobs {
		if j.f.n() != 1 {
			t.Errorf("%s ran %d times", j.call.ID, j.f.n())
		}
	}
	count := map[govern.RecordKind]int{}
	for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
		count[rec.Kind]++
	}
	if count[recordkind.Commit] != 32 || count[recordkind.Intent] != 16 || count[recordkind.ApprovalDecided] != 8 {
		t.Errorf("record counts %v", count)
	}
	if len(r.Evidence()) != 32 {
		t.Errorf("%d evidence objects", len(r.Evidence()))
	}
	if _, err := r.Fail(bg, "undo it all"); err != nil {
		t.Fatal(err)
	}
	if got := log.targets(); len(got) != 16 {
		t.Errorf("%d rollbacks, want 16: %v", len(got), got)
	}
}

// TestUAICP_4_2_FailWaitsForCalls: Fail waits for the calls in flight:
// it closes the run to new work at once, lets the running call commit,
// then rolls it back, and only then takes the fail_safe edge.
func TestUAICP_4_2_FailWaitsForCalls(t *testing.T) {
	log := &rollbackLog{}
	g := newGov(t, baseOpts(t, log))
	r := start(t, g, govern.RunOptions{})
	entered, release := make(chan struct{}), make(chan struct{})
	invoked := make(chan error, 1)
	go func() {
		_, err := r.Invoke(bg, withRollback(lowRisk("slow")), govern.Call{ID: "w1"}, func(ctx context.Context) (any, error) {
			close(entered)
			<-release
			return "done", nil
		})
		invoked <- err
	}()
	<-entered
	failed := make(chan *govern.Envelope, 1)
	go func() {
		env, err := r.Fail(bg, "stop", govern.Cancelled)
		if err != nil {
			t.Error(err)
		}
		failed <- env
	}()
	// Wait until Fail has closed the run to new work (no timing involved:
	// Advance has no effect while the run is usable).
	for !errors.Is(r.Advance(bg, govern.Execute), govern.ErrRunClosed) {
		runtime.Gosched()
	}
	if p := r.Phase(); p != govern.Execute {
		t.Fatalf("phase %s while a call is still running", p)
	}
	if _, err := r.Invoke(bg, readOnly("new"), govern.Call{}, notCalled(t)); !errors.Is(err, govern.ErrRunClosed) {
		t.Errorf("new call while failing: %v", err)
	}
	select {
	case <-failed:
		t.Fatal("Fail returned while a call was running")
	default:
	}
	close(release)
	if err := <-invoked; err != nil {
		t.Fatalf("the running call: %v", err)
	}
	env := <-failed
	checkWire(t, env)
	if env.State != govern.FailSafe || !slices.Equal(log.targets(), []string{"w1"}) {
		t.Errorf("state %s rollbacks %v", env.State, log.targets())
	}
	var order []govern.RecordKind
	for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
		switch rec.Kind {
		case recordkind.Commit, recordkind.RollbackDone:
			order = append(order, rec.Kind)
		case recordkind.Transition:
			if rec.To == govern.FailSafe {
				order = append(order, "fail_safe")
			}
		}
	}
	if !slices.Equal(order, []govern.RecordKind{recordkind.Commit, recordkind.RollbackDone, "fail_safe"}) {
		t.Errorf("order %v, want commit, rollback, fail_safe", order)
	}
}

// TestUAICP_4_2_SameCallIDConcurrently: a call ID in flight — even still
// in its gate — is not run a second time by a concurrent Invoke.
func TestUAICP_4_2_SameCallIDConcurrently(t *testing.T) {
	inPolicy, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	policy := govern.PolicyFunc(func(ctx context.Context, in govern.PolicyInput) (govern.Decision, error) {
		if first.CompareAndSwap(false, true) {
			close(inPolicy)
			<-release
		}
		return govern.Decision{Effect: govern.Allow}, nil
	})
	g := newGov(t, govern.Options{Policy: policy})
	r := start(t, g, govern.RunOptions{})
	f := &tool{}
	call := govern.Call{ID: "dup", Args: map[string]any{"n": 1}}
	done := make(chan error, 1)
	go func() {
		_, err := r.Invoke(bg, lowRisk("charge"), call, f.fn)
		done <- err
	}()
	<-inPolicy
	if _, err := r.Invoke(bg, lowRisk("charge"), call, f.fn); err == nil {
		t.Error("a second Invoke of a call in flight succeeded")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.n() != 1 {
		t.Fatalf("the charge ran %d times", f.n())
	}
	inv, err := r.Invoke(bg, lowRisk("charge"), call, f.fn)
	if err != nil || !inv.Replayed || f.n() != 1 {
		t.Fatalf("after the first committed: %v replayed=%v ran=%d", err, inv != nil && inv.Replayed, f.n())
	}
	verifyPass(t, r, "out")
}

// TestUAICP_4_2_ConcurrentFailAndDecide: of concurrent Fails one closes
// the run and each rollback runs once; of concurrent decisions on one
// approval request exactly one is recorded.
func TestUAICP_4_2_ConcurrentFailAndDecide(t *testing.T) {
	log := &rollbackLog{}
	g := newGov(t, baseOpts(t, log))
	r := start(t, g, govern.RunOptions{})
	for i := range 4 {
		invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: fmt.Sprintf("w%d", i)}, &tool{})
	}
	_, err := r.Invoke(bg, highRisk("wire"), govern.Call{ID: "h"}, notCalled(t))
	req := approvalOf(t, g, err)

	var decided, already atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			a := []approver{alice, bob}[i%2]
			var in govern.ApprovalInput
			if i%3 == 0 {
				in = govern.ApprovalInput{Approve: false, Approver: a.name}
			} else {
				in = govern.ApprovalInput{Approve: true, Token: sign(t, a, claimsFor(a, req))}
			}
			_, err := g.Decide(bg, req.ID, in)
			switch {
			case err == nil:
				decided.Add(1)
			case errors.Is(err, govern.ErrAlreadyDecided):
				already.Add(1)
			default:
				t.Errorf("Decide: %v", err)
			}
		})
	}
	wg.Wait()
	if decided.Load() != 1 || already.Load() != 7 {
		t.Errorf("%d decisions recorded, %d refused", decided.Load(), already.Load())
	}

	var closed, refused atomic.Int32
	for range 8 {
		wg.Go(func() {
			_, err := r.Fail(bg, "race")
			switch {
			case err == nil:
				closed.Add(1)
			case errors.Is(err, govern.ErrRunClosed):
				refused.Add(1)
			default:
				t.Errorf("Fail: %v", err)
			}
		})
	}
	wg.Wait()
	if closed.Load() != 1 || refused.Load() != 7 {
		t.Errorf("%d Fails closed the run, %d were refused", closed.Load(), refused.Load())
	}
	got := log.targets()
	if !slices.Equal(got, []string{"w3", "w2", "w1", "w0"}) {
		t.Errorf("rollbacks %v", got)
	}
}
