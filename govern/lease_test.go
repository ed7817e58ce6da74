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
)

// testLease is the lease of the leased replicas of these tests.
const testLease = 30 * time.Second

// partitionable is a journal shared by replicas whose lease renewals can
// be cut, as for a replica stalled (a long GC pause) or cut off from the
// database: its leases expire while it believes it holds them.
type partitionable struct {
	govern.Journal
	govern.Leases
	cut atomic.Bool
}

func (p *partitionable) Renew(ctx context.Context, owner string, ttl time.Duration, held map[string]uint64) ([]string, error) {
	if p.cut.Load() {
		return nil, errors.New("partitioned")
	}
	return p.Leases.Renew(ctx, owner, ttl, held)
}

// leasedReplicas returns governors a and b sharing one memory journal
// with leases (each through its own partitionable view, a's returned),
// and the rollback log of their undo handler.
func leasedReplicas(t *testing.T) (a, b *govern.Governor, pa *partitionable, j govern.Journal, log *rollbackLog) {
	t.Helper()
	log = &rollbackLog{}
	j = govern.NewMemoryJournal()
	opts := baseOpts(t, log)
	opts.Lease = testLease
	pa = &partitionable{Journal: j, Leases: j.(govern.Leases)}
	opts.Journal, opts.Node = pa, "a"
	a = newGov(t, opts)
	opts.Journal, opts.Node = &partitionable{Journal: j, Leases: j.(govern.Leases)}, "b"
	b = newGov(t, opts)
	return a, b, pa, j, log
}

// TestUAICP_4_LeaseRenewedWhileTheRunExecutes: a run executing on a
// replica for far longer than the lease keeps it (the heartbeat renews
// it every third): another replica's Recover claims nothing, and the
// run delivers.
func TestUAICP_4_LeaseRenewedWhileTheRunExecutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _, j, _ := leasedReplicas(t)
		run := start(t, a, govern.RunOptions{})
		invoke(t, run, lowRisk("note"), govern.Call{ID: "c1", Args: map[string]any{}}, &tool{})
		time.Sleep(10 * testLease)
		rep, err := b.Recover(bg)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Closed)+len(rep.Resumable)+len(rep.Paused) > 0 {
			t.Fatalf("b recovered a run a executes: %+v", rep)
		}
		verifyPass(t, run, "done")
		for _, rec := range runRecords(t, j, run.RequestID()) {
			if rec.Node != "a" || rec.Epoch != 1 {
				t.Errorf("record %d (%s) by node %q at epoch %d, want a at 1", rec.Seq, rec.Kind, rec.Node, rec.Epoch)
			}
		}
	})
}

// TestUAICP_4_ALostLeaseFencesItsOwner: a replica that stops renewing
// (stalled, cut off) loses its run once the lease expires: another
// replica claims it, rolls back its write and closes it; the stalled
// replica, back, can journal nothing more of the run — no call, no
// rollback, no second end.
func TestUAICP_4_ALostLeaseFencesItsOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, pa, j, log := leasedReplicas(t)
		run := start(t, a, govern.RunOptions{})
		invoke(t, run, withRollback(lowRisk("note")), govern.Call{ID: "c1", Args: map[string]any{}}, &tool{})
		pa.cut.Store(true)
		time.Sleep(testLease / 2)
		if rep, err := b.Recover(bg); err != nil || len(rep.Closed) > 0 {
			t.Fatalf("b recovered a run whose lease holds: %+v %v", rep, err)
		}
		time.Sleep(testLease)
		rep, err := b.Recover(bg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Closed, []string{run.RequestID()}) || rep.RolledBack != 1 {
			t.Fatalf("b's recovery: %+v, want the run closed and its write rolled back", rep)
		}
		claimedAt := len(runRecords(t, j, run.RequestID()))
		second := &tool{}
		if _, err := run.Invoke(bg, lowRisk("note"), govern.Call{ID: "c2", Args: map[string]any{}}, second.fn); err == nil {
			t.Fatal("a stalled replica invoked a call of a run it lost")
		}
		if second.n() != 0 {
			t.Error("the call of a stalled replica ran")
		}
		if _, err := run.Fail(bg, "giving up"); err == nil {
			t.Error("a stalled replica ended a run it lost")
		}
		recs := runRecords(t, j, run.RequestID())
		if len(recs) != claimedAt {
			t.Errorf("the stalled replica journaled %v after the claim", kinds(recs[claimedAt:]))
		}
		ends := 0
		for _, rec := range recs {
			if rec.Kind == recordkind.Transition && rec.To.Terminal() {
				ends++
				if rec.Node != "b" || rec.Epoch != 2 {
					t.Errorf("the end was journaled by %q at epoch %d, want b at 2", rec.Node, rec.Epoch)
				}
			}
		}
		if ends != 1 {
			t.Errorf("%d terminal transitions, want 1", ends)
		}
		if got := log.targets(); !slices.Equal(got, []string{"c1"}) {
			t.Errorf("rollbacks %v, want [c1] once", got)
		}
	})
}

// TestUAICP_4_ARestartedNodeTakesItsRunsBackAtOnce: a replica restarted
// under the same node name recovers its runs at startup without
// waiting for their leases to expire; a replica of another name waits.
func TestUAICP_4_ARestartedNodeTakesItsRunsBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, pa, j, _ := leasedReplicas(t)
		run := start(t, a, govern.RunOptions{})
		pa.cut.Store(true) // a dies: nothing renews its leases
		if rep, err := b.Recover(bg); err != nil || len(rep.Closed) > 0 {
			t.Fatalf("b recovered a's run before its lease expired: %+v %v", rep, err)
		}
		opts := baseOpts(t, nil)
		opts.Journal, opts.Node, opts.Lease = j, "a", testLease
		a2 := newGov(t, opts)
		rep, err := a2.Recover(bg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Closed, []string{run.RequestID()}) {
			t.Fatalf("the restarted node's recovery: %+v, want its run closed", rep)
		}
		// The dead process's Run, were it to wake, can do nothing: its
		// heartbeat gives it up once a lease passed without a renewal.
		time.Sleep(testLease + testLease/3) // past the heartbeat that finds a whole lease without a renewal
		if _, err := run.Invoke(bg, lowRisk("note"), govern.Call{ID: "c2", Args: map[string]any{}}, notCalled(t)); !errors.Is(err, govern.ErrLeased) {
			t.Errorf("the old process invokes a call: %v, want ErrLeased", err)
		}
		synctest.Wait()
		if r, _ := a.Attach(bg, run.RequestID()); r == run {
			t.Error("the old process still holds the run it lost")
		}
	})
}

// TestUAICP_5_3_AnyReplicaResumesAPause: a run paused on one replica is
// resumed by another once its approval is decided (its lease is released
// by the pause); while that replica executes it, a third cannot resume
// or cancel it.
func TestUAICP_5_3_AnyReplicaResumesAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _, j, _ := leasedReplicas(t)
		run := start(t, a, govern.RunOptions{})
		call := govern.Call{ID: "c1", Args: map[string]any{"order": "o-1"}}
		_, err := run.Invoke(bg, highRisk("refund"), call, notCalled(t))
		req := approvalOf(t, a, err)
		if err := run.Pause(bg, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); err != nil {
			t.Fatal(err)
		}
		rb, err := b.Attach(bg, run.RequestID())
		if err != nil {
			t.Fatal(err)
		}
		ra, err := a.Attach(bg, run.RequestID())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Resume(bg); err != nil {
			t.Fatalf("b resumes a's pause: %v", err)
		}
		if _, err := ra.Resume(bg); !errors.Is(err, govern.ErrLeased) {
			t.Errorf("a resumes the pause b resumed: %v, want ErrLeased", err)
		}
		if _, err := ra.Fail(bg, "cancel", govern.Cancelled); !errors.Is(err, govern.ErrLeased) {
			t.Errorf("a cancels the run b executes: %v, want ErrLeased", err)
		}
		refund := &tool{}
		invoke(t, rb, highRisk("refund"), call, refund)
		verifyPass(t, rb, "refunded")
		if refund.n() != 1 {
			t.Errorf("the refund ran %d times", refund.n())
		}
		resumed := 0
		for _, rec := range runRecords(t, j, run.RequestID()) {
			if rec.Kind == recordkind.Resumed {
				resumed++
				if rec.Node != "b" || rec.Epoch != 2 {
					t.Errorf("resumed by %q at epoch %d, want b at 2", rec.Node, rec.Epoch)
				}
			}
		}
		if resumed != 1 {
			t.Errorf("%d run_resumed records, want 1", resumed)
		}
	})
}

// TestUAICP_4_ADeadResumerIsRecovered: a replica that claimed a decided
// run to resume it and died before journaling the resume leaves it
// claimed; once the lease expires another replica's Recover releases it
// as the paused run it is, ready to be resumed there.
func TestUAICP_4_ADeadResumerIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _, j, _ := leasedReplicas(t)
		run := start(t, a, govern.RunOptions{})
		_, err := run.Invoke(bg, highRisk("refund"), govern.Call{ID: "c1", Args: map[string]any{"order": "o-1"}}, notCalled(t))
		req := approvalOf(t, a, err)
		if err := run.Pause(bg, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); err != nil {
			t.Fatal(err)
		}
		// a claims the run to resume it, and dies.
		if _, err := j.(govern.Leases).Claim(bg, run.RequestID(), "a", testLease); err != nil {
			t.Fatal(err)
		}
		rb, err := b.Attach(bg, run.RequestID())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Resume(bg); !errors.Is(err, govern.ErrLeased) {
			t.Fatalf("b resumes a run a holds: %v, want ErrLeased", err)
		}
		time.Sleep(testLease + time.Second)
		rep, err := b.Recover(bg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Paused, []string{run.RequestID()}) {
			t.Fatalf("b's recovery: %+v, want the run paused", rep)
		}
		if rb, err = b.Attach(bg, run.RequestID()); err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Resume(bg); err != nil {
			t.Fatalf("b resumes the released run: %v", err)
		}
		if _, err := rb.Fail(bg, "done with the test", govern.Cancelled); err != nil {
			t.Fatal(err)
		}
	})
}

// failingAppends is a replica's journal whose appends fail while down
// is set (the database out of reach for its writes), its leases still
// renewed.
type failingAppends struct {
	*partitionable
	down atomic.Bool
}

func (f *failingAppends) Append(ctx context.Context, sync bool, recs ...*govern.Record) error {
	if f.down.Load() {
		return errors.New("the database is out of reach")
	}
	return f.partitionable.Append(ctx, sync, recs...)
}

// TestUAICP_4_ARunWhoseEndIsNotJournaledIsRecovered: a run whose
// fail_safe cannot be journaled (the store refused the append) is given
// up by its replica — no longer renewed — so that once its lease expires
// a replica recovers it: its write rolled back, its end journaled once.
// Before, the replica kept renewing the lease of a run it could no longer
// end, and no one recovered it while that process lived.
func TestUAICP_4_ARunWhoseEndIsNotJournaledIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &rollbackLog{}
		j := govern.NewMemoryJournal()
		opts := baseOpts(t, log)
		opts.Lease = testLease
		fa := &failingAppends{partitionable: &partitionable{Journal: j, Leases: j.(govern.Leases)}}
		opts.Journal, opts.Node = fa, "a"
		a := newGov(t, opts)
		opts.Journal, opts.Node = &partitionable{Journal: j, Leases: j.(govern.Leases)}, "b"
		b := newGov(t, opts)
		run := start(t, a, govern.RunOptions{})
		invoke(t, run, withRollback(lowRisk("note")), govern.Call{ID: "c1", Args: map[string]any{}}, &tool{})
		fa.down.Store(true)
		if _, err := run.Fail(bg, "giving up"); err == nil {
			t.Fatal("Fail journaled with its appends refused")
		}
		fa.down.Store(false)
		time.Sleep(2 * testLease)
		rep, err := b.Recover(bg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Closed, []string{run.RequestID()}) || rep.RolledBack != 1 {
			t.Fatalf("b's recovery two leases later: %+v, want the run closed and its write rolled back", rep)
		}
		ends := 0
		for _, rec := range runRecords(t, j, run.RequestID()) {
			if rec.Kind == recordkind.Transition && rec.To.Terminal() {
				ends++
			}
		}
		if ends != 1 {
			t.Errorf("%d terminal transitions, want 1", ends)
		}
	})
}
