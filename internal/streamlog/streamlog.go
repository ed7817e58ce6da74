// Package streamlog is the store of UAMP 1.0 delta streams (§5, uamp.dev)
// that several server replicas share: each stream's head — whose it is,
// how far it got, whether it ended, whether its producer still holds its
// lease — and its last deltas, so that a consumer resumes a stream on any
// replica while its producer lives, and learns plainly when the producer
// died.
//
// Package messaging is its consumer (messaging.Options.Streams); the
// implementations are Memory (one process) and the SQL store of package
// internal/sqlstore (SQLite, PostgreSQL); package streamlogtest is the
// suite every implementation passes.
//
// Times are the store's: a replica's clock never decides another's lease.
// A stream exists until its expiry (its producer's lease plus the
// linger, or the end plus the linger), after which every method but
// Create treats it as absent and Sweep deletes it.
package streamlog

import (
	"context"
	"errors"
	"time"
)

// Key names a stream: the requester whose namespace holds it (the
// envelope's from, the authenticated principal) and its stream_id.
type Key struct {
	Owner string
	ID    string
}

// Head is what a store holds of a stream besides its deltas.
type Head struct {
	Key
	// RequestID is the bare lowercase id of the request that opened the
	// stream (ACKs and cancels name it in reply_to).
	RequestID string
	// Next is the delta_seq of the next delta to be stored: every stored
	// delta is below it (the oldest ones may have been trimmed).
	Next int64
	// Final reports that the delta Next-1 ends the stream.
	Final bool
	// Acked is the highest ack_seq received through the store (Ack), -1
	// for none.
	Acked int64
	// Cancelled reports that a cancel was received through the store
	// (Cancel).
	Cancelled bool
	// Alive reports that the producer's lease had not expired when the
	// head was read.
	Alive bool
}

// Terms are the lease and linger a producer writes with.
type Terms struct {
	// Lease is how long from now the producer's lease runs: a stream
	// not Final whose lease expired has lost its producer.
	Lease time.Duration
	// Linger is how long a stream stays after its lease expired, or
	// after its final delta: the time a consumer has to resume and read
	// its end.
	Linger time.Duration
}

// Errors of a Store; an implementation wraps them.
var (
	// ErrNotFound: the store holds no such stream (never created,
	// deleted, or expired).
	ErrNotFound = errors.New("streamlog: no such stream")
	// ErrExists: Create of a stream whose key or request is taken by a
	// stream not yet expired.
	ErrExists = errors.New("streamlog: stream or request in use")
	// ErrConflict: the stream is not where the caller believed —
	// Append or EndDead at a delta_seq that is not the head's Next, on a
	// stream that has ended, or EndDead while the producer's lease runs.
	ErrConflict = errors.New("streamlog: the stream moved on")
	// ErrEnded: Cancel of a stream that has ended or was cancelled.
	ErrEnded = errors.New("streamlog: the stream has ended")
)

// Store keeps streams for several replicas. Its methods are safe for
// concurrent use, each atomic: of two replicas racing, one wins and the
// other gets the error that says so.
type Store interface {
	// Create records the stream of h.Key and h.RequestID (the other
	// fields are ignored), without deltas, its producer's lease running
	// for t.Lease. It fails with ErrExists when a stream not yet expired
	// holds the key, or the owner's request; an expired one is replaced.
	Create(ctx context.Context, h Head, t Terms) error
	// Append stores deltas as delta_seq first, first+1, …, keeping only
	// the newest keep deltas of the stream, and renews the lease for
	// t.Lease; final: the last of deltas ends the stream, which then
	// stays for t.Linger. It returns the head after. ErrConflict when
	// first is not the head's Next or the stream has ended (another
	// replica ended it: its producer was presumed dead); ErrNotFound.
	Append(ctx context.Context, k Key, first int64, deltas [][]byte, final bool, keep int, t Terms) (Head, error)
	// Renew renews the lease of a stream that has not ended and returns
	// its head; ErrNotFound.
	Renew(ctx context.Context, k Key, t Terms) (Head, error)
	// Head returns the head of k; ErrNotFound.
	Head(ctx context.Context, k Key) (Head, error)
	// Request returns the head of the stream owner's request requestID
	// opened; ErrNotFound.
	Request(ctx context.Context, owner, requestID string) (Head, error)
	// Read returns the stored deltas from delta_seq from on, in order, at
	// most limit of them, and the head; ErrNotFound. The deltas are
	// contiguous; the first is above from when older ones were trimmed.
	Read(ctx context.Context, k Key, from int64, limit int) ([][]byte, Head, error)
	// Ack records that the consumer holds every delta up to seq (the
	// highest wins); ErrNotFound.
	Ack(ctx context.Context, k Key, seq int64) error
	// Cancel records the requester's cancel; ErrEnded when the stream
	// ended or was cancelled already, ErrNotFound.
	Cancel(ctx context.Context, k Key) error
	// EndDead ends a stream whose producer died: it stores delta as the
	// final delta seq, provided seq is the head's Next, the stream has
	// not ended and its lease expired — ErrConflict otherwise — and the
	// stream stays for linger. Once it succeeds, the producer's Appends
	// fail with ErrConflict.
	EndDead(ctx context.Context, k Key, seq int64, delta []byte, linger time.Duration) error
	// Delete deletes a stream and its deltas (the producer released it);
	// deleting an absent stream is not an error.
	Delete(ctx context.Context, k Key) error
	// Sweep deletes the expired streams.
	Sweep(ctx context.Context) error
	// Watch returns a channel that receives (best effort, coalesced)
	// after k changes — through this store value, and through any other
	// where the implementation can tell — and a function that stops the
	// watch. Callers still poll: a change may go unsignalled, and a
	// receive may come without one (after a reconnection, say).
	Watch(k Key) (<-chan struct{}, func())
}
