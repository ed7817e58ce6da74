// Package sqlstore is agentry's database store: one database/sql
// database, SQLite (modernc.org/sqlite, pure Go) by default or PostgreSQL
// (github.com/jackc/pgx/v5) for scale-out, holding every persistence
// interface: the agent.CheckpointStore of UAP-1.1 §12.2
// (github.com/ProviderProtocol/agents), Store.Checkpoints; the workflow.SessionStore of
// UAIP-0.1 (github.com/concierge-hq/uaip), Store.Sessions; and the hash-chained
// govern.Journal of UAICP-0.3 §5.4 (github.com/UAICP/uaicp), Store.Journal,
// with the cursors of its audit export, Store.AuditCursor; the UAMP
// replay window of UAMP-1.0 §6 (uamp.dev), Store.ReplayStore, whose value
// also keeps UAMP streams (§5) for replicas to resume (streamlog.Store);
// and the app-side UIAP sessions of UIAP Core 0.1 §8.2 (uiap.dev) that
// replicas share, Store.UIAPSessions.
//
//	st, err := sqlstore.Open(ctx, "sqlite:///var/lib/agentry/agentry.db")
//	defer st.Close()
//	a, err := agent.New(&agent.Options{LLMOptions: opts, Checkpoints: st.Checkpoints()})
//	engine := workflow.NewEngine(st.Sessions(), nil)
//	g, err := govern.New(ctx, &govern.Options{Journal: st.Journal(), Node: "replica-1"})
//
// A store is chosen by URL (see Open). Both databases get the same schema,
// created and upgraded by versioned migrations when the store is opened;
// every write is durable when it returns (SQLite: WAL with
// synchronous=FULL; PostgreSQL: its default synchronous commit). No state
// lives only in the process, so several processes on one PostgreSQL
// database behave as one.
//
// Each persistence interface is a method of Store returning a view of the
// one database (Checkpoints, Sessions, Journal; replay caches to come),
// its tables added by a new entry in the migration list. Session writes
// and journal appends from many goroutines are group-committed: one
// transaction, one fsync, for all the writes that arrive together (see
// Store.Sessions, Store.Journal). The journal keeps one hash chain across
// processes: each append locks its head row. Queries are written once,
// with $N placeholders, which both drivers accept.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// defaultURL is the store Open uses when given "": SQLite under
// ./agentry-data.
const defaultURL = "sqlite://./agentry-data/agentry.db"

// The connection pool of a Store: SQLite has one writer at a time and
// readers that are CPU-bound, so a few connections are enough; PostgreSQL
// readers and writers wait on the network and the server.
const (
	sqliteConns   = 8
	postgresConns = 16
)

// busyTimeoutMS is how long a SQLite connection waits for another
// writer's lock before failing with SQLITE_BUSY.
const busyTimeoutMS = 10000

// dialect is the database behind a Store.
type dialect int

const (
	sqlite dialect = iota
	postgres
)

func (d dialect) String() string {
	if d == postgres {
		return "postgres"
	}
	return "sqlite"
}

// Store is a database holding agentry's persistent state. Each
// persistence interface is a method returning a view of the same
// database (Checkpoints, …). A Store is safe for concurrent use.
type Store struct {
	db      *sql.DB
	dialect dialect
	// writer serializes this process's SQLite writes (a semaphore, so
	// that waiting honours the context): SQLite has one writer at a time,
	// and goroutines queueing here is far cheaper than connections polling
	// in SQLite's busy handler. Other processes are still waited for
	// through the busy timeout. Nil for PostgreSQL.
	writer chan struct{}
	// queries are the session statements, prepared by Open.
	queries *sessionQueries
	// commits group-commits session writes (see committer).
	commits *committer
	// hub wakes the watchers of UAMP streams (streams.go).
	hub *streamHub
}

// Open opens (creating it if needed) and migrates the store named by
// rawURL:
//
//	sqlite:///abs/path/agentry.db   SQLite file (parent directories are
//	sqlite://./rel/path/agentry.db  created); WAL, synchronous=FULL,
//	                                busy timeout 10 s
//	postgres://user:pass@host/db?…  PostgreSQL (also postgresql://), any
//	                                pgx connection string parameter
//	memory:                         SQLite in memory: private to this
//	                                Store, gone when it is closed
//	""                              sqlite://./agentry-data/agentry.db
//
// The schema is brought to the version this binary knows; a database
// migrated by a newer binary is refused.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	if rawURL == "" {
		rawURL = defaultURL
	}
	driver, dsn, path, d, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if err := createFile(path); err != nil {
			return nil, fmt.Errorf("sqlstore: %w", err)
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %w", err)
	}
	if rawURL == "memory:" {
		// Every connection to ":memory:" is a database of its own: keep
		// exactly one, for the Store's lifetime.
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
	}
	s := &Store{db: db, dialect: d}
	s.hub = newStreamHub(s)
	if rawURL != "memory:" {
		// A bounded pool, all of it kept: database/sql's default (any
		// number open, 2 kept idle) closes and reopens connections all the
		// time under concurrent load — for SQLite, each new one runs its
		// pragmas, parses the schema and prepares the statements again
		// with a cold page cache; for PostgreSQL it is a new server
		// process, and replicas must not exhaust max_connections (100 by
		// default).
		n := sqliteConns
		if d == postgres {
			n = postgresConns
		}
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
	}
	if d == sqlite {
		s.writer = make(chan struct{}, 1)
	}
	if err := ping(ctx, db, d); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: open %s: %w", redact(rawURL), err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if s.queries, err = prepareSessionQueries(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	s.commits = newCommitter(s)
	return s, nil
}

// ping opens a first connection. A new SQLite connection switches the
// file to WAL, which SQLite refuses at once (SQLITE_BUSY, without waiting
// the busy timeout) while another connection — of this process or
// another starting with it — does the same: that is retried for as long
// as the busy timeout.
func ping(ctx context.Context, db *sql.DB, d dialect) error {
	deadline := time.Now().Add(busyTimeoutMS * time.Millisecond)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || d != sqlite || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// parseURL maps a store URL to a database/sql driver and DSN, and for a
// SQLite file, its path.
func parseURL(raw string) (driver, dsn, path string, d dialect, err error) {
	switch {
	case raw == "memory:":
		return "sqlite", ":memory:?_pragma=foreign_keys(1)", "", sqlite, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		if _, err := url.Parse(raw); err != nil {
			return "", "", "", 0, fmt.Errorf("sqlstore: invalid PostgreSQL URL %s", redact(raw))
		}
		return "pgx", raw, "", postgres, nil
	case strings.HasPrefix(raw, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(raw, "sqlite:"), "//")
		if path == "" || strings.ContainsAny(path, "?#") {
			return "", "", "", 0, fmt.Errorf("sqlstore: invalid SQLite URL %q: want sqlite:///path/to/file.db", raw)
		}
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Set("_txlock", "immediate") // writers queue at BEGIN, never deadlock upgrading
		return "sqlite", path + "?" + q.Encode(), path, sqlite, nil
	}
	return "", "", "", 0, fmt.Errorf("sqlstore: unsupported store URL %s: want sqlite://, postgres:// or memory:", redact(raw))
}

// createFile creates a missing SQLite database file and its parent
// directories, readable by the owner only: states may hold sensitive data
// (UAP-1.1 §15.3). SQLite gives its -wal and -shm files the same mode.
func createFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// redact hides a URL's password in messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if err != nil && strings.Contains(raw, "@") {
			return "(unparsable URL)"
		}
		return raw
	}
	return u.Redacted()
}

// Close closes the database, once the session writes being committed
// are; writes still queued fail with ErrClosed.
func (s *Store) Close() error {
	s.hub.close()
	s.commits.close()
	s.queries.close()
	return s.db.Close()
}

// Driver returns "sqlite" or "postgres".
func (s *Store) Driver() string { return s.dialect.String() }

// lockWrites serializes a write when the database is SQLite; call unlock
// when done.
func (s *Store) lockWrites(ctx context.Context) (unlock func(), err error) {
	if s.writer == nil {
		return func() {}, nil
	}
	select {
	case s.writer <- struct{}{}:
		return func() { <-s.writer }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// isNoRows reports whether err is sql.ErrNoRows.
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
