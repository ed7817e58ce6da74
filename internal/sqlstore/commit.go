package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/workflow"
)

// errClosed is the error of a session write made on, or still waiting in,
// a closed Store.
var errClosed = errors.New("sqlstore: store closed")

// maxBatch bounds the writes that one transaction applies.
const maxBatch = 256

// txTimeout bounds one transaction of the committer (a database that
// stopped answering, a row lock held elsewhere): its writers then fail
// rather than wait for ever. A variable for tests.
var txTimeout = 30 * time.Second

type writeKind uint8

const (
	createSession writeKind = iota
	updateSession
	deleteSession
)

// A write is a session write waiting for the committer: the row to store
// (Create, Update) or the ID to delete.
type write struct {
	kind                       writeKind
	id, workflow, stage, state string
	version, created, updated  int64
	expires                    any // Unix ms, or nil: never

	// claim goes from pending to taken when the committer applies the
	// write (or fails it), or to dropped when its writer gives up first;
	// whoever moves it first decides.
	claim atomic.Int32
	done  chan error // the outcome, once the transaction has ended
}

const (
	pending int32 = iota
	taken
	dropped
)

// A committer is the group commit of a Store's session writes: the one
// goroutine that runs its Creates, Updates and Deletes (DeleteExpired, a
// rare sweep, runs on its own). Writers queue their writes and wait;
// the committer takes every write queued while the previous transaction
// was committing (up to maxBatch), applies them in one transaction, each
// with its own outcome — a compare-and-swap that fails is that write's
// ErrConflict, not a failure of the batch — commits (one fsync for all)
// and only then acknowledges each write. Under load a batch holds about
// one write per writer, so writers share fsyncs; a lone writer pays one
// transaction per write, as without batching.
//
// A writer whose context ends while its write is still queued withdraws
// it and returns the context's error: the write is never applied. Once
// the committer has taken it, the writer waits for the transaction (at
// most txTimeout) and returns its outcome, so that nil always means
// stored and a context error always means not stored.
type committer struct {
	st        *Store
	queue     chan *write
	closing   chan struct{} // closed by close: take no more batches
	stopped   chan struct{} // closed when run returns
	closeOnce sync.Once

	// batches counts the batches taken from the queue (the count grows
	// when a batch is complete, before its transaction begins); writes
	// the writes acknowledged. Read by tests and benchmarks.
	batches, writes atomic.Int64
}

func newCommitter(st *Store) *committer {
	c := &committer{st: st, queue: make(chan *write, maxBatch), closing: make(chan struct{}), stopped: make(chan struct{})}
	go c.run()
	return c
}

// close stops the committer once its current batch is committed; writes
// still queued then fail with ErrClosed.
func (c *committer) close() {
	c.closeOnce.Do(func() { close(c.closing) })
	<-c.stopped
}

// submit queues w and returns its outcome.
func (c *committer) submit(ctx context.Context, w *write) error {
	w.done = make(chan error, 1)
	select {
	case c.queue <- w:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing:
		return errClosed
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		if w.claim.CompareAndSwap(pending, dropped) {
			return ctx.Err()
		}
	case <-c.stopped:
		if w.claim.CompareAndSwap(pending, dropped) {
			return errClosed
		}
	}
	return <-w.done // taken: its transaction decides
}

func (c *committer) run() {
	defer close(c.stopped)
	batch := make([]*write, 0, maxBatch)
	for {
		select {
		case <-c.closing:
			return
		default:
		}
		select {
		case w := <-c.queue:
			batch = append(batch[:0], w)
		case <-c.closing:
			return
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case w := <-c.queue:
				batch = append(batch, w)
			default:
				break fill
			}
		}
		c.commit(batch)
		clear(batch)
	}
}

// commit applies and commits a batch, then acknowledges its writes.
func (c *committer) commit(batch []*write) {
	// One order for every process's transactions, so that two batches
	// never wait for each other's row locks (PostgreSQL); writes to one
	// session keep their queue order. Writes of one batch are concurrent
	// (none is acknowledged yet), so any order is a valid one.
	slices.SortStableFunc(batch, func(a, b *write) int { return strings.Compare(a.id, b.id) })
	c.batches.Add(1)
	out := make([]error, len(batch))
	inStatement, err := c.apply(batch, out)
	switch {
	case err != nil && inStatement && len(batch) > 1:
		// A write's statement failed, which loses the transaction
		// (PostgreSQL aborts it): retry each write alone, so that the
		// failure is only its own.
		for i := range batch {
			if _, err := c.apply(batch[i:i+1], out[i:i+1]); err != nil {
				out[i] = err
			}
		}
	case err != nil:
		for i := range out {
			out[i] = err
		}
	}
	for i, w := range batch {
		if w.claim.CompareAndSwap(pending, taken) {
			// The transaction failed before reaching it: it fails too.
			if out[i] == nil {
				out[i] = err
			}
		}
		if w.claim.Load() == taken {
			c.writes.Add(1)
			w.done <- out[i]
		}
	}
}

// errTxTimeout fails the writes of a transaction that took longer than
// txTimeout. It does not wrap context.DeadlineExceeded: the writers'
// deadlines did not pass.
var errTxTimeout = errors.New("sqlstore: write sessions: the transaction timed out")

// apply runs one transaction applying the writes of batch that are
// still wanted, setting each one's outcome in out. An error is the
// transaction's, and nothing of it is stored (unless the error came from
// the commit, which may have happened); inStatement tells that a write's
// statement failed, rather than the database or the transaction.
func (c *committer) apply(batch []*write, out []error) (inStatement bool, err error) {
	// Not a writer's context: that one ends its writer's wait while the
	// write is queued, not a transaction shared with others.
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	defer func() {
		if err != nil && ctx.Err() != nil {
			inStatement, err = false, errTxTimeout
		}
	}()
	unlock, err := c.st.lockWrites(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	if c.st.dialect == postgres {
		return c.applyPipelined(ctx, batch, out, time.Now().UnixMilli())
	}
	tx, err := c.st.db.BeginTx(ctx, nil) // SQLite: BEGIN IMMEDIATE
	if err != nil {
		return false, fmt.Errorf("sqlstore: write sessions: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UnixMilli()
	for i, w := range batch {
		if w.claim.Load() != taken && !w.claim.CompareAndSwap(pending, taken) {
			continue // withdrawn
		}
		if out[i], err = applyWrite(ctx, tx, c.st.queries, w, now); err != nil {
			return true, err
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("sqlstore: write sessions: commit: %w", err)
	}
	return false, nil
}

// applyWrite runs w's statements in tx. The outcome is w's own (nil,
// ErrConflict, ErrSessionNotFound); err is a failed statement.
func applyWrite(ctx context.Context, tx *sql.Tx, q *sessionQueries, w *write, now int64) (outcome, err error) {
	var res sql.Result
	switch w.kind {
	case createSession:
		res, err = tx.StmtContext(ctx, q.create).ExecContext(ctx,
			w.id, w.workflow, w.stage, w.state, w.created, w.updated, w.expires, now)
	case updateSession:
		res, err = tx.StmtContext(ctx, q.update).ExecContext(ctx,
			w.id, w.workflow, w.stage, w.state, w.version, w.created, w.updated, w.expires, w.version-1, now)
	case deleteSession:
		if _, err := tx.StmtContext(ctx, q.delete).ExecContext(ctx, w.id); err != nil {
			return nil, fmt.Errorf("sqlstore: delete session %q: %w", w.id, err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: write session %q: %w", w.id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("sqlstore: write session %q: %w", w.id, err)
	}
	if n > 0 {
		return nil, nil
	}
	if w.kind == createSession {
		return fmt.Errorf("sqlstore: create session %q: %w", w.id, workflow.ErrConflict), nil
	}
	// Nothing updated: tell a missing (or expired) session from another
	// version.
	var (
		version int64
		expires sql.NullInt64
	)
	err = tx.StmtContext(ctx, q.version).QueryRowContext(ctx, w.id).Scan(&version, &expires)
	if err != nil && !isNoRows(err) {
		return nil, fmt.Errorf("sqlstore: update session %q: %w", w.id, err)
	}
	return updateRefused(w, err == nil, version, expires.Valid && expires.Int64 <= now), nil
}

// updateRefused is the outcome of an update that changed nothing: the
// session is missing (or expired), or at another version.
func updateRefused(w *write, found bool, version int64, expired bool) error {
	if !found || expired {
		return notFound(w.id)
	}
	return fmt.Errorf("sqlstore: update session %q from version %d (stored: %d): %w", w.id, w.version-1, version, workflow.ErrConflict)
}
