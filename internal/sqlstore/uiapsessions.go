package sqlstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
)

// UIAPSessions returns the store's uiapsession.Store: the app-side UIAP
// sessions (UIAP Core 0.1 at uiap.dev, §8.2) in table uiap_sessions, the
// events kept for replay in uiap_session_events (deleted with their
// session by the foreign key). Servers sharing one PostgreSQL database
// share the sessions: one resumes what another started.
//
// Every conditional write is one UPDATE or DELETE whose WHERE clause
// holds the condition (the version, the token hash), atomic in both
// databases, so that of concurrent writers exactly one succeeds. Times
// are Unix milliseconds given by the caller; the resume token is kept as
// the hex of its hash.
func (s *Store) UIAPSessions() uiapsession.Store { return uiapSessions{s} }

type uiapSessions struct{ s *Store }

// uiapTrimEvery is how many appends pass between deletions of a
// session's events beyond those it keeps.
const uiapTrimEvery = 32

func hexOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return hex.EncodeToString(b)
}

func (u uiapSessions) Create(ctx context.Context, sess *uiapsession.Session) (err error) {
	s := u.s
	defer s.mark(&err)
	if !validID(sess.ID) {
		return fmt.Errorf("sqlstore: invalid UIAP session ID %q", sess.ID)
	}
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	res, err := s.db.ExecContext(ctx, `
INSERT INTO uiap_sessions (session_id, version, token_hash, seq, state, app, expires_at) VALUES ($1, 1, $2, $3, $4, $5, $6)
ON CONFLICT (session_id) DO NOTHING`, sess.ID, hexOrNil(sess.TokenHash), sess.Seq, string(sess.State), string(sess.App), sess.ExpiresAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", sess.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", sess.ID, err)
	} else if n == 0 {
		return fmt.Errorf("sqlstore: UIAP session %q exists: %w", sess.ID, uiapsession.ErrConflict)
	}
	return nil
}

// scanUIAPSession reads the columns version, token_hash, seq, state, app,
// expires_at.
func scanUIAPSession(id string, row *sql.Row) (*uiapsession.Session, error) {
	var (
		sess       = &uiapsession.Session{ID: id}
		token      sql.NullString
		state, app string
		expires    int64
	)
	if err := row.Scan(&sess.Version, &token, &sess.Seq, &state, &app, &expires); err != nil {
		return nil, err
	}
	if token.Valid {
		h, err := hex.DecodeString(token.String)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: UIAP session %q: corrupt token hash", id)
		}
		sess.TokenHash = h
	}
	sess.State, sess.ExpiresAt = []byte(state), time.UnixMilli(expires).UTC()
	if app != "" {
		sess.App = []byte(app)
	}
	return sess, nil
}

func (u uiapSessions) Get(ctx context.Context, id string, now time.Time) (_ *uiapsession.Session, err error) {
	s := u.s
	defer s.mark(&err)
	if !validID(id) {
		return nil, uiapsession.ErrNotFound
	}
	sess, err := scanUIAPSession(id, s.db.QueryRowContext(ctx, `
SELECT version, token_hash, seq, state, app, expires_at FROM uiap_sessions WHERE session_id = $1 AND expires_at > $2`, id, now.UnixMilli()))
	if isNoRows(err) {
		return nil, fmt.Errorf("sqlstore: UIAP session %q: %w", id, uiapsession.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
	}
	return sess, nil
}

func (u uiapSessions) Claim(ctx context.Context, id string, tokenHash, newHash []byte, expires, now time.Time) (_ *uiapsession.Session, err error) {
	s := u.s
	defer s.mark(&err)
	if !validID(id) {
		return nil, uiapsession.ErrNotFound
	}
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sess, err := scanUIAPSession(id, s.db.QueryRowContext(ctx, `
UPDATE uiap_sessions SET version = version + 1, token_hash = $2, expires_at = $3
WHERE session_id = $1 AND token_hash = $4 AND expires_at > $5
RETURNING version, token_hash, seq, state, app, expires_at`,
		id, hexOrNil(newHash), expires.UnixMilli(), hex.EncodeToString(tokenHash), now.UnixMilli()))
	if err == nil {
		return sess, nil
	}
	if !isNoRows(err) {
		return nil, fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
	}
	// Nothing changed: say why.
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM uiap_sessions WHERE session_id = $1 AND expires_at > $2`,
		id, now.UnixMilli()).Scan(&n); err != nil {
		return nil, fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("sqlstore: UIAP session %q: %w", id, uiapsession.ErrNotFound)
	}
	return nil, fmt.Errorf("sqlstore: UIAP session %q: resume token does not match: %w", id, uiapsession.ErrConflict)
}

func (u uiapSessions) Append(ctx context.Context, id string, version int64, ev uiapsession.Event, keep int) (err error) {
	s := u.s
	defer s.mark(&err)
	if !validID(id) {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", id, uiapsession.ErrConflict)
	}
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE uiap_sessions SET seq = $2 WHERE session_id = $1 AND version = $3 AND seq = $4`,
		id, ev.Seq, version, ev.Seq-1)
	if err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("sqlstore: UIAP session %q is not at version %d, seq %d: %w", id, version, ev.Seq-1, uiapsession.ErrConflict)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO uiap_session_events (session_id, seq, event) VALUES ($1, $2, $3)`,
		id, ev.Seq, string(ev.Data)); err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: event %d: %w", id, ev.Seq, err)
	}
	if keep = max(keep, 1); ev.Seq%uiapTrimEvery == 0 && ev.Seq > int64(keep) {
		if _, err := tx.ExecContext(ctx, `DELETE FROM uiap_session_events WHERE session_id = $1 AND seq <= $2`,
			id, ev.Seq-int64(keep)); err != nil {
			return fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", id, err)
	}
	return nil
}

func (u uiapSessions) Events(ctx context.Context, id string, after int64) (_ []uiapsession.Event, err error) {
	s := u.s
	defer s.mark(&err)
	if !validID(id) {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, event FROM uiap_session_events WHERE session_id = $1 AND seq > $2 ORDER BY seq`, id, after)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: UIAP session %q: events: %w", id, err)
	}
	defer rows.Close()
	var out []uiapsession.Event
	for rows.Next() {
		var (
			ev   uiapsession.Event
			data string
		)
		if err := rows.Scan(&ev.Seq, &data); err != nil {
			return nil, fmt.Errorf("sqlstore: UIAP session %q: events: %w", id, err)
		}
		ev.Data = []byte(data)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: UIAP session %q: events: %w", id, err)
	}
	return out, nil
}

// exec runs one conditional write of a UIAP session; no row changed is
// ErrConflict.
func (u uiapSessions) exec(ctx context.Context, id, what, query string, args ...any) (err error) {
	s := u.s
	defer s.mark(&err)
	if !validID(id) {
		return fmt.Errorf("sqlstore: UIAP session %q: %w", id, uiapsession.ErrConflict)
	}
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %s: %w", id, what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlstore: UIAP session %q: %s: %w", id, what, err)
	} else if n == 0 {
		return fmt.Errorf("sqlstore: UIAP session %q: %s: %w", id, what, uiapsession.ErrConflict)
	}
	return nil
}

func (u uiapSessions) Touch(ctx context.Context, id string, version int64, expires time.Time) error {
	return u.exec(ctx, id, "touch", `UPDATE uiap_sessions SET expires_at = $3 WHERE session_id = $1 AND version = $2`,
		id, version, expires.UnixMilli())
}

func (u uiapSessions) Delete(ctx context.Context, id string, version int64) error {
	return u.exec(ctx, id, "delete", `DELETE FROM uiap_sessions WHERE session_id = $1 AND version = $2`, id, version)
}

func (u uiapSessions) Sweep(ctx context.Context, now time.Time) (_ int, err error) {
	s := u.s
	defer s.mark(&err)
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	res, err := s.db.ExecContext(ctx, `DELETE FROM uiap_sessions WHERE expires_at <= $1`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("sqlstore: sweep UIAP sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlstore: sweep UIAP sessions: %w", err)
	}
	return int(n), nil
}
