package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/store"
)

// One URL gives every store; the scheme decides the backend, and what an
// SQLite store holds survives reopening it.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, url string
		durable   bool
		shared    bool
		shown     string
	}{
		{"memory", "memory:", false, false, "memory:"},
		{"sqlite absolute", "sqlite://" + filepath.Join(dir, "a", "agentry.db"), true, false, "sqlite://" + filepath.Join(dir, "a", "agentry.db")},
		{"sqlite upper-case scheme", "SQLite://" + filepath.Join(dir, "b.db"), true, false, "sqlite://" + filepath.Join(dir, "b.db")},
		{"files", "file:" + filepath.Join(dir, "files"), true, false, "file:" + filepath.Join(dir, "files")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if st.Sessions() == nil || st.Checkpoints() == nil || st.Journal() == nil || st.Replay() == nil || st.AuditCursor("x") == nil ||
				st.UIAPSessions() == nil {
				t.Fatal("a store view is nil")
			}
			if st.Shared() != tc.shared || st.String() != tc.shown {
				t.Errorf("Shared %v, String %q; want %v, %q", st.Shared(), st.String(), tc.shared, tc.shown)
			}
			if err := st.Checkpoints().Save(ctx, "s-1", agent.Initial()); err != nil {
				t.Fatal(err)
			}
			if err := st.AuditCursor("x").Store(ctx, 7); err != nil {
				t.Fatal(err)
			}
			uiap := &uiapsession.Session{ID: "u-1", State: []byte(`{}`), ExpiresAt: time.Now().Add(time.Hour)}
			if err := st.UIAPSessions().Create(ctx, uiap); err != nil {
				t.Fatal(err)
			}
			if seq, err := st.AuditCursor("x").Load(ctx); err != nil || seq != 7 {
				t.Errorf("audit cursor: %d, %v", seq, err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := store.Open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			_, err = again.Checkpoints().Load(ctx, "s-1")
			if tc.durable && err != nil {
				t.Errorf("reopened: %v", err)
			}
			if !tc.durable && !errors.Is(err, agent.ErrNoCheckpoint) {
				t.Errorf("a new memory store holds a checkpoint: %v", err)
			}
			_, err = again.UIAPSessions().Get(ctx, "u-1", time.Now())
			if tc.durable && err != nil {
				t.Errorf("UIAP session reopened: %v", err)
			}
			if !tc.durable && !errors.Is(err, uiapsession.ErrNotFound) {
				t.Errorf("a new memory store holds a UIAP session: %v", err)
			}
		})
	}
}

func TestOpenPostgres(t *testing.T) {
	url := os.Getenv("AGENTRY_TEST_POSTGRES")
	if url == "" {
		t.Skip("AGENTRY_TEST_POSTGRES is not set")
	}
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Shared() {
		t.Error("a PostgreSQL store is shared by replicas")
	}
}

// A URL that names no backend is refused with the schemes there are, and
// a password is never repeated.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"mysql://root:hunter2@db/agentry", "unknown URL scheme \"mysql\""},
		{"./agentry.db", "has none"},
		{"memory:x", "takes no path"},
		{"file:", "names no directory"},
	} {
		_, err := store.Open(context.Background(), tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error saying %q", tc.url, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) repeats the password: %v", tc.url, err)
		}
		if strings.Contains(tc.want, "scheme") && !strings.Contains(err.Error(), "unknown URL scheme") {
			t.Errorf("Open(%q): %v does not say the scheme is unknown", tc.url, err)
		}
	}
}

// file:DIR keeps checkpoints and the journal as plain files, the rest in
// SQLite beside them.
func TestOpenFilesLayout(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, "file:"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Checkpoints().Save(ctx, "s-1", agent.Initial()); err != nil {
		t.Fatal(err)
	}
	if err := st.AuditCursor("jsonl:/var/log/audit.jsonl").Store(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"checkpoints", "journal.jsonl", "agentry.db", "audit"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("file:DIR: %v", err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "checkpoints"))
	if len(entries) == 0 {
		t.Error("no checkpoint file")
	}
}
