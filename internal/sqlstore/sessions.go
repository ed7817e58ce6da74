package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/workflow"
)

// Sessions returns the store's workflow.SessionStore (UAIP-0.1 sessions):
// one row per session in workflow_sessions, the state as its JSON text.
//
// Create, Update and Delete are group-committed: the writes that arrive
// while a transaction commits are applied together in the next one, each
// with its own outcome, and each returns only once that transaction has
// committed — on SQLite, with synchronous=FULL, once the WAL is fsynced —
// so that concurrent writers share fsyncs. A writer whose context ends
// while its write is still queued withdraws it. Update is a
// compare-and-swap in the database (UPDATE … WHERE version = expected),
// so it holds across Stores and processes sharing one database.
//
// Times are kept to the millisecond. Expiry is judged by the wall clock:
// an expired session is gone for Get and Update, and Create may reuse its
// ID, before DeleteExpired removes it.
func (s *Store) Sessions() workflow.SessionStore { return sessions{s} }

type sessions struct{ s *Store }

// sessionQueries are the session statements, prepared when the store is
// opened (and by database/sql on each connection at its first use):
// parsing them every time was a quarter of the CPU time of a session read
// and write on SQLite.
type sessionQueries struct {
	get, create, update, version, delete *sql.Stmt
}

// The session statements.
const (
	sessionGetQuery = `
SELECT workflow, stage, state, version, created_at, updated_at, expires_at FROM workflow_sessions WHERE session_id = $1`
	// A row that exists but has expired is replaced: that session is
	// gone, as Get reports.
	sessionCreateQuery = `
INSERT INTO workflow_sessions (session_id, workflow, stage, state, version, created_at, updated_at, expires_at)
VALUES ($1, $2, $3, $4, 1, $5, $6, $7)
ON CONFLICT (session_id) DO UPDATE SET
	workflow = excluded.workflow, stage = excluded.stage, state = excluded.state, version = excluded.version,
	created_at = excluded.created_at, updated_at = excluded.updated_at, expires_at = excluded.expires_at
WHERE workflow_sessions.expires_at <= $8`
	// The compare-and-swap: from version $9, unless expired at $10.
	sessionUpdateQuery = `
UPDATE workflow_sessions SET workflow = $2, stage = $3, state = $4, version = $5, created_at = $6, updated_at = $7, expires_at = $8
WHERE session_id = $1 AND version = $9 AND (expires_at IS NULL OR expires_at > $10)`
	sessionVersionQuery = `SELECT version, expires_at FROM workflow_sessions WHERE session_id = $1`
	sessionDeleteQuery  = `DELETE FROM workflow_sessions WHERE session_id = $1`
)

func prepareSessionQueries(ctx context.Context, db *sql.DB) (*sessionQueries, error) {
	q := &sessionQueries{}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&q.get, sessionGetQuery},
		{&q.create, sessionCreateQuery},
		{&q.update, sessionUpdateQuery},
		{&q.version, sessionVersionQuery},
		{&q.delete, sessionDeleteQuery},
	} {
		stmt, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			q.close()
			return nil, fmt.Errorf("sqlstore: prepare session queries: %w", err)
		}
		*p.stmt = stmt
	}
	return q, nil
}

func (q *sessionQueries) close() {
	for _, stmt := range []*sql.Stmt{q.get, q.create, q.update, q.version, q.delete} {
		if stmt != nil {
			stmt.Close()
		}
	}
}

// validText reports whether a session's ID, workflow or stage can be
// stored: UTF-8 without NUL bytes (PostgreSQL's TEXT refuses anything
// else, and one failed statement would abort a whole batch).
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func validID(id string) bool { return id != "" && validText(id) }

var zeroMS = time.Time{}.UnixMilli()

// nullMS is t in Unix milliseconds, NULL for the zero time.
func nullMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func fromMS(ms int64) time.Time {
	if ms == zeroMS {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func notFound(id string) error {
	return fmt.Errorf("sqlstore: session %q: %w", id, workflow.ErrSessionNotFound)
}

// newWrite validates and encodes a session for Create or Update.
func newWrite(kind writeKind, s *workflow.Session) (*write, error) {
	if !validID(s.ID) {
		return nil, fmt.Errorf("sqlstore: invalid session ID %q", s.ID)
	}
	if !validText(s.Workflow) || !validText(s.Stage) {
		return nil, fmt.Errorf("sqlstore: session %q: workflow or stage name is not UTF-8 text", s.ID)
	}
	state := s.State
	if state == nil {
		state = map[string]any{}
	}
	data, err := json.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: session %q: state: %w", s.ID, err)
	}
	return &write{kind: kind, id: s.ID, workflow: s.Workflow, stage: s.Stage, state: string(data), version: s.Version,
		created: s.CreatedAt.UnixMilli(), updated: s.UpdatedAt.UnixMilli(), expires: nullMS(s.ExpiresAt)}, nil
}

func (ss sessions) Create(ctx context.Context, s *workflow.Session) (err error) {
	defer ss.s.mark(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := newWrite(createSession, s)
	if err != nil {
		return err
	}
	return ss.s.commits.submit(ctx, w)
}

func (ss sessions) Update(ctx context.Context, s *workflow.Session) (err error) {
	defer ss.s.mark(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(s.ID) {
		return notFound(s.ID) // such a session cannot exist
	}
	w, err := newWrite(updateSession, s)
	if err != nil {
		return err
	}
	return ss.s.commits.submit(ctx, w)
}

func (ss sessions) Delete(ctx context.Context, id string) (err error) {
	defer ss.s.mark(&err)
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(id) {
		return nil
	}
	return ss.s.commits.submit(ctx, &write{kind: deleteSession, id: id})
}

func (ss sessions) Get(ctx context.Context, id string) (_ *workflow.Session, err error) {
	defer ss.s.mark(&err)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !validID(id) {
		return nil, notFound(id)
	}
	var (
		state            []byte
		created, updated int64
		expires          sql.NullInt64
		sess             = workflow.Session{ID: id}
	)
	err = ss.s.queries.get.QueryRowContext(ctx, id).Scan(&sess.Workflow, &sess.Stage, &state, &sess.Version, &created, &updated, &expires)
	if isNoRows(err) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: get session %q: %w", id, err)
	}
	sess.CreatedAt, sess.UpdatedAt = fromMS(created), fromMS(updated)
	if expires.Valid {
		sess.ExpiresAt = fromMS(expires.Int64)
	}
	if sess.Expired(time.Now()) {
		return nil, notFound(id)
	}
	if err := json.Unmarshal(state, &sess.State); err != nil {
		return nil, fmt.Errorf("sqlstore: session %q: corrupt state: %w", id, err)
	}
	if sess.State == nil {
		return nil, fmt.Errorf("sqlstore: session %q: corrupt state: not a JSON object", id)
	}
	return &sess, nil
}

func (ss sessions) DeleteExpired(ctx context.Context, now time.Time) (_ int, err error) {
	defer ss.s.mark(&err)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	unlock, err := ss.s.lockWrites(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	res, err := ss.s.db.ExecContext(ctx, `DELETE FROM workflow_sessions WHERE expires_at <= $1`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete expired sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete expired sessions: %w", err)
	}
	return int(n), nil
}

// sessionListQuery pages through a workflow's live sessions, newest
// created first: $3 and $4 are the cursor (created_at, session_id).
const sessionListQuery = `
SELECT session_id, stage, state, version, created_at, updated_at, expires_at FROM workflow_sessions
WHERE workflow = $1 AND (expires_at IS NULL OR expires_at > $2) AND (created_at < $3 OR (created_at = $3 AND session_id < $4))
ORDER BY created_at DESC, session_id DESC LIMIT $5`

// ListSessions implements workflow.SessionLister.
func (ss sessions) ListSessions(ctx context.Context, wf, cursor string, limit int) (_ []*workflow.Session, _ string, err error) {
	defer ss.s.mark(&err)
	cms, cid, err := workflow.ParseSessionCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	if cursor == "" {
		cms = math.MaxInt64
	}
	if !validText(wf) || !validText(cid) {
		return nil, "", nil // no session has such a name
	}
	var out []*workflow.Session
	err = ss.s.scanRows(ctx, sessionListQuery, []any{wf, time.Now().UnixMilli(), cms, cid, limit + 1}, func(scan func(dest ...any) error) error {
		var (
			state            []byte
			created, updated int64
			expires          sql.NullInt64
			sess             = &workflow.Session{Workflow: wf}
		)
		if err := scan(&sess.ID, &sess.Stage, &state, &sess.Version, &created, &updated, &expires); err != nil {
			return err
		}
		sess.CreatedAt, sess.UpdatedAt = fromMS(created), fromMS(updated)
		if expires.Valid {
			sess.ExpiresAt = fromMS(expires.Int64)
		}
		if err := json.Unmarshal(state, &sess.State); err != nil || sess.State == nil {
			return fmt.Errorf("sqlstore: session %q: corrupt state", sess.ID)
		}
		out = append(out, sess)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("sqlstore: list sessions: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = workflow.SessionCursor(out[limit-1])
	}
	return out, next, nil
}
