package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/agentry-dev/agentry/internal/streamlog/streamlogtest"
)

// streamsOf returns the stream store of s: what ReplayStore returns.
func streamsOf(t *testing.T, s *Store) streamlog.Store {
	t.Helper()
	st, ok := s.ReplayStore().(streamlog.Store)
	if !ok {
		t.Fatalf("the replay store of %s is not a streamlog.Store", s.Driver())
	}
	return st
}

func TestUAMP_5_StreamLogSQLite(t *testing.T) {
	streamlogtest.Run(t, func(t *testing.T) streamlog.Store { return streamsOf(t, openT(t, sqliteURL(t))) })
}

func TestUAMP_5_StreamLogSQLiteMemory(t *testing.T) {
	streamlogtest.Run(t, func(t *testing.T) streamlog.Store { return streamsOf(t, openT(t, "memory:")) })
}

func TestUAMP_5_StreamLogPostgreSQL(t *testing.T) {
	postgresURL(t) // skip early when unset
	streamlogtest.Run(t, func(t *testing.T) streamlog.Store { return streamsOf(t, openT(t, postgresURL(t))) })
}

// TestUAMP_5_StreamLogReplicas: two Stores on one database stand for two
// replicas. A change written through one is read by the other at once
// and, on PostgreSQL, wakes the other's watchers (LISTEN/NOTIFY).
func TestUAMP_5_StreamLogReplicas(t *testing.T) {
	ctx := context.Background()
	live := streamlog.Terms{Lease: time.Hour, Linger: time.Hour}
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			a, b := streamsOf(t, openT(t, u)), streamsOf(t, openT(t, u))
			k := streamlog.Key{Owner: "did:web:client.example", ID: "s-1"}
			if err := a.Create(ctx, streamlog.Head{Key: k, RequestID: "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f"}, live); err != nil {
				t.Fatal(err)
			}
			if err := b.Create(ctx, streamlog.Head{Key: k, RequestID: "00000000-0000-4000-8000-000000000000"}, live); err == nil {
				t.Fatal("the second replica created a stream the first holds")
			}
			changed, stop := a.Watch(k)
			defer stop()
			// Once a listens, b's ACK reaches it.
			deadline := time.After(10 * time.Second)
			for seq := int64(0); ; seq++ {
				if _, err := a.Append(ctx, k, seq, [][]byte{[]byte(`{}`)}, false, 8, live); err != nil {
					t.Fatal(err)
				}
				drain(changed) // a's own append
				if err := b.Ack(ctx, k, seq); err != nil {
					t.Fatal(err)
				}
				if name == "sqlite" {
					break // SQLite has no notifications between processes: a polls
				}
				select {
				case <-changed:
				case <-time.After(100 * time.Millisecond):
					select {
					case <-deadline:
						t.Fatal("b's ACKs never woke a's watcher")
					default:
						continue // a's listener may not listen yet
					}
				}
				break
			}
			if h, err := a.Head(ctx, k); err != nil || h.Acked < 0 {
				t.Fatalf("a reads %+v, %v after b's ACK", h, err)
			}
			if name == "sqlite" {
				return
			}
			// Now that a listens, each of b's changes wakes it (not only
			// the wake-up of a's listener connecting).
			for seq := int64(100); seq < 103; seq++ {
				drain(changed)
				if err := b.Ack(ctx, k, seq); err != nil {
					t.Fatal(err)
				}
				select {
				case <-changed:
				case <-time.After(10 * time.Second):
					t.Fatalf("b's ACK %d did not wake a's watcher", seq)
				}
			}
		})
	}
}

func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// TestUAMP_5_StreamLogSweep: Sweep deletes the rows of expired streams,
// heads and deltas, and leaves the others.
func TestUAMP_5_StreamLogSweep(t *testing.T) {
	ctx := context.Background()
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := openT(t, newURL(t))
			st := streamsOf(t, s)
			for i, terms := range []streamlog.Terms{{Lease: time.Hour, Linger: time.Hour}, {Lease: 0, Linger: 0}} {
				k := streamlog.Key{Owner: "did:web:client.example", ID: []string{"kept", "expired"}[i]}
				if err := st.Create(ctx, streamlog.Head{Key: k, RequestID: k.ID}, streamlog.Terms{Lease: time.Hour, Linger: time.Hour}); err != nil {
					t.Fatal(err)
				}
				if _, err := st.Append(ctx, k, 0, [][]byte{[]byte(`{}`), []byte(`{}`)}, false, 8, terms); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			rows := map[string]int{}
			r, err := s.db.QueryContext(ctx, `SELECT stream_id, COUNT(*) FROM uamp_streams GROUP BY stream_id`)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for r.Next() {
				var id string
				var n int
				if err := r.Scan(&id, &n); err != nil {
					t.Fatal(err)
				}
				rows[id] = n
			}
			if len(rows) != 1 || rows["kept"] != 3 {
				t.Errorf("rows by stream after Sweep: %v, want kept: 3 (head and 2 deltas)", rows)
			}
		})
	}
}
