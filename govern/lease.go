package govern

import (
	"context"
	"errors"
	"time"
)

// leaser is an optional interface of a Journal that several processes
// share (replicas of a server on one PostgreSQL database). A run that
// executes has one owner: the holder of its lease, a row keyed by the
// run's request ID with an owner, an epoch and an expiry kept by the
// store's clock. Fencing is the journal's: a record carrying an Epoch is
// appended only while that epoch is the lease's newest — a process that
// lost a run's lease (it stalled past the expiry, or was cut off) cannot
// journal another record of it, so it can neither start a call nor roll
// one back. The journal also moves the lease with the records: a run's
// pause releases it (anyone may claim the run to resume it), its terminal
// transition ends it (no one can claim it again).
//
// Options.Lease turns leases on: the governor claims a run's lease when
// it starts, resumes or recovers it, renews the leases of the runs it
// executes every third of the lease, and Recover claims the runs whose
// lease expired — their owner died — to recover them.
type leaser interface {
	// Claim makes owner the holder of key's lease for ttl and returns the
	// lease's new epoch. It succeeds when the lease does not exist (it
	// is created at epoch 1), is released, has expired, or is owner's
	// already (a restarted process claims its own runs at once); it
	// fails with ErrLeased when another owner holds it, and ErrRunClosed
	// when it ended.
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error)
	// ClaimExpired claims for owner, at most limit, run leases (keys
	// without a colon: other leases, such as "node:" ones, are not runs)
	// whose holder let them expire, and returns their new epochs by request ID.
	// Leases other processes are claiming at the same moment are skipped,
	// not waited for.
	ClaimExpired(ctx context.Context, owner string, ttl time.Duration, limit int) (map[string]uint64, error)
	// Renew extends by ttl the leases owner holds at the given epochs (by
	// key) and returns the keys of those it no longer holds.
	Renew(ctx context.Context, owner string, ttl time.Duration, held map[string]uint64) (lost []string, err error)
	// Release gives up the lease held at epoch: it may be claimed at once.
	Release(ctx context.Context, key string, epoch uint64) error
	// Decided returns, oldest decision first and at most limit, the runs
	// whose lease is released (they paused) and that an approval
	// decision was journaled for since their lease was last claimed:
	// the runs a resume is owed to. A claim clears the mark.
	Decided(ctx context.Context, limit int) ([]string, error)
	// NextExpiry returns how long, by the store's clock, until the
	// earliest lease of a run that another owner holds expires (0 when
	// one has expired already); ok is false when there is none.
	NextExpiry(ctx context.Context, owner string) (d time.Duration, ok bool, err error)
}

// ErrLeased: another process holds the run's lease — it executes the run
// (Options.Lease) — or this process lost it: the journal refuses records of an
// epoch that is not the lease's newest.
var ErrLeased = errors.New("govern: the run is leased by another process")
