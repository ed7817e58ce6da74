package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// A migration takes the schema from version-1 to version. Migrations are
// append-only: a released one is never edited, a change is a new one. The
// statements are the same for SQLite and PostgreSQL (portable types:
// TEXT, BIGINT; times are Unix milliseconds, NULL for none; JSON is TEXT).
type migration struct {
	version int
	name    string
	stmts   []string
}

var migrations = []migration{
	{1, "agent checkpoints (UAP-1.1 §12.2)", []string{`
CREATE TABLE agent_checkpoints (
	session_id    TEXT PRIMARY KEY,
	checkpoint_id TEXT NOT NULL,
	agent_id      TEXT NOT NULL,
	step          BIGINT NOT NULL,
	created_at    BIGINT NOT NULL,
	state         TEXT NOT NULL
)`}},
	{2, "workflow sessions (UAIP-0.1)", []string{`
CREATE TABLE workflow_sessions (
	session_id TEXT PRIMARY KEY,
	workflow   TEXT NOT NULL,
	stage      TEXT NOT NULL,
	state      TEXT NOT NULL,
	version    BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	expires_at BIGINT
)`, `CREATE INDEX workflow_sessions_expires_at ON workflow_sessions (expires_at)`}},
	{3, "governance journal (UAICP-0.3 §5.4) and audit export cursors", []string{`
CREATE TABLE governance_journal (
	seq        BIGINT PRIMARY KEY,
	request_id TEXT NOT NULL,
	unique_key TEXT UNIQUE,
	record     TEXT NOT NULL
)`, `CREATE INDEX governance_journal_request_id ON governance_journal (request_id, seq)`, `
CREATE TABLE governance_journal_head (
	id   BIGINT PRIMARY KEY,
	seq  BIGINT NOT NULL,
	hash TEXT NOT NULL
)`, `INSERT INTO governance_journal_head (id, seq, hash) VALUES (1, 0, '')`, `
CREATE TABLE governance_audit_cursors (
	name TEXT PRIMARY KEY,
	seq  BIGINT NOT NULL
)`}},
	{4, "UAMP replay window (UAMP-1.0 §6)", []string{`
CREATE TABLE uamp_replay (
	sender     TEXT NOT NULL,
	id         TEXT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (sender, id)
)`, `CREATE INDEX uamp_replay_expires_at ON uamp_replay (expires_at)`}},
	{5, "run leases (UAICP-0.3 §4.2: one executor per run)", []string{`
CREATE TABLE governance_leases (
	lease_key  TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	epoch      BIGINT NOT NULL,
	state      TEXT NOT NULL,
	expires_at BIGINT
)`, `CREATE INDEX governance_leases_expiry ON governance_leases (state, expires_at)`}},
	{6, "UIAP sessions and their events (UIAP Core 0.1 §8.2)", []string{`
CREATE TABLE uiap_sessions (
	session_id TEXT PRIMARY KEY,
	version    BIGINT NOT NULL,
	token_hash TEXT,
	seq        BIGINT NOT NULL,
	state      TEXT NOT NULL,
	app        TEXT NOT NULL,
	expires_at BIGINT NOT NULL
)`, `CREATE INDEX uiap_sessions_expires_at ON uiap_sessions (expires_at)`, `
CREATE TABLE uiap_session_events (
	session_id TEXT NOT NULL REFERENCES uiap_sessions (session_id) ON DELETE CASCADE,
	seq        BIGINT NOT NULL,
	event      TEXT NOT NULL,
	PRIMARY KEY (session_id, seq)
)`}},
	{7, "UAMP streams kept for resume on any replica (UAMP-1.0 §5)", []string{`
CREATE TABLE uamp_streams (
	owner       TEXT NOT NULL,
	stream_id   TEXT NOT NULL,
	seq         BIGINT NOT NULL,
	delta       TEXT,
	request_id  TEXT,
	next_seq    BIGINT,
	final       BIGINT,
	acked       BIGINT,
	cancelled   BIGINT,
	lease_until BIGINT,
	expires_at  BIGINT,
	PRIMARY KEY (owner, stream_id, seq)
)`, `CREATE UNIQUE INDEX uamp_streams_request ON uamp_streams (owner, request_id)`,
		`CREATE INDEX uamp_streams_expires_at ON uamp_streams (expires_at)`}},
	// A record's kind beside it, so that a governor following the
	// journal reads only the kinds its index needs (sqlJournal.RecordsOf)
	// instead of decoding every replica's every record. Rows written
	// before have none (NULL) and are read as before.
	// And on a run's lease, the journal seq of the last approval decision
	// since its last claim: the paused runs owed a resume are found
	// without reading the journal (sqlJournal.Decided).
	{8, "governance journal: record kinds; leases: decisions owed a resume", []string{
		`ALTER TABLE governance_journal ADD COLUMN kind TEXT`,
		`ALTER TABLE governance_leases ADD COLUMN decided BIGINT`}},
}

// migrationLockKey is the PostgreSQL advisory lock serializing migrations
// of replicas starting together.
const migrationLockKey = 0x6167656e74727900 // "agentry\0"

// migrate applies, in one transaction, the migrations the database lacks.
// Running it again, or from several processes at once, is harmless.
func (s *Store) migrate(ctx context.Context) error {
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := s.db.BeginTx(ctx, nil) // SQLite: BEGIN IMMEDIATE (see _txlock)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	defer tx.Rollback()
	if s.dialect == postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLockKey)); err != nil {
			return fmt.Errorf("sqlstore: migrate: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `
CREATE TABLE IF NOT EXISTS agentry_schema_migrations (
	version    BIGINT PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at BIGINT NOT NULL
)`); err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM agentry_schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("sqlstore: the database schema is at version %d, newer than this binary's %d", current, len(migrations))
	}
	for _, m := range migrations[current:] {
		for _, stmt := range m.stmts {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("sqlstore: migration %d (%s): %w", m.version, m.name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO agentry_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("sqlstore: migration %d: %w", m.version, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	return nil
}
