package journaltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// leases is the lease interface of the journals that keep them (the
// governor's, documented at govern.Options.Lease).
type leases interface {
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error)
	ClaimExpired(ctx context.Context, owner string, ttl time.Duration, limit int) (map[string]uint64, error)
	Renew(ctx context.Context, owner string, ttl time.Duration, held map[string]uint64) ([]string, error)
	Release(ctx context.Context, key string, epoch uint64) error
	Decided(ctx context.Context, limit int) ([]string, error)
	NextExpiry(ctx context.Context, owner string) (time.Duration, bool, error)
}

// leasesOf returns j's Leases, skipping the test when it has none.
func leasesOf(t *testing.T, j govern.Journal) leases {
	t.Helper()
	l, ok := j.(leases)
	if !ok {
		t.Skip("the journal has no leases")
	}
	return l
}

// leased returns a record of run id at epoch.
func leased(kind govern.RecordKind, id string, epoch uint64) *govern.Record {
	r := journalfixture.Record(kind, id, `{}`)
	r.Epoch = epoch
	return r
}

func wantLeased(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, govern.ErrLeased) {
		t.Errorf("%s: %v, want ErrLeased", what, err)
	}
}

// testLeases: a lease has one holder at a time; the journal takes a
// run's records only at its newest epoch; a pause releases the lease, a
// terminal transition ends it.
func testLeases(t *testing.T, j govern.Journal) {
	l := leasesOf(t, j)
	ctx := t.Context()
	const id = "00000000-0000-4000-8000-00000000000a"
	claim := func(owner string) (uint64, error) { return l.Claim(ctx, id, owner, time.Hour) }
	if e, err := claim("a"); err != nil || e != 1 {
		t.Fatalf("first claim: epoch %d, %v; want 1", e, err)
	}
	appendT(t, j, true, leased(recordkind.RunStarted, id, 1))
	_, err := claim("b")
	wantLeased(t, err, "a claim of a lease another holds")
	if e, err := claim("a"); err != nil || e != 2 {
		t.Fatalf("the holder claims again (a restart): epoch %d, %v; want 2", e, err)
	}
	wantLeased(t, j.Append(ctx, true, leased(recordkind.Transition, id, 1)), "a record of an old epoch")
	appendT(t, j, true, leased(recordkind.Transition, id, 2))
	appendT(t, j, true, journalfixture.Record(recordkind.ApprovalDecided, id, `{}`)) // no epoch: not the run's own
	if lost, err := l.Renew(ctx, "a", time.Hour, map[string]uint64{id: 2}); err != nil || len(lost) > 0 {
		t.Errorf("renewing a held lease: lost %v, %v", lost, err)
	}
	if lost, err := l.Renew(ctx, "a", time.Hour, map[string]uint64{id: 1}); err != nil || !slices.Equal(lost, []string{id}) {
		t.Errorf("renewing an old epoch: lost %v, %v; want [%s]", lost, err, id)
	}
	// A pause releases the lease: anyone claims it at once.
	appendT(t, j, true, leased(recordkind.Paused, id, 2))
	if e, err := claim("b"); err != nil || e != 3 {
		t.Fatalf("claiming a paused run: epoch %d, %v; want 3", e, err)
	}
	wantLeased(t, j.Append(ctx, true, leased(recordkind.Resumed, id, 2)), "a resume at the epoch the pause released")
	if lost, _ := l.Renew(ctx, "a", time.Hour, map[string]uint64{id: 2}); !slices.Equal(lost, []string{id}) {
		t.Errorf("the old holder renews: lost %v, want [%s]", lost, id)
	}
	appendT(t, j, true, leased(recordkind.Resumed, id, 3))
	// A terminal transition ends it: no one claims it again.
	end := leased(recordkind.Transition, id, 3)
	end.From, end.To = govern.Verify, govern.Deliver
	appendT(t, j, true, end)
	if _, err := claim("b"); !errors.Is(err, govern.ErrRunClosed) {
		t.Errorf("claiming an ended run: %v, want ErrRunClosed", err)
	}
	// Release gives a lease up at its epoch only.
	const id2 = "00000000-0000-4000-8000-00000000000b"
	e, err := l.Claim(ctx, id2, "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, id2, e+1); err != nil {
		t.Fatal(err)
	}
	_, err = l.Claim(ctx, id2, "b", time.Hour)
	wantLeased(t, err, "a claim after a release at another epoch")
	if err := l.Release(ctx, id2, e); err != nil {
		t.Fatal(err)
	}
	if e2, err := l.Claim(ctx, id2, "b", time.Hour); err != nil || e2 != e+1 {
		t.Errorf("a claim after the release: epoch %d, %v; want %d", e2, err, e+1)
	}
}

// testLeaseExpiry: a lease its holder does not renew expires, by the
// store's clock; ClaimExpired hands it to another owner at a new epoch,
// and the old holder's renewal and records are refused. Node leases are
// not runs: ClaimExpired leaves them.
func testLeaseExpiry(t *testing.T, j govern.Journal) {
	l := leasesOf(t, j)
	ctx := t.Context()
	const id = "00000000-0000-4000-8000-00000000000c"
	if _, err := l.Claim(ctx, "node:n1", "x", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	e, err := l.Claim(ctx, id, "a", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	appendT(t, j, true, leased(recordkind.RunStarted, id, e))
	var got map[string]uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, err = l.ClaimExpired(ctx, "b", time.Hour, 10); err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			break
		}
	}
	if len(got) != 1 || got[id] != e+1 {
		t.Fatalf("ClaimExpired: %v, want {%s: %d}", got, id, e+1)
	}
	if again, err := l.ClaimExpired(ctx, "c", time.Hour, 10); err != nil || len(again) > 0 {
		t.Errorf("claiming the held lease again: %v %v", again, err)
	}
	if lost, _ := l.Renew(ctx, "a", time.Hour, map[string]uint64{id: e}); !slices.Equal(lost, []string{id}) {
		t.Errorf("the expired holder renews: lost %v, want [%s]", lost, id)
	}
	wantLeased(t, j.Append(ctx, true, leased(recordkind.Transition, id, e)), "a record of the expired holder")
	appendT(t, j, true, leased(recordkind.Transition, id, e+1))
}

// testLeaseDecisions: a paused run (its lease released) that an approval
// decision was journaled for since its lease was last claimed is owed a
// resume: Decided lists it — also when the decision came before the
// pause — until a claim (the resume) takes the lease.
func testLeaseDecisions(t *testing.T, j govern.Journal) {
	l := leasesOf(t, j)
	ctx := t.Context()
	const id, other = "00000000-0000-4000-8000-00000000000d", "00000000-0000-4000-8000-00000000000e"
	decided := func(want ...string) {
		t.Helper()
		got, err := l.Decided(ctx, 10)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Decided = %v, %v; want %v", got, err, want)
		}
	}
	decide := func(id string) {
		appendT(t, j, true, journalfixture.Record(recordkind.ApprovalDecided, id, `{"approval_id":"a-`+id[len(id)-1:]+`","approved":true,"approver":"x"}`))
	}
	for _, k := range []string{id, other} {
		if _, err := l.Claim(ctx, k, "a", time.Hour); err != nil {
			t.Fatal(err)
		}
		appendT(t, j, true, leased(recordkind.RunStarted, k, 1))
	}
	decide(id) // before the pause: the run still executes
	decided()
	appendT(t, j, true, leased(recordkind.Paused, id, 1))
	appendT(t, j, true, leased(recordkind.Paused, other, 1))
	decided(id)
	if e, err := l.Claim(ctx, id, "b", time.Hour); err != nil || e != 2 {
		t.Fatalf("the resume's claim: epoch %d, %v", e, err)
	}
	decided()
	appendT(t, j, true, leased(recordkind.Resumed, id, 2))
	appendT(t, j, true, leased(recordkind.Paused, id, 2))
	decided() // paused again, for a new approval: nothing decided yet
	decide(other)
	decide(id)
	decided(other, id)
	if got, err := l.Decided(ctx, 1); err != nil || !slices.Equal(got, []string{other}) {
		t.Errorf("Decided(limit 1) = %v, %v; want the oldest decision only", got, err)
	}
}

// testLeaseNextExpiry: NextExpiry tells an owner how long until the
// earliest run lease another owner holds expires, by the store's clock —
// not its own leases, not node leases, not released or ended ones.
func testLeaseNextExpiry(t *testing.T, j govern.Journal) {
	l := leasesOf(t, j)
	ctx := t.Context()
	next := func(owner string) (time.Duration, bool) {
		t.Helper()
		d, ok, err := l.NextExpiry(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		return d, ok
	}
	if _, ok := next("b"); ok {
		t.Error("NextExpiry of an empty lease table: ok")
	}
	if _, err := l.Claim(ctx, "node:x", "x", time.Minute); err != nil {
		t.Fatal(err)
	}
	const id, paused = "00000000-0000-4000-8000-0000000000f0", "00000000-0000-4000-8000-0000000000f2"
	if _, err := l.Claim(ctx, id, "x", time.Hour); err != nil {
		t.Fatal(err)
	}
	e, err := l.Claim(ctx, paused, "x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, paused, e); err != nil {
		t.Fatal(err)
	}
	if d, ok := next("b"); !ok || d <= 59*time.Minute || d > time.Hour {
		t.Errorf("NextExpiry for another owner = %v, %v; want about an hour (the run lease; not the node's, not the released one)", d, ok)
	}
	if _, ok := next("x"); ok {
		t.Error("NextExpiry counted the owner's own lease")
	}
}

// testLeaseClaimRace: of owners claiming one new lease at once, exactly
// one gets it (epoch 1); the others are told it is leased.
func testLeaseClaimRace(t *testing.T, j govern.Journal) {
	l := leasesOf(t, j)
	const id = "00000000-0000-4000-8000-0000000000f3"
	const n = 8
	errs := make([]error, n)
	epochs := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { epochs[i], errs[i] = l.Claim(t.Context(), id, fmt.Sprintf("owner-%d", i), time.Hour) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil && epochs[i] == 1:
			won++
		case err == nil:
			t.Errorf("owner %d claimed at epoch %d", i, epochs[i])
		case !errors.Is(err, govern.ErrLeased):
			t.Errorf("owner %d: %v, want ErrLeased", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d owners claimed one new lease, want 1", won)
	}
}
