package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/checkpointtest"
	"github.com/agentry-dev/agentry/internal/checkpoint"
	"github.com/agentry-dev/agentry/internal/ids"
)

func openT(t *testing.T, rawURL string) *Store {
	t.Helper()
	s, err := Open(t.Context(), rawURL)
	if err != nil {
		t.Fatalf("Open(%s): %v", redact(rawURL), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sqliteURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "agentry.db")
}

func TestUAP_12_2_SQLite(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) agent.CheckpointStore { return openT(t, sqliteURL(t)).Checkpoints() })
}

func TestUAP_12_2_SQLiteMemory(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) agent.CheckpointStore { return openT(t, "memory:").Checkpoints() })
}

// postgresURL returns a URL of a fresh schema in the AGENTRY_TEST_POSTGRES
// database, dropped at cleanup; it skips the test when the variable is
// unset.
func postgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("AGENTRY_TEST_POSTGRES")
	if base == "" {
		t.Skip("AGENTRY_TEST_POSTGRES is not set")
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := "agentry_test_" + strings.ReplaceAll(ids.New(), "-", "")
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestUAP_12_2_PostgreSQL(t *testing.T) {
	postgresURL(t) // skip early when unset
	checkpointtest.Run(t, func(t *testing.T) agent.CheckpointStore { return openT(t, postgresURL(t)).Checkpoints() })
}

// stores returns the backends every schema test runs on.
func stores(t *testing.T) map[string]func(t *testing.T) string {
	m := map[string]func(t *testing.T) string{"sqlite": sqliteURL}
	if os.Getenv("AGENTRY_TEST_POSTGRES") != "" {
		m["postgres"] = func(t *testing.T) string { return postgresURL(t) }
	}
	return m
}

func TestMigrationsIdempotent(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			s := openT(t, u)
			if err := s.Checkpoints().Save(t.Context(), "kept", checkpointtest.SampleState()); err != nil {
				t.Fatal(err)
			}
			// Open again (as a restart or a second replica would) and
			// migrate again on an open store.
			s2 := openT(t, u)
			if err := s2.migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			var n, max int
			if err := s2.db.QueryRowContext(t.Context(), `SELECT COUNT(*), MAX(version) FROM agentry_schema_migrations`).Scan(&n, &max); err != nil {
				t.Fatal(err)
			}
			if n != len(migrations) || max != len(migrations) {
				t.Errorf("%d migrations recorded, max version %d; want %d", n, max, len(migrations))
			}
			if _, err := s2.Checkpoints().Load(t.Context(), "kept"); err != nil {
				t.Errorf("checkpoint lost across reopen: %v", err)
			}
		})
	}
}

func TestMigrationsConcurrentOpen(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			errs := make(chan error, 4)
			for range 4 {
				go func() {
					s, err := Open(t.Context(), u)
					if err == nil {
						err = s.Close()
					}
					errs <- err
				}()
			}
			for range 4 {
				if err := <-errs; err != nil {
					t.Errorf("concurrent Open: %v", err)
				}
			}
		})
	}
}

func TestMigrationVersions(t *testing.T) {
	for i, m := range migrations {
		if m.version != i+1 || m.name == "" || len(m.stmts) == 0 {
			t.Errorf("migration %d: version %d, name %q, %d statements", i, m.version, m.name, len(m.stmts))
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	u := sqliteURL(t)
	s := openT(t, u)
	if _, err := s.db.ExecContext(t.Context(), `INSERT INTO agentry_schema_migrations (version, name, applied_at) VALUES ($1, 'future', 0)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(t.Context(), u); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer schema = %v, want an error", err)
		if s2 != nil {
			s2.Close()
		}
	}
}

// TestSQLitePragmas checks what makes an acknowledged save durable.
func TestSQLitePragmas(t *testing.T) {
	s := openT(t, sqliteURL(t))
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": fmt.Sprint(busyTimeoutMS), "foreign_keys": "1"} {
		var got string
		if err := s.db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestOpenCreatesParentDirs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "agentry.db")
	st := openT(t, "sqlite://"+path)
	if err := st.Checkpoints().Save(t.Context(), "s", checkpointtest.SampleState()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, fi.Mode())
		}
	}
	// The relative form of the default URL.
	t.Chdir(t.TempDir())
	s := openT(t, "")
	if s.Driver() != "sqlite" {
		t.Errorf("default driver %s", s.Driver())
	}
	if _, err := os.Stat(filepath.Join("agentry-data", "agentry.db")); err != nil {
		t.Error(err)
	}
}

func TestParseURL(t *testing.T) {
	dir := t.TempDir()
	for raw, want := range map[string]string{
		"sqlite://" + dir + "/x.db": "sqlite " + dir + "/x.db?",
		"sqlite:" + dir + "/y.db":   "sqlite " + dir + "/y.db?",
		"memory:":                   "sqlite :memory:?",
		"postgres://u:p@h/db":       "pgx postgres://u:p@h/db",
		"postgresql://h/db?x=1":     "pgx postgresql://h/db?x=1",
	} {
		driver, dsn, _, _, err := parseURL(raw)
		if err != nil || !strings.HasPrefix(driver+" "+dsn, want) {
			t.Errorf("parseURL(%q) = %s %s, %v; want prefix %s", raw, driver, dsn, err, want)
		}
	}
	for _, raw := range []string{"mysql://h/db", "sqlite://", "sqlite:///x.db?mode=ro", "file.db", "redis://h"} {
		if _, _, _, _, err := parseURL(raw); err == nil {
			t.Errorf("parseURL(%q): no error", raw)
		}
	}
	if _, err := Open(t.Context(), "postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=1"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable PostgreSQL = %v: want an error without the password", err)
	}
}

// TestCorruptRow: a state that does not decode is ErrCorrupt, not a nil
// state or ErrNoCheckpoint.
func TestCorruptRow(t *testing.T) {
	s := openT(t, sqliteURL(t))
	cs := s.Checkpoints()
	if err := cs.Save(t.Context(), "x", checkpointtest.SampleState()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), `UPDATE agent_checkpoints SET state = '{"version":"1.1.0"' WHERE session_id = 'x'`); err != nil {
		t.Fatal(err)
	}
	if st, err := cs.Load(t.Context(), "x"); !errors.Is(err, checkpoint.ErrCorrupt) || st != nil {
		t.Errorf("Load of a corrupt row = %v, %v; want ErrCorrupt", st, err)
	}
	if _, err := cs.LoadMetadata(t.Context(), "x"); err != nil {
		t.Errorf("LoadMetadata: %v", err)
	}
}

// TestSharedDatabase: two Stores on one database (two processes, two
// replicas) see each other's checkpoints.
func TestSharedDatabase(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			a, b := openT(t, u).Checkpoints(), openT(t, u).Checkpoints()
			st := checkpointtest.SampleState()
			if err := a.Save(t.Context(), "shared", st); err != nil {
				t.Fatal(err)
			}
			got, err := b.Load(t.Context(), "shared")
			if err != nil || got.ID() != st.ID() {
				t.Fatalf("other store: Load = %v, %v", got, err)
			}
			if err := b.Delete(t.Context(), "shared"); err != nil {
				t.Fatal(err)
			}
			if _, err := a.LoadMetadata(t.Context(), "shared"); !errors.Is(err, agent.ErrNoCheckpoint) {
				t.Errorf("after the other store's Delete: %v", err)
			}
		})
	}
}
