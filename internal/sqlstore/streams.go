package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/jackc/pgx/v5"
)

// The UAMP stream store (streamlog.Store, UAMP 1.0 §5): the value
// ReplayStore returns keeps streams too, in table uamp_streams, so that
// servers sharing one PostgreSQL database resume each other's streams.
// Each stream is rows under (owner, stream_id):
//
//   - its head, seq -1: request_id (unique per owner), next_seq,
//     final (0/1), acked, cancelled (0/1), lease_until and expires_at
//     (Unix ms, by the database's clock); delta is NULL;
//   - one row per delta kept, seq = its delta_seq, delta = its JSON as
//     the producer wrote it; the head's columns are NULL.
//
// A stream exists while expires_at is ahead of the database's clock.
// Writes that check the head lock it (SELECT … FOR UPDATE on
// PostgreSQL; SQLite has one writer), so that an Append and an EndDead
// racing for one delta_seq are serialised and one of them loses. Every
// change is signalled to this process's watchers and, on PostgreSQL,
// with NOTIFY agentry_uamp_streams to every other process's, whose
// listener (one connection, opened by the first Watch) wakes theirs.

// notifyChannel is the PostgreSQL channel of stream changes; a
// notification's payload is the changed stream's token.
const notifyChannel = "agentry_uamp_streams"

// streamInsertRows bounds the delta rows of one INSERT (4 parameters
// each).
const streamInsertRows = 128

// streamToken names a stream in notifications: fixed-length, whatever
// the owner and stream_id.
func streamToken(k streamlog.Key) string {
	h := sha256.Sum256([]byte(k.Owner + "\x00" + k.ID))
	return hex.EncodeToString(h[:16])
}

// nowMS is the database's clock in Unix milliseconds, as SQL.
func (s *Store) nowMS() string {
	if s.dialect == postgres {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST(unixepoch('subsec') * 1000 AS INTEGER)`
}

// sq returns query with NOW_MS replaced by the database's clock and
// FOR_UPDATE by the row lock PostgreSQL needs (nothing on SQLite).
func (s *Store) sq(query string) string {
	lock := ""
	if s.dialect == postgres {
		lock = " FOR UPDATE"
	}
	return strings.NewReplacer("NOW_MS", s.nowMS(), "FOR_UPDATE", lock).Replace(query)
}

// headColumns are the columns scanHead reads, with the lease as 0/1.
const headColumns = `stream_id, request_id, next_seq, final, acked, cancelled, CASE WHEN lease_until > NOW_MS THEN 1 ELSE 0 END`

func scanHead(row interface{ Scan(...any) error }, owner string) (streamlog.Head, error) {
	var (
		h                       streamlog.Head
		final, cancelled, alive int64
	)
	h.Owner = owner
	err := row.Scan(&h.ID, &h.RequestID, &h.Next, &final, &h.Acked, &cancelled, &alive)
	h.Final, h.Cancelled, h.Alive = final == 1, cancelled == 1, alive == 1
	return h, err
}

func streamNotFound(k streamlog.Key) error {
	return fmt.Errorf("sqlstore: stream %q of %s: %w", k.ID, k.Owner, streamlog.ErrNotFound)
}

// write runs f in a write transaction (SQLite: this process's writer
// lock, BEGIN IMMEDIATE) and commits; then it signals k's watchers.
func (s *Store) streamWrite(ctx context.Context, k streamlog.Key, f func(tx *sql.Tx) error) error {
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: streams: %w", err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if s.dialect == postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, streamToken(k)); err != nil {
			return fmt.Errorf("sqlstore: streams: notify: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: streams: commit: %w", err)
	}
	s.hub.signal(streamToken(k))
	return nil
}

// purge deletes, in tx, the expired streams holding k or owner's
// request, and deltas of k left without a head.
func (s *Store) purge(ctx context.Context, tx *sql.Tx, k streamlog.Key, requestID string) error {
	rows, err := tx.QueryContext(ctx, s.sq(`SELECT stream_id FROM uamp_streams
WHERE owner = $1 AND seq = -1 AND (stream_id = $2 OR request_id = $3) AND expires_at <= NOW_MS`), k.Owner, k.ID, requestID)
	if err != nil {
		return fmt.Errorf("sqlstore: streams: %w", err)
	}
	var expired []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("sqlstore: streams: %w", err)
		}
		expired = append(expired, id)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("sqlstore: streams: %w", err)
	}
	for _, id := range expired {
		if _, err := tx.ExecContext(ctx, `DELETE FROM uamp_streams WHERE owner = $1 AND stream_id = $2`, k.Owner, id); err != nil {
			return fmt.Errorf("sqlstore: streams: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM uamp_streams WHERE owner = $1 AND stream_id = $2 AND seq >= 0
AND NOT EXISTS (SELECT 1 FROM uamp_streams h WHERE h.owner = $1 AND h.stream_id = $2 AND h.seq = -1)`, k.Owner, k.ID); err != nil {
		return fmt.Errorf("sqlstore: streams: %w", err)
	}
	return nil
}

func (r *uampStore) Create(ctx context.Context, h streamlog.Head, t streamlog.Terms) (err error) {
	s := r.s
	defer s.mark(&err)
	return s.streamWrite(ctx, h.Key, func(tx *sql.Tx) error {
		if err := s.purge(ctx, tx, h.Key, h.RequestID); err != nil {
			return err
		}
		lease := t.Lease.Milliseconds()
		_, err := tx.ExecContext(ctx, s.sq(`INSERT INTO uamp_streams
(owner, stream_id, seq, request_id, next_seq, final, acked, cancelled, lease_until, expires_at)
VALUES ($1, $2, -1, $3, 0, 0, -1, 0, NOW_MS + $4, NOW_MS + $5)`), h.Owner, h.ID, h.RequestID, lease, lease+t.Linger.Milliseconds())
		if err != nil && isUniqueViolation(err) {
			return fmt.Errorf("sqlstore: stream %q or request %s of %s: %w", h.ID, h.RequestID, h.Owner, streamlog.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("sqlstore: streams: create: %w", err)
		}
		return nil
	})
}

// lockHead reads and locks k's head in tx; notFound when it is absent
// or expired.
func (s *Store) lockHead(ctx context.Context, tx *sql.Tx, k streamlog.Key) (streamlog.Head, error) {
	h, err := scanHead(tx.QueryRowContext(ctx, s.sq(`SELECT `+headColumns+` FROM uamp_streams
WHERE owner = $1 AND stream_id = $2 AND seq = -1 AND expires_at > NOW_MS FOR_UPDATE`), k.Owner, k.ID), k.Owner)
	if isNoRows(err) {
		return h, streamNotFound(k)
	}
	if err != nil {
		return h, fmt.Errorf("sqlstore: streams: %w", err)
	}
	return h, nil
}

// insertDeltas inserts deltas as delta_seq first, first+1, … in tx.
func insertDeltas(ctx context.Context, tx *sql.Tx, k streamlog.Key, first int64, deltas [][]byte) error {
	for len(deltas) > 0 {
		n := min(len(deltas), streamInsertRows)
		var q strings.Builder
		q.WriteString(`INSERT INTO uamp_streams (owner, stream_id, seq, delta) VALUES `)
		args := make([]any, 0, 4*n)
		for i := range n {
			if i > 0 {
				q.WriteByte(',')
			}
			p := 4 * i
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d)", p+1, p+2, p+3, p+4)
			args = append(args, k.Owner, k.ID, first+int64(i), string(deltas[i]))
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("sqlstore: streams: append: %w", err)
		}
		first += int64(n)
		deltas = deltas[n:]
	}
	return nil
}

func (r *uampStore) Append(ctx context.Context, k streamlog.Key, first int64, deltas [][]byte, final bool, keep int, t streamlog.Terms) (h streamlog.Head, err error) {
	s := r.s
	defer s.mark(&err)
	err = s.streamWrite(ctx, k, func(tx *sql.Tx) error {
		var err error
		if h, err = s.lockHead(ctx, tx, k); err != nil {
			return err
		}
		if h.Final || first != h.Next {
			return fmt.Errorf("sqlstore: stream %q of %s: append at %d, next %d, final %v: %w", k.ID, k.Owner, first, h.Next, h.Final, streamlog.ErrConflict)
		}
		if err := insertDeltas(ctx, tx, k, first, deltas); err != nil {
			return err
		}
		h.Next += int64(len(deltas))
		if _, err := tx.ExecContext(ctx, `DELETE FROM uamp_streams WHERE owner = $1 AND stream_id = $2 AND seq >= 0 AND seq < $3`,
			k.Owner, k.ID, h.Next-int64(max(keep, 0))); err != nil {
			return fmt.Errorf("sqlstore: streams: append: trim: %w", err)
		}
		lease, expires := t.Lease.Milliseconds(), (t.Lease + t.Linger).Milliseconds()
		if final && len(deltas) > 0 {
			h.Final, expires = true, t.Linger.Milliseconds()
		}
		var fin int64
		if h.Final {
			fin = 1
		}
		if _, err := tx.ExecContext(ctx, s.sq(`UPDATE uamp_streams SET next_seq = $3, final = $4, lease_until = NOW_MS + $5, expires_at = NOW_MS + $6
WHERE owner = $1 AND stream_id = $2 AND seq = -1`), k.Owner, k.ID, h.Next, fin, lease, expires); err != nil {
			return fmt.Errorf("sqlstore: streams: append: %w", err)
		}
		h.Alive = lease > 0
		return nil
	})
	return h, err
}

func (r *uampStore) Renew(ctx context.Context, k streamlog.Key, t streamlog.Terms) (h streamlog.Head, err error) {
	s := r.s
	defer s.mark(&err)
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return h, err
	}
	defer unlock()
	lease := t.Lease.Milliseconds()
	h, err = scanHead(s.db.QueryRowContext(ctx, s.sq(`UPDATE uamp_streams SET
lease_until = CASE WHEN final = 0 THEN NOW_MS + $3 ELSE lease_until END,
expires_at = CASE WHEN final = 0 THEN NOW_MS + $4 ELSE expires_at END
WHERE owner = $1 AND stream_id = $2 AND seq = -1 AND expires_at > NOW_MS
RETURNING `+headColumns), k.Owner, k.ID, lease, lease+t.Linger.Milliseconds()), k.Owner)
	if isNoRows(err) {
		return h, streamNotFound(k)
	}
	if err != nil {
		return h, fmt.Errorf("sqlstore: streams: renew: %w", err)
	}
	return h, nil
}

func (r *uampStore) Head(ctx context.Context, k streamlog.Key) (h streamlog.Head, err error) {
	s := r.s
	defer s.mark(&err)
	h, err = scanHead(s.db.QueryRowContext(ctx, s.sq(`SELECT `+headColumns+` FROM uamp_streams
WHERE owner = $1 AND stream_id = $2 AND seq = -1 AND expires_at > NOW_MS`), k.Owner, k.ID), k.Owner)
	if isNoRows(err) {
		return h, streamNotFound(k)
	}
	if err != nil {
		return h, fmt.Errorf("sqlstore: streams: %w", err)
	}
	return h, nil
}

func (r *uampStore) Request(ctx context.Context, owner, requestID string) (h streamlog.Head, err error) {
	s := r.s
	defer s.mark(&err)
	h, err = scanHead(s.db.QueryRowContext(ctx, s.sq(`SELECT `+headColumns+` FROM uamp_streams
WHERE owner = $1 AND request_id = $2 AND seq = -1 AND expires_at > NOW_MS`), owner, requestID), owner)
	if isNoRows(err) {
		return h, fmt.Errorf("sqlstore: request %s of %s: %w", requestID, owner, streamlog.ErrNotFound)
	}
	if err != nil {
		return h, fmt.Errorf("sqlstore: streams: %w", err)
	}
	return h, nil
}

func (r *uampStore) Read(ctx context.Context, k streamlog.Key, from int64, limit int) (out [][]byte, h streamlog.Head, err error) {
	s := r.s
	defer s.mark(&err)
	if h, err = r.Head(ctx, k); err != nil {
		return nil, h, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT delta FROM uamp_streams
WHERE owner = $1 AND stream_id = $2 AND seq >= $3 ORDER BY seq LIMIT $4`, k.Owner, k.ID, max(from, 0), limit)
	if err != nil {
		return nil, h, fmt.Errorf("sqlstore: streams: read: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d []byte
		if err := rows.Scan(&d); err != nil {
			return nil, h, fmt.Errorf("sqlstore: streams: read: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, h, fmt.Errorf("sqlstore: streams: read: %w", err)
	}
	return out, h, nil
}

// update runs one UPDATE of k's head that changes at most one row; when
// none changed, why is asked of the head (it may be absent).
func (r *uampStore) update(ctx context.Context, k streamlog.Key, query string, why func(streamlog.Head) error, args ...any) error {
	s := r.s
	err := s.streamWrite(ctx, k, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.sq(query), append([]any{k.Owner, k.ID}, args...)...)
		if err != nil {
			return fmt.Errorf("sqlstore: streams: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlstore: streams: %w", err)
		}
		if n == 0 {
			return errUnchanged
		}
		return nil
	})
	if !errors.Is(err, errUnchanged) {
		return err
	}
	h, err := r.Head(ctx, k)
	if err != nil {
		return err
	}
	return why(h)
}

// errUnchanged rolls back an update that changed nothing.
var errUnchanged = errors.New("sqlstore: unchanged")

func (r *uampStore) Ack(ctx context.Context, k streamlog.Key, seq int64) (err error) {
	defer r.s.mark(&err)
	return r.update(ctx, k, `UPDATE uamp_streams SET acked = $3
WHERE owner = $1 AND stream_id = $2 AND seq = -1 AND expires_at > NOW_MS AND acked < $3`,
		func(streamlog.Head) error { return nil }, seq)
}

func (r *uampStore) Cancel(ctx context.Context, k streamlog.Key) (err error) {
	defer r.s.mark(&err)
	return r.update(ctx, k, `UPDATE uamp_streams SET cancelled = 1
WHERE owner = $1 AND stream_id = $2 AND seq = -1 AND expires_at > NOW_MS AND final = 0 AND cancelled = 0`,
		func(streamlog.Head) error {
			return fmt.Errorf("sqlstore: stream %q of %s: %w", k.ID, k.Owner, streamlog.ErrEnded)
		})
}

func (r *uampStore) EndDead(ctx context.Context, k streamlog.Key, seq int64, delta []byte, linger time.Duration) (err error) {
	s := r.s
	defer s.mark(&err)
	return s.streamWrite(ctx, k, func(tx *sql.Tx) error {
		h, err := s.lockHead(ctx, tx, k)
		if err != nil {
			return err
		}
		if h.Final || h.Alive || seq != h.Next {
			return fmt.Errorf("sqlstore: stream %q of %s: end at %d, next %d, final %v, alive %v: %w", k.ID, k.Owner, seq, h.Next, h.Final, h.Alive, streamlog.ErrConflict)
		}
		if err := insertDeltas(ctx, tx, k, seq, [][]byte{delta}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.sq(`UPDATE uamp_streams SET next_seq = $3, final = 1, expires_at = NOW_MS + $4
WHERE owner = $1 AND stream_id = $2 AND seq = -1`), k.Owner, k.ID, seq+1, linger.Milliseconds()); err != nil {
			return fmt.Errorf("sqlstore: streams: end: %w", err)
		}
		return nil
	})
}

func (r *uampStore) Delete(ctx context.Context, k streamlog.Key) (err error) {
	s := r.s
	defer s.mark(&err)
	return s.streamWrite(ctx, k, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM uamp_streams WHERE owner = $1 AND stream_id = $2`, k.Owner, k.ID); err != nil {
			return fmt.Errorf("sqlstore: streams: delete: %w", err)
		}
		return nil
	})
}

// Sweep deletes the expired heads, then the deltas left without a head
// (those of the heads just deleted, and any an Append racing a Delete
// left behind).
func (r *uampStore) Sweep(ctx context.Context) (err error) {
	s := r.s
	defer s.mark(&err)
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := s.db.ExecContext(ctx, s.sq(`DELETE FROM uamp_streams WHERE seq = -1 AND expires_at <= NOW_MS`)); err != nil {
		return fmt.Errorf("sqlstore: streams: sweep: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM uamp_streams WHERE seq >= 0 AND NOT EXISTS
(SELECT 1 FROM uamp_streams h WHERE h.owner = uamp_streams.owner AND h.stream_id = uamp_streams.stream_id AND h.seq = -1)`); err != nil {
		return fmt.Errorf("sqlstore: streams: sweep: %w", err)
	}
	return nil
}

func (r *uampStore) Watch(k streamlog.Key) (<-chan struct{}, func()) {
	return r.s.hub.watch(streamToken(k))
}

var _ streamlog.Store = (*uampStore)(nil)

// streamHub dispatches stream changes to watchers by token: this
// process's writes directly, other processes' (PostgreSQL) through a
// listener on notifyChannel, started by the first watch. The same
// listener hands approval decisions (decisionChannel) to their watchers.
type streamHub struct {
	s         *Store
	ctx       context.Context
	cancel    context.CancelFunc
	mu        sync.Mutex
	watchers  map[string]map[chan struct{}]struct{}
	decisions []func(payload string)
	started   bool
	done      chan struct{} // closed when the listener has stopped
}

func newStreamHub(s *Store) *streamHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &streamHub{s: s, ctx: ctx, cancel: cancel, watchers: map[string]map[chan struct{}]struct{}{}, done: make(chan struct{})}
}

func (h *streamHub) watch(token string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	if h.watchers[token] == nil {
		h.watchers[token] = map[chan struct{}]struct{}{}
	}
	h.watchers[token][c] = struct{}{}
	h.startLocked()
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.watchers[token], c)
		if len(h.watchers[token]) == 0 {
			delete(h.watchers, token)
		}
		h.mu.Unlock()
	}
}

// startLocked starts the listener unless it runs. h.mu is held.
func (h *streamHub) startLocked() {
	if !h.started && h.s.dialect == postgres && h.ctx.Err() == nil {
		h.started = true
		go h.listen()
	}
}

// watchDecisions calls f with the payload of every decisionChannel
// notification, in the listener's goroutine, until the Store closes.
func (h *streamHub) watchDecisions(f func(payload string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.decisions = append(h.decisions, f)
	h.startLocked()
}

func (h *streamHub) decided(payload string) {
	h.mu.Lock()
	fs := slices.Clone(h.decisions)
	h.mu.Unlock()
	for _, f := range fs {
		f(payload)
	}
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (h *streamHub) signal(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.watchers[token] {
		wake(c)
	}
}

// signalAll wakes every watcher: notifications may have been missed.
func (h *streamHub) signalAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cs := range h.watchers {
		for c := range cs {
			wake(c)
		}
	}
}

// listenRetry is how long the listener waits before listening again
// after its connection failed.
const listenRetry = time.Second

// listen holds one connection listening on notifyChannel until the
// Store closes, reconnecting after a failure.
func (h *streamHub) listen() {
	defer close(h.done)
	for {
		err := h.listenOnce()
		h.signalAll() // what was missed meanwhile is read by the watchers' next poll
		if h.ctx.Err() != nil {
			return
		}
		_ = err // the database is out of reach: the watchers poll meanwhile
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(listenRetry):
		}
	}
}

func (h *streamHub) listenOnce() error {
	return h.s.withPgx(h.ctx, func(pc *pgx.Conn) error {
		// The connection is discarded after (driver.ErrBadConn), never
		// handed back to the pool still listening.
		if _, err := pc.Exec(h.ctx, "LISTEN "+notifyChannel+"; LISTEN "+decisionChannel); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		h.signalAll()
		for {
			n, err := pc.WaitForNotification(h.ctx)
			if err != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			if n.Channel == decisionChannel {
				h.decided(n.Payload)
				continue
			}
			h.signal(n.Payload)
		}
	})
}

// close stops the listener and waits for it.
func (h *streamHub) close() {
	h.mu.Lock()
	started := h.started
	h.cancel()
	h.mu.Unlock()
	if started {
		<-h.done
	}
}
