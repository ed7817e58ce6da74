package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/bounded"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// Journal returns a govern.Journal (UAICP-0.3 §5.4) and govern.RunReader
// kept in the store: one row per record in governance_journal (seq, the
// request_id it is indexed by, its unique key under a UNIQUE constraint,
// and the record's JSON line as the file journal writes it), and the
// chain's head — last seq and hash — in the one row of
// governance_journal_head.
//
// Every append is one transaction that locks the head (SELECT … FOR
// UPDATE on PostgreSQL; SQLite has one writer at a time), seals the
// records after it, inserts them and moves the head: so several processes
// on one PostgreSQL database keep one chain, and nothing else ever writes
// it. A record whose unique key is taken makes its Append append nothing
// and fail with govern.ErrDuplicate.
//
// A synced Append is durable when it returns. An Append without sync is
// deferred: it returns at once, before its records are sealed (Seq, Prev
// and Hash are set when they are committed), and is committed with the
// next synced Append on this Journal value, a read through it, Close, or
// at the latest deferredFlush after it — whichever comes first. So the
// records of a run between two synced points (a read-only tool call's
// evidence, the transitions of plan, execute and verify) share one
// transaction instead of one each. An Append whose records carry a
// unique key, a pause, a decision or a terminal transition is never
// deferred. When the transaction of deferred records fails, nobody is
// there to be told: the run (request ID and lease epoch) is marked lost
// on this value, and its next Append fails with govern.ErrLeased — the
// governor stops it, and it is recovered from what the journal holds
// (by the reaper, once its lease expires; without leases, at the next
// start), as after a crash that took the deferred records with it.
//
// Concurrent Appends on one Journal value are group-committed: those
// arriving while a transaction commits share the next one (one fsync),
// each keeping its own outcome, so a duplicate in one append does not
// fail the others. Share one value, rather than calling Journal for each
// user.
//
// Records reads in pages of 512 rows; RunRecords by the request_id index.
// Close ends this value's use; the database stays open until Store.Close.
func (s *Store) Journal() govern.Journal { return &sqlJournal{s: s, flushAfter: deferredFlush} }

// journalPage is how many rows one query of Records reads.
const journalPage = 512

// maxJournalBatch bounds the appends one transaction commits.
const maxJournalBatch = 256

// insertRows bounds the rows of one INSERT statement (insertCols parameters each).
const insertRows = 128

// deferredFlush bounds how long a deferred Append waits for its
// transaction when no synced Append or read comes first.
const deferredFlush = 50 * time.Millisecond

// maxLost bounds the runs a journal value remembers as lost (see
// sqlJournal.lost); past it the oldest are forgotten.
const maxLost = 1 << 16

type sqlJournal struct {
	s          *Store
	flushAfter time.Duration // deferredFlush; tests set it

	mu       sync.Mutex
	closed   bool
	queue    []*journalAppend
	busy     bool        // an Append is committing: the others queue
	deferred int         // deferred Appends not yet committed
	flush    *time.Timer // armed while deferred Appends wait and none commits
	// lost holds the runs (request ID, epoch) whose deferred records
	// could not be committed, with why; at most maxLost.
	lost *bounded.Map[runEpoch, error]
}

// runEpoch names a run as one holder of its lease knows it.
type runEpoch struct {
	requestID string
	epoch     uint64
}

// A journalAppend is one Append waiting for its transaction, or a
// deferred one (done and lead nil) that returned.
type journalAppend struct {
	recs []*govern.Record
	done chan error    // its outcome
	lead chan struct{} // it is to commit the next batch
}

func (a *journalAppend) isDeferred() bool { return a.done == nil }

// errJournalClosed is the error of a closed Journal value.
var errJournalClosed = errors.New("sqlstore: journal closed")

func (j *sqlJournal) Append(ctx context.Context, sync bool, recs ...*govern.Record) (err error) {
	defer j.s.mark(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := uniqueWithin(recs); err != nil {
		return err
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return errJournalClosed
	}
	if err := j.lostLocked(recs); err != nil {
		j.mu.Unlock()
		return err
	}
	switch {
	case len(recs) == 0 && (!sync || j.deferred == 0):
		j.mu.Unlock()
		return nil // every synced append is durable already
	case !sync && deferrable(recs):
		j.queue = append(j.queue, &journalAppend{recs: recs})
		j.deferred++
		if !j.busy && j.flush == nil {
			j.flush = time.AfterFunc(j.flushAfter, j.flushDeferred)
		}
		j.mu.Unlock()
		return nil
	}
	return j.commitLocked(recs)
}

// commitLocked queues an Append of recs that waits for its transaction,
// and returns its outcome. j.mu is held on entry, released on return.
func (j *sqlJournal) commitLocked(recs []*govern.Record) error {
	a := &journalAppend{recs: recs, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	j.queue = append(j.queue, a)
	if j.busy {
		j.mu.Unlock()
		select {
		case err := <-a.done:
			return err
		case <-a.lead:
		}
	} else {
		j.busy = true
		if j.flush != nil {
			j.flush.Stop()
			j.flush = nil
		}
		j.mu.Unlock()
	}
	// This Append leads: it commits the batches at the head of the queue
	// until its own is committed, then hands the lead to the next waiting
	// Append. Deferred Appends before it go in its batches.
	for {
		j.mu.Lock()
		n := min(len(j.queue), maxJournalBatch)
		batch := j.queue[:n:n]
		j.queue = j.queue[n:]
		j.mu.Unlock()
		j.commit(batch)
		j.mu.Lock()
		for _, b := range batch {
			if b.isDeferred() {
				j.deferred-- // counted until committed: a flush waits for it
			}
		}
		j.mu.Unlock()
		select {
		case err := <-a.done:
			j.handOff()
			return err
		default: // its own is further back in the queue
		}
	}
}

// handOff passes the lead to the first Append waiting in the queue; with
// none, committing stops and the deferred ones left wait for the timer.
func (j *sqlJournal) handOff() {
	j.mu.Lock()
	for _, next := range j.queue {
		if !next.isDeferred() {
			j.mu.Unlock()
			next.lead <- struct{}{}
			return
		}
	}
	j.busy = false
	if j.deferred > 0 && j.flush == nil {
		j.flush = time.AfterFunc(j.flushAfter, j.flushDeferred)
	}
	j.mu.Unlock()
}

// flushDeferred commits the deferred Appends (the timer's).
func (j *sqlJournal) flushDeferred() {
	j.mu.Lock()
	j.flush = nil
	j.mu.Unlock()
	_ = j.sync(context.Background()) // a failure marks the runs lost
}

// sync commits the deferred Appends queued so far, if any.
func (j *sqlJournal) sync(ctx context.Context) error {
	return j.Append(context.WithoutCancel(ctx), true)
}

// deferrable reports whether an Append without sync of recs may be
// deferred: no unique key (its ErrDuplicate must reach the caller) and no
// lease move (a pause, a decision, an end).
func deferrable(recs []*govern.Record) bool {
	for _, r := range recs {
		switch {
		case r.Unique != "", r.Kind == recordkind.Paused, r.Kind == recordkind.ApprovalDecided,
			r.Kind == recordkind.Transition && r.To.Terminal():
			return false
		}
	}
	return true
}

// lostLocked fails an Append of a run whose deferred records were lost.
func (j *sqlJournal) lostLocked(recs []*govern.Record) error {
	if j.lost == nil {
		return nil
	}
	return lostIn(j.lost.Get, recs)
}

// lostErr is lostLocked, taking j.mu.
func (j *sqlJournal) lostErr(recs []*govern.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lostLocked(recs)
}

// lostIn fails recs when one is of a run lost knows.
func lostIn(lost func(runEpoch) (error, bool), recs []*govern.Record) error {
	for _, r := range recs {
		if cause, ok := lost(runEpoch{r.RequestID, r.Epoch}); ok {
			return fmt.Errorf("sqlstore: journal: run %s lost records appended without sync (%v): %w", r.RequestID, cause, govern.ErrLeased)
		}
	}
	return nil
}

// markLost remembers the runs of a deferred Append that failed with err.
func (j *sqlJournal) markLost(recs []*govern.Record, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost == nil {
		j.lost = bounded.New[runEpoch, error](maxLost)
	}
	for _, r := range recs {
		j.lost.Add(runEpoch{r.RequestID, r.Epoch}, err)
	}
}

// uniqueWithin refuses a batch repeating a unique key.
func uniqueWithin(recs []*govern.Record) error {
	var seen map[string]bool
	for _, r := range recs {
		if r.Unique == "" {
			continue
		}
		if seen[r.Unique] {
			return fmt.Errorf("sqlstore: journal: unique key %q: %w", r.Unique, govern.ErrDuplicate)
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[r.Unique] = true
	}
	return nil
}

// commit appends a batch in one transaction and tells each Append its
// outcome. When a statement fails (which on PostgreSQL aborts the
// transaction), each Append is retried alone, so that the failure is only
// its own.
func (j *sqlJournal) commit(batch []*journalAppend) {
	out := make([]error, len(batch))
	if !slices.ContainsFunc(batch, func(a *journalAppend) bool { return len(a.recs) > 0 }) {
		for _, a := range batch {
			a.done <- nil // flushes with nothing left to flush
		}
		return
	}
	inStatement, err := j.apply(batch, out)
	switch {
	case err != nil && inStatement && len(batch) > 1:
		for i, a := range batch {
			if _, err := j.apply(batch[i:i+1], out[i:i+1]); err != nil {
				out[i] = err
			}
			if out[i] != nil && a.isDeferred() {
				j.markLost(a.recs, out[i]) // before the run's later Appends go
			}
		}
	case err != nil:
		for i := range out {
			out[i] = err
		}
	}
	for i, a := range batch {
		switch {
		case !a.isDeferred():
			a.done <- out[i]
		case out[i] != nil:
			j.markLost(a.recs, out[i])
		}
	}
}

// apply runs one transaction appending the batch's records after the
// head, setting each Append's own outcome (nil, ErrDuplicate, a record
// that cannot be sealed) in out. An error is the transaction's: nothing
// of it is stored (unless it came from the commit, which may have
// happened); inStatement tells that a statement failed.
func (j *sqlJournal) apply(batch []*journalAppend, out []error) (inStatement bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	defer func() {
		if err != nil && ctx.Err() != nil {
			inStatement, err = false, errors.New("sqlstore: journal append: the transaction timed out")
		}
	}()
	unlock, err := j.s.lockWrites(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	if j.s.dialect == postgres {
		return j.applyPipelined(ctx, batch, out)
	}
	tx, err := j.s.db.BeginTx(ctx, nil) // SQLite: BEGIN IMMEDIATE
	if err != nil {
		return false, fmt.Errorf("sqlstore: journal append: %w", err)
	}
	defer tx.Rollback()
	var (
		seq  int64
		hash string
	)
	if err := tx.QueryRowContext(ctx, headQuery(j.s.dialect)).Scan(&seq, &hash); err != nil {
		return false, fmt.Errorf("sqlstore: journal append: read the head: %w", err)
	}
	taken := map[string]bool{}
	for _, q := range takenQueries(batch) {
		if err := queryRows(ctx, tx, q, func(rows *sql.Rows) error {
			var k string
			err := rows.Scan(&k)
			taken[k] = true
			return err
		}); err != nil {
			return true, fmt.Errorf("sqlstore: journal append: unique keys: %w", err)
		}
	}
	epochs := map[string]int64{}
	for _, q := range fenceQueries(batch, j.s.dialect) {
		if err := queryRows(ctx, tx, q, func(rows *sql.Rows) error {
			var (
				key, state string
				epoch      int64
			)
			err := rows.Scan(&key, &epoch, &state)
			if state == leaseRunning {
				epochs[key] = epoch
			}
			return err
		}); err != nil {
			return true, fmt.Errorf("sqlstore: journal append: leases: %w", err)
		}
	}
	writes := sealBatch(batch, out, seq, hash, taken, epochs, j.lostErr)
	if writes == nil {
		return false, nil
	}
	for _, st := range writes.statements(j.s) {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return true, st.fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("sqlstore: journal append: commit: %w", err)
	}
	return false, nil
}

// headQuery reads (and on PostgreSQL locks: one chain across processes)
// the journal's head.
func headQuery(d dialect) string {
	if d == postgres {
		return `SELECT seq, hash FROM governance_journal_head WHERE id = 1 FOR UPDATE`
	}
	return `SELECT seq, hash FROM governance_journal_head WHERE id = 1`
}

// A statement is one query of an append's transaction.
type statement struct {
	query string
	args  []any
	what  string // for its error
}

func (st statement) fail(err error) error {
	if isUniqueViolation(err) {
		err = fmt.Errorf("%w (%v)", govern.ErrDuplicate, err)
	}
	return fmt.Errorf("sqlstore: journal append: %s: %w", st.what, err)
}

// inList returns a query of prefix, an IN list of n parameters, and suffix.
func inList(prefix string, n int, suffix string) string {
	var q strings.Builder
	q.WriteString(prefix)
	q.WriteString(" IN (")
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("$" + strconv.Itoa(i+1))
	}
	q.WriteByte(')')
	q.WriteString(suffix)
	return q.String()
}

// chunked returns the queries of prefix … IN (keys) suffix, at most 500
// keys each.
func chunked(keys []any, prefix, suffix, what string) []statement {
	var out []statement
	for len(keys) > 0 {
		n := min(len(keys), 500)
		out = append(out, statement{inList(prefix, n, suffix), keys[:n], what})
		keys = keys[n:]
	}
	return out
}

// takenQueries return which of the batch's unique keys the journal
// holds. The head lock makes the answer hold until the commit.
func takenQueries(batch []*journalAppend) []statement {
	var keys []any
	for _, a := range batch {
		for _, r := range a.recs {
			if r.Unique != "" {
				keys = append(keys, r.Unique)
			}
		}
	}
	return chunked(keys, `SELECT unique_key FROM governance_journal WHERE unique_key`, "", "unique keys")
}

// queryRows runs q in tx and calls scan for each row.
func queryRows(ctx context.Context, tx *sql.Tx, q statement, scan func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, q.query, q.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// sealed is what an append's transaction writes once it has read the
// head, the unique keys taken and the leases' epochs.
type sealed struct {
	rows  []any // insertCols per record
	moves *leaseMoves
	head  *govern.Record
}

// sealBatch chains the records of the batch's Appends that may be
// appended after the head (seq, hash) — setting in out the outcome of
// those that may not: a run whose deferred records were lost (lost, or a
// deferred Append before it in the batch that failed), a unique key
// taken, a lease epoch not the newest, a record that cannot be sealed —
// and returns what to write; nil when nothing is to be.
func sealBatch(batch []*journalAppend, out []error, seq int64, hash string, taken map[string]bool, epochs map[string]int64, lost func([]*govern.Record) error) *sealed {
	w := &sealed{moves: &leaseMoves{states: map[string]string{}}}
	var prev *govern.Record
	if seq > 0 {
		prev = &govern.Record{Seq: uint64(seq), Hash: hash}
	}
	var failed map[runEpoch]error // runs of deferred Appends refused here
	for i, a := range batch {
		add, p, err := sealAppend(a.recs, prev, taken, epochs, func() error {
			if err := lost(a.recs); err != nil {
				return err
			}
			if failed == nil {
				return nil
			}
			return lostIn(func(k runEpoch) (error, bool) { err, ok := failed[k]; return err, ok }, a.recs)
		})
		if out[i] = err; err != nil {
			if a.isDeferred() {
				if failed == nil {
					failed = map[runEpoch]error{}
				}
				for _, r := range a.recs {
					failed[runEpoch{r.RequestID, r.Epoch}] = err
				}
			}
			continue
		}
		w.rows = append(w.rows, add...)
		prev = p
		w.moves.add(a.recs)
		for _, r := range a.recs {
			if r.Unique != "" {
				taken[r.Unique] = true
			}
		}
	}
	if len(w.rows) == 0 {
		return nil
	}
	w.head = prev
	return w
}

// sealAppend chains the records of one Append after prev, unless lost,
// a unique key or a lease epoch refuses them, and returns their rows and
// the last of them.
func sealAppend(recs []*govern.Record, prev *govern.Record, taken map[string]bool, epochs map[string]int64, lost func() error) ([]any, *govern.Record, error) {
	if err := lost(); err != nil {
		return nil, nil, err
	}
	if err := checkTaken(recs, taken); err != nil {
		return nil, nil, err
	}
	if err := checkFence(recs, epochs); err != nil {
		return nil, nil, err
	}
	var add []any
	for _, r := range recs {
		if err := govern.Seal(prev, r); err != nil {
			return nil, nil, err
		}
		line, err := journal.AppendRecord(nil, r)
		if err != nil {
			return nil, nil, err
		}
		var unique any
		if r.Unique != "" {
			unique = r.Unique
		}
		add = append(add, int64(r.Seq), r.RequestID, unique, string(line[:len(line)-1]), string(r.Kind))
		prev = r
	}
	return add, prev, nil
}

// statements are the writes of an append's transaction: the rows, the
// lease moves, the new head.
func (w *sealed) statements(s *Store) []statement {
	var out []statement
	for rows := w.rows; len(rows) > 0; {
		n := min(len(rows), insertCols*insertRows)
		out = append(out, statement{insertQuery(n / insertCols), rows[:n], "insert"})
		rows = rows[n:]
	}
	out = append(out, w.moves.statements(s)...)
	return append(out, statement{`UPDATE governance_journal_head SET seq = $1, hash = $2 WHERE id = 1`,
		[]any{int64(w.head.Seq), w.head.Hash}, "move the head"})
}

func checkTaken(recs []*govern.Record, taken map[string]bool) error {
	for _, r := range recs {
		if r.Unique != "" && taken[r.Unique] {
			return fmt.Errorf("sqlstore: journal: unique key %q: %w", r.Unique, govern.ErrDuplicate)
		}
	}
	return nil
}

// insertCols is the number of columns insertQuery sets per row.
const insertCols = 5

// insertQuery returns an INSERT of n journal rows.
func insertQuery(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO governance_journal (seq, request_id, unique_key, record, kind) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		b := insertCols * i
		fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d)", b+1, b+2, b+3, b+4, b+5)
	}
	return q.String()
}

// isUniqueViolation reports whether err is a unique constraint violation
// (which the head lock and the key check before the insert make
// unreachable, unless another writer bypassed them).
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func (j *sqlJournal) isClosed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closed
}

func (j *sqlJournal) Records(ctx context.Context, from uint64) iter.Seq2[govern.Record, error] {
	return j.pages(ctx, from, j.page)
}

// pages yields the records of the pages page reads, from seq from on.
func (j *sqlJournal) pages(ctx context.Context, from uint64, page func(context.Context, int64) ([]journalRow, error)) iter.Seq2[govern.Record, error] {
	return func(yield func(govern.Record, error) bool) {
		next := int64(min(max(from, 1), 1<<62))
		for {
			if j.isClosed() {
				yield(govern.Record{}, errJournalClosed)
				return
			}
			err := j.sync(ctx) // what this value deferred is read too
			var rows []journalRow
			if err == nil {
				rows, err = page(ctx, next)
			}
			if err != nil {
				j.s.mark(&err)
				yield(govern.Record{}, err)
				return
			}
			if len(rows) == 0 {
				return
			}
			for _, row := range rows {
				if err := ctx.Err(); err != nil {
					yield(govern.Record{}, err)
					return
				}
				rec, err := decodeRow(row)
				if !yield(rec, err) || err != nil {
					return
				}
			}
			next = rows[len(rows)-1].seq + 1
		}
	}
}

// RecordsOf is Records reading only the records of the given kinds (and
// those written before the journal kept kinds, whatever theirs): the rows
// of other kinds are skipped by the database, not decoded. The governor's
// index follows the journal with it.
func (j *sqlJournal) RecordsOf(ctx context.Context, from uint64, kinds []govern.RecordKind) iter.Seq2[govern.Record, error] {
	var q strings.Builder
	var kargs []any
	q.WriteString(`SELECT seq, record FROM governance_journal WHERE seq >= $1 AND (kind IS NULL OR kind IN (`)
	for i, k := range kinds {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("$" + strconv.Itoa(i+2))
		kargs = append(kargs, string(k))
	}
	q.WriteString(`)) ORDER BY seq LIMIT ` + strconv.Itoa(journalPage))
	return j.pages(ctx, from, func(ctx context.Context, next int64) ([]journalRow, error) {
		return j.query(ctx, q.String(), append([]any{next}, kargs...)...)
	})
}

type journalRow struct {
	seq    int64
	record string
}

// page reads the rows from seq on, at most journalPage, all of them
// before returning: a caller may append while it iterates (on an
// in-memory store, through the one connection).
func (j *sqlJournal) page(ctx context.Context, from int64) ([]journalRow, error) {
	return j.query(ctx, `SELECT seq, record FROM governance_journal WHERE seq >= $1 ORDER BY seq LIMIT `+strconv.Itoa(journalPage), from)
}

func (j *sqlJournal) query(ctx context.Context, q string, args ...any) ([]journalRow, error) {
	var out []journalRow
	if err := j.s.scanRows(ctx, q, args, func(scan func(dest ...any) error) error {
		var r journalRow
		err := scan(&r.seq, &r.record)
		out = append(out, r)
		return err
	}); err != nil {
		return nil, fmt.Errorf("sqlstore: journal: %w", err)
	}
	return out, nil
}

// decodeRow decodes a row's record; one that does not decode breaks the
// chain there.
func decodeRow(row journalRow) (govern.Record, error) {
	rec, err := journal.DecodeRecord([]byte(row.record))
	if err != nil {
		return govern.Record{}, &govern.ChainError{Seq: uint64(row.seq), Reason: "the stored record does not decode: " + err.Error()}
	}
	return rec, nil
}

// RunRecords implements govern.RunReader.
func (j *sqlJournal) RunRecords(ctx context.Context, requestID string) (_ []govern.Record, err error) {
	defer j.s.mark(&err)
	if j.isClosed() {
		return nil, errJournalClosed
	}
	if err := j.sync(ctx); err != nil {
		return nil, err
	}
	rows, err := j.query(ctx, `SELECT seq, record FROM governance_journal WHERE request_id = $1 ORDER BY seq`, requestID)
	if err != nil {
		return nil, err
	}
	out := make([]govern.Record, 0, len(rows))
	for _, row := range rows {
		rec, err := decodeRow(row)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Close ends the use of this Journal value: Appends still queued,
// deferred ones included, are committed; later ones fail. The store stays
// open.
func (j *sqlJournal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	if j.flush != nil {
		j.flush.Stop()
		j.flush = nil
	}
	if j.deferred == 0 {
		j.mu.Unlock()
		return nil
	}
	return j.commitLocked(nil)
}

// AuditCursor returns a cursor for an audit exporter (govern/audit.Cursor)
// kept in the store under name: the last journal seq a sink acknowledged,
// one row of governance_audit_cursors. Several exporters use several
// names.
func (s *Store) AuditCursor(name string) *AuditCursor { return &AuditCursor{s: s, name: name} }

// AuditCursor is a persisted export position; see Store.AuditCursor.
type AuditCursor struct {
	s    *Store
	name string
}

// Load returns the stored seq, 0 when none was stored.
func (c *AuditCursor) Load(ctx context.Context) (_ uint64, err error) {
	defer c.s.mark(&err)
	var seq int64
	err = c.s.db.QueryRowContext(ctx, `SELECT seq FROM governance_audit_cursors WHERE name = $1`, c.name).Scan(&seq)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: audit cursor %q: %w", c.name, err)
	}
	return uint64(seq), nil
}

// Store stores seq durably.
func (c *AuditCursor) Store(ctx context.Context, seq uint64) (err error) {
	defer c.s.mark(&err)
	unlock, err := c.s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := c.s.db.ExecContext(ctx, `
INSERT INTO governance_audit_cursors (name, seq) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET seq = excluded.seq`, c.name, int64(seq)); err != nil {
		return fmt.Errorf("sqlstore: audit cursor %q: %w", c.name, err)
	}
	return nil
}
