package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/sessiontest"
)

func TestUAIP_Session_SQLite(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) workflow.SessionStore { return openT(t, sqliteURL(t)).Sessions() })
}

func TestUAIP_Session_SQLiteMemory(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) workflow.SessionStore { return openT(t, "memory:").Sessions() })
}

func TestUAIP_Session_PostgreSQL(t *testing.T) {
	postgresURL(t) // skip early when unset
	sessiontest.Run(t, func(t *testing.T) workflow.SessionStore { return openT(t, postgresURL(t)).Sessions() })
}

func newTestSession(id string) *workflow.Session {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return &workflow.Session{ID: id, Workflow: "shop", Stage: "browse", State: map[string]any{"n": 0.0},
		Version: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
}

// nextVersion returns s as its next Update writes it.
func nextVersion(s *workflow.Session, set map[string]any) *workflow.Session {
	n := s.Clone()
	n.Version++
	for k, v := range set {
		n.State[k] = v
	}
	return n
}

// TestSessionsSharedDatabase: two Stores on one database — two processes,
// two replicas — are one session store: what one writes the other reads
// and updates, and compare-and-swap holds across them.
func TestSessionsSharedDatabase(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			a, b := openT(t, u).Sessions(), openT(t, u).Sessions()
			ctx := t.Context()

			s := newTestSession(ids.New())
			if err := a.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			got, err := b.Get(ctx, s.ID)
			if err != nil || got.Version != 1 || got.State["n"] != 0.0 {
				t.Fatalf("other store: Get = %+v, %v", got, err)
			}
			if err := b.Create(ctx, s); !errors.Is(err, workflow.ErrConflict) {
				t.Errorf("other store: Create of the same ID = %v, want ErrConflict", err)
			}
			v2 := nextVersion(got, map[string]any{"n": 1.0})
			if err := b.Update(ctx, v2); err != nil {
				t.Fatalf("other store: Update: %v", err)
			}
			if got, err := a.Get(ctx, s.ID); err != nil || got.Version != 2 || got.State["n"] != 1.0 {
				t.Fatalf("first store after the other's Update: Get = %+v, %v", got, err)
			}
			if err := a.Update(ctx, nextVersion(s, map[string]any{"n": -1.0})); !errors.Is(err, workflow.ErrConflict) {
				t.Errorf("first store: Update from the version the other replaced = %v, want ErrConflict", err)
			}

			// Racing Updates from one version through both stores: exactly
			// one wins, round after round.
			cur := v2
			for round := range 10 {
				const racers = 8
				var wg sync.WaitGroup
				start := make(chan struct{})
				errs := make([]error, racers)
				for r := range racers {
					st := a
					if r%2 == 1 {
						st = b
					}
					n := nextVersion(cur, map[string]any{"winner": float64(r)})
					wg.Go(func() {
						<-start
						errs[r] = st.Update(ctx, n)
					})
				}
				close(start)
				wg.Wait()
				wins := 0
				for r, err := range errs {
					if err == nil {
						wins++
					} else if !errors.Is(err, workflow.ErrConflict) {
						t.Errorf("round %d, racer %d: %v", round, r, err)
					}
				}
				if wins != 1 {
					t.Fatalf("round %d: %d Updates from version %d won, want exactly 1", round, wins, cur.Version)
				}
				if cur, err = b.Get(ctx, s.ID); err != nil {
					t.Fatal(err)
				}
				if w, ok := cur.State["winner"].(float64); !ok || errs[int(w)] != nil {
					t.Fatalf("round %d: stored winner %v is not the racer that won", round, cur.State["winner"])
				}
			}

			// Read-modify-write counters from both stores, retrying on
			// conflict: no increment is lost.
			const sessions, workers, increments = 4, 8, 15
			sids := make([]string, sessions)
			for i := range sids {
				sids[i] = ids.New()
				if err := a.Create(ctx, newTestSession(sids[i])); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for w := range workers {
				st := a
				if w%2 == 1 {
					st = b
				}
				wg.Go(func() {
					for i := range increments {
						id := sids[(w+i)%sessions]
						for {
							cur, err := st.Get(ctx, id)
							if err != nil {
								t.Error(err)
								return
							}
							err = st.Update(ctx, nextVersion(cur, map[string]any{"n": cur.State["n"].(float64) + 1}))
							if err == nil {
								break
							}
							if !errors.Is(err, workflow.ErrConflict) {
								t.Error(err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			total := 0.0
			for _, id := range sids {
				got, err := a.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if n := got.State["n"].(float64); n != float64(got.Version-1) {
					t.Errorf("session %s: counter %v at version %d: an increment was lost", id, n, got.Version)
				}
				total += got.State["n"].(float64)
			}
			if total != workers*increments {
				t.Errorf("counters sum to %v, want %d", total, workers*increments)
			}
		})
	}
}

// holdCommitter makes st's committer wait before its next transaction
// (at the writer lock, which a test gives PostgreSQL stores too) and
// returns the function letting it go.
func holdCommitter(t *testing.T, st *Store) (release func()) {
	t.Helper()
	if st.writer == nil {
		st.writer = make(chan struct{}, 1) // no write in flight: the committer reads it only in a batch
	}
	st.writer <- struct{}{}
	// A write that the committer takes alone, then blocks on: later writes
	// queue up behind it, into the next batch.
	batches := st.commits.batches.Load()
	done := make(chan error, 1)
	go func() { done <- st.Sessions().Delete(context.Background(), "hold-"+ids.New()) }()
	waitFor(t, func() bool { return st.commits.batches.Load() > batches })
	var once sync.Once
	release = func() {
		once.Do(func() {
			<-st.writer
			if err := <-done; err != nil {
				t.Errorf("holding write: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSessionsBatchOutcomes: writes committed in one transaction each get
// their own outcome — a failing compare-and-swap, a duplicate Create, a
// missing session or even a failing statement does not undo the others.
func TestSessionsBatchOutcomes(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := openT(t, newURL(t))
			ss, ctx := st.Sessions(), t.Context()
			// A trigger failing the statement of any Update to stage
			// "explode".
			trigger := []string{`CREATE TRIGGER explode BEFORE UPDATE ON workflow_sessions WHEN NEW.stage = 'explode'
BEGIN SELECT RAISE(ABORT, 'boom'); END`}
			if st.dialect == postgres {
				trigger = []string{`CREATE FUNCTION explode() RETURNS trigger AS $$
BEGIN IF NEW.stage = 'explode' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
					`CREATE TRIGGER explode BEFORE UPDATE ON workflow_sessions FOR EACH ROW EXECUTE FUNCTION explode()`}
			}
			for _, stmt := range trigger {
				if _, err := st.db.ExecContext(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			base := make([]*workflow.Session, 6)
			for i := range base {
				base[i] = newTestSession(fmt.Sprintf("batch-%d", i))
				if err := ss.Create(ctx, base[i]); err != nil {
					t.Fatal(err)
				}
			}
			explode := nextVersion(base[3], nil)
			explode.Stage = "explode"
			stale := nextVersion(base[1], nil)
			stale.Version = 5
			writes := []struct {
				name string
				do   func() error
				want error // nil, a sentinel, or errAny
			}{
				{"update", func() error { return ss.Update(ctx, nextVersion(base[0], map[string]any{"n": 1.0})) }, nil},
				{"stale update", func() error { return ss.Update(ctx, stale) }, workflow.ErrConflict},
				{"update of a missing session", func() error { return ss.Update(ctx, nextVersion(newTestSession("batch-missing"), nil)) }, workflow.ErrSessionNotFound},
				{"failing statement", func() error { return ss.Update(ctx, explode) }, errAny},
				{"duplicate create", func() error { return ss.Create(ctx, newTestSession("batch-2")) }, workflow.ErrConflict},
				{"create", func() error { return ss.Create(ctx, newTestSession("batch-new")) }, nil},
				{"delete", func() error { return ss.Delete(ctx, "batch-4") }, nil},
				{"update after another in the batch", func() error { return ss.Update(ctx, nextVersion(base[5], map[string]any{"n": 1.0})) }, nil},
				{"racing update from the same version", func() error { return ss.Update(ctx, nextVersion(base[5], map[string]any{"n": 2.0})) }, workflow.ErrConflict},
			}
			release := holdCommitter(t, st)
			batches := st.commits.batches.Load()
			errs := make([]error, len(writes))
			var wg sync.WaitGroup
			for i, w := range writes {
				wg.Go(func() { errs[i] = w.do() })
				waitFor(t, func() bool { return len(st.commits.queue) == i+1 }) // in this order
			}
			release()
			wg.Wait()
			if n := st.commits.batches.Load() - batches; n != 1 {
				t.Errorf("the %d writes came in %d batches, want 1", len(writes), n)
			}
			for i, w := range writes {
				switch {
				case w.want == errAny && errs[i] == nil:
					t.Errorf("%s: no error", w.name)
				case w.want == errAny && (errors.Is(errs[i], workflow.ErrConflict) || errors.Is(errs[i], workflow.ErrSessionNotFound)):
					t.Errorf("%s: %v, want the statement's error", w.name, errs[i])
				case w.want != errAny && !errors.Is(errs[i], w.want):
					t.Errorf("%s: %v, want %v", w.name, errs[i], w.want)
				}
			}
			check := func(id string, version int64, n float64) {
				t.Helper()
				got, err := ss.Get(ctx, id)
				if err != nil || got.Version != version || got.State["n"] != n {
					t.Errorf("Get(%s) = %+v, %v; want version %d, n %v", id, got, err, version, n)
				}
			}
			check("batch-0", 2, 1)
			check("batch-1", 1, 0)
			check("batch-2", 1, 0)
			check("batch-3", 1, 0)
			check("batch-5", 2, 1) // queue order within one session
			check("batch-new", 1, 0)
			if _, err := ss.Get(ctx, "batch-4"); !errors.Is(err, workflow.ErrSessionNotFound) {
				t.Errorf("deleted in the batch: Get = %v", err)
			}
		})
	}
}

var errAny = errors.New("any error")

// TestSessionsCancelledWhileQueued: a writer whose context ends while its
// write waits in the queue gets the context's error, and the write is
// dropped, not applied later.
func TestSessionsCancelledWhileQueued(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := openT(t, newURL(t))
			ss := st.Sessions()
			s := newTestSession(ids.New())
			if err := ss.Create(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			release := holdCommitter(t, st)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- ss.Update(ctx, nextVersion(s, map[string]any{"n": 1.0})) }()
			waitFor(t, func() bool { return len(st.commits.queue) == 1 })
			cancel()
			select {
			case err := <-errc:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Update cancelled while queued = %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second): // a safety net, far beyond the work
				t.Fatal("Update did not return when its context was cancelled")
			}
			release()
			if got, err := ss.Get(t.Context(), s.ID); err != nil || got.Version != 1 {
				t.Fatalf("after a dropped Update: Get = %+v, %v; want version 1", got, err)
			}
			if err := ss.Update(t.Context(), nextVersion(s, map[string]any{"n": 2.0})); err != nil {
				t.Errorf("Update from version 1 after the dropped one: %v", err)
			}
		})
	}
}

// TestSessionsClose: Close lets the batch in flight commit and fails the
// writes still queued with ErrClosed; no writer hangs; every acknowledged
// write is in the reopened database.
func TestSessionsClose(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			st, err := Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			ss := st.Sessions()
			const writers = 16
			acked := make([]int64, writers)
			sess := make([]*workflow.Session, writers)
			for i := range sess {
				sess[i] = newTestSession(ids.New())
				if err := ss.Create(t.Context(), sess[i]); err != nil {
					t.Fatal(err)
				}
				acked[i] = 1
			}
			var wg sync.WaitGroup
			var closedSeen atomic.Int64
			for i := range writers {
				wg.Go(func() {
					cur := sess[i]
					for {
						n := nextVersion(cur, nil)
						err := ss.Update(context.Background(), n)
						if err != nil {
							if errors.Is(err, errClosed) {
								closedSeen.Add(1)
							}
							return
						}
						acked[i], cur = n.Version, n
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("writers still blocked 10 s after Close")
			}
			if closedSeen.Load() == 0 {
				t.Error("no writer saw ErrClosed")
			}
			for _, err := range []error{ss.Update(t.Context(), nextVersion(sess[0], nil)), ss.Create(t.Context(), newTestSession("late")), ss.Delete(t.Context(), sess[0].ID)} {
				if !errors.Is(err, errClosed) {
					t.Errorf("write after Close = %v, want ErrClosed", err)
				}
			}
			if err := st.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			re := openT(t, u).Sessions()
			for i, s := range sess {
				got, err := re.Get(t.Context(), s.ID)
				if err != nil || got.Version < acked[i] {
					t.Errorf("session %d after reopening: %+v, %v; want version ≥ %d (acknowledged)", i, got, err, acked[i])
				}
			}
		})
	}
}

// TestSessionsFailedTransaction: when the committer cannot even begin a
// transaction, every write of the batch fails; none waits forever.
func TestSessionsFailedTransaction(t *testing.T) {
	st := openT(t, sqliteURL(t))
	s := newTestSession(ids.New())
	if err := st.Sessions().Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	st.db.Close() // under the committer's feet
	errc := make(chan error, 4)
	for range cap(errc) {
		go func() { errc <- st.Sessions().Update(t.Context(), nextVersion(s, nil)) }()
	}
	for range cap(errc) {
		select {
		case err := <-errc:
			if err == nil || errors.Is(err, workflow.ErrConflict) || errors.Is(err, errClosed) {
				t.Errorf("Update on a closed database = %v, want the database's error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Update still waiting 10 s after its transaction failed")
		}
	}
}

// TestSessionsTransactionTimeout: a transaction that cannot proceed (here
// the writer lock is held elsewhere) fails its writes after txTimeout with
// an error that is not the writers' own deadline, and stores nothing.
func TestSessionsTransactionTimeout(t *testing.T) {
	st := openT(t, sqliteURL(t))
	ss := st.Sessions()
	s := newTestSession(ids.New())
	if err := ss.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	// The committer reads txTimeout in a transaction, and the writes
	// submitted and acknowledged order these changes with its reads.
	saved := txTimeout
	txTimeout = 200 * time.Millisecond
	st.writer <- struct{}{}
	start := time.Now()
	err := ss.Update(context.Background(), nextVersion(s, nil))
	<-st.writer
	txTimeout = saved
	if !errors.Is(err, errTxTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Update in a stuck transaction = %v, want errTxTimeout", err)
	}
	// Far beyond the 200 ms even on a loaded machine, and far below the
	// default 30 s it would take were the shorter timeout not used.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Update returned after %v", d)
	}
	if got, err := ss.Get(t.Context(), s.ID); err != nil || got.Version != 1 {
		t.Errorf("after the timed-out Update: %+v, %v; want version 1", got, err)
	}
	if err := ss.Update(t.Context(), nextVersion(s, nil)); err != nil {
		t.Errorf("Update once the lock is free: %v", err)
	}
}

// TestSessionsCorruptRow: a state that does not decode is an error of its
// own, not a session nor ErrSessionNotFound.
func TestSessionsCorruptRow(t *testing.T) {
	st := openT(t, sqliteURL(t))
	ss := st.Sessions()
	for _, state := range []string{`{"cart":`, `null`, `[1]`, `"x"`} {
		s := newTestSession(ids.New())
		if err := ss.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		if _, err := st.db.ExecContext(t.Context(), `UPDATE workflow_sessions SET state = $1 WHERE session_id = $2`, state, s.ID); err != nil {
			t.Fatal(err)
		}
		got, err := ss.Get(t.Context(), s.ID)
		if err == nil || got != nil || errors.Is(err, workflow.ErrSessionNotFound) || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("Get of state %s = %v, %v; want a corrupt-state error", state, got, err)
		}
	}
}
