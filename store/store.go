// Package store opens, from one URL, every store agentry's layers need:
// the sessions of UAIP workflows (workflow.SessionStore), the checkpoints
// of agents (agent.CheckpointStore), the hash-chained governance journal
// (govern.Journal), the UAMP replay window (envelope.ReplayStore), the
// positions of audit exports (audit.Cursor) and the app-side sessions of
// UIAP (UIAPSessions).
//
//	st, err := store.Open(ctx, "sqlite://./agentry-data/agentry.db")
//	if err != nil { … }
//	defer st.Close()
//	engine := workflow.NewEngine(st.Sessions(), nil)
//	g, err := govern.New(ctx, &govern.Options{Journal: st.Journal()})
//
// The URL's scheme chooses the backend:
//
//	sqlite:///abs/path/agentry.db   SQLite file, the default;
//	sqlite://./rel/path/agentry.db  WAL, synchronous=FULL: what is
//	                                acknowledged survives a crash
//	postgres://user@host/db?…       PostgreSQL (also postgresql://): several
//	                                replicas of a server may share it
//	file:/path/dir                  a directory of plain files, for what has
//	                                a file format: checkpoints/ (one JSON
//	                                file a session),
//	                                journal.jsonl (one record a line), audit/
//	                                cursors; UAIP and UIAP sessions and the
//	                                UAMP replay window, which have none, in
//	                                agentry.db (SQLite) beside them
//	memory:                         in memory: nothing
//	                                survives the process
//
// Anything else is refused with an error that lists these schemes.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/internal/checkpoint"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/internal/sqlstore"
	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/workflow"
)

// defaultURL is the store of a server given none: SQLite under
// ./agentry-data.
const defaultURL = "sqlite://./agentry-data/agentry.db"

// errUnknownScheme is the error of Open for a URL whose scheme names no
// backend.
var errUnknownScheme = errors.New("store: unknown URL scheme")

// Store is every store of one deployment, opened from one URL. It is safe
// for concurrent use.
type Store struct {
	url         string // with any password hidden
	shared      bool
	sessions    workflow.SessionStore
	checkpoints agent.CheckpointStore
	journal     govern.Journal
	replay      envelope.ReplayStore
	uiap        uiapsession.Store
	cursor      func(name string) audit.Cursor
	close       func() error
}

// Open opens (creating and migrating it if needed) the store named by
// rawURL; "" is sqlite://./agentry-data/agentry.db. See the package documentation for the
// schemes.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	if rawURL == "" {
		rawURL = defaultURL
	}
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok {
		return nil, fmt.Errorf("%w: %q has none (want sqlite://PATH, postgres://…, file:DIR or memory:)", errUnknownScheme, redact(rawURL))
	}
	scheme = strings.ToLower(scheme)
	rawURL = scheme + rawURL[len(scheme):]
	switch scheme {
	case "memory":
		if rawURL != "memory:" {
			return nil, fmt.Errorf("store: %q: the memory store takes no path or parameters (memory:)", rawURL)
		}
		m := memstore.New()
		return &Store{url: "memory:", sessions: m.Sessions(), checkpoints: m.Checkpoints(), journal: m.Journal(),
			replay: envelope.NewMemoryReplayStore(0), uiap: m.UIAPSessions(), cursor: memoryCursors(), close: func() error { return nil }}, nil
	case "file":
		dir := strings.TrimPrefix(rawURL[len(scheme)+1:], "//")
		if dir == "" {
			return nil, fmt.Errorf("store: %q names no directory (file:/path/dir)", rawURL)
		}
		return openFiles(ctx, dir, rawURL)
	case "sqlite":
		return openSQL(ctx, rawURL, rawURL, false)
	case "postgres", "postgresql":
		return openSQL(ctx, rawURL, redact(rawURL), true)
	}
	return nil, fmt.Errorf("%w %q in %q (want sqlite://PATH, postgres://…, file:DIR or memory:)", errUnknownScheme, scheme, redact(rawURL))
}

func openSQL(ctx context.Context, dsn, shown string, shared bool) (*Store, error) {
	st, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return &Store{url: shown, shared: shared, sessions: st.Sessions(), checkpoints: st.Checkpoints(), journal: st.Journal(),
		replay: st.ReplayStore(), uiap: st.UIAPSessions(), cursor: func(name string) audit.Cursor { return st.AuditCursor(name) }, close: st.Close}, nil
}

// openFiles opens the directory store of file:dir.
func openFiles(ctx context.Context, dir, shown string) (*Store, error) {
	ck, err := checkpoint.File(filepath.Join(dir, "checkpoints"))
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	j, err := journal.Open(filepath.Join(dir, "journal.jsonl"), &journal.Options{})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db, err := sqlstore.Open(ctx, "sqlite:"+filepath.Join(dir, "agentry.db"))
	if err != nil {
		j.Close()
		return nil, err
	}
	return &Store{url: shown, sessions: db.Sessions(), checkpoints: ck, journal: j, replay: db.ReplayStore(), uiap: db.UIAPSessions(),
		cursor: func(name string) audit.Cursor {
			return audit.FileCursor(filepath.Join(dir, "audit", url.PathEscape(name)+".cursor"))
		},
		close: func() error { return errors.Join(j.Close(), db.Close()) }}, nil
}

// Sessions returns the UAIP session store.
func (s *Store) Sessions() workflow.SessionStore { return s.sessions }

// Checkpoints returns the agent checkpoint store (also where a run
// service keeps its runs' final states).
func (s *Store) Checkpoints() agent.CheckpointStore { return s.checkpoints }

// Journal returns the governance journal.
func (s *Store) Journal() govern.Journal { return s.journal }

// Replay returns the store of the UAMP replay window. On a database
// (sqlite:, postgres:) the value also keeps UAMP streams, which a server
// on a shared store (Shared) uses to let a stream resume on any replica.
func (s *Store) Replay() envelope.ReplayStore { return s.replay }

// UIAPSessions returns the store of app-side UIAP sessions (UIAP Core
// 0.1 at uiap.dev, §8.2), for uicontrol.AppOptions.Sessions: with it, a
// session started by one replica of a server is resumed by another
// sharing the store.
func (s *Store) UIAPSessions() uiapsession.Store { return s.uiap }

// AuditCursor returns the persisted position of the audit export named
// name (for the memory store, a position kept as long as the Store).
func (s *Store) AuditCursor(name string) audit.Cursor { return s.cursor(name) }

// Shared reports whether other processes may use the same store at the
// same time (PostgreSQL: replicas of a server). A process must then not
// cache what the store holds: another may have changed it.
func (s *Store) Shared() bool { return s.shared }

// String returns the store's URL, any password hidden, for logs.
func (s *Store) String() string { return s.url }

// Close closes the store.
func (s *Store) Close() error { return s.close() }

// redact hides the password of a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// memoryCursors returns the audit cursors of a memory store: positions
// kept in memory by name.
func memoryCursors() func(string) audit.Cursor {
	var mu sync.Mutex
	m := map[string]*memoryCursor{}
	return func(name string) audit.Cursor {
		mu.Lock()
		defer mu.Unlock()
		c, ok := m[name]
		if !ok {
			c = &memoryCursor{}
			m[name] = c
		}
		return c
	}
}

type memoryCursor struct {
	mu  sync.Mutex
	seq uint64
}

func (c *memoryCursor) Load(context.Context) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq, nil
}

func (c *memoryCursor) Store(_ context.Context, seq uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = seq
	return nil
}
