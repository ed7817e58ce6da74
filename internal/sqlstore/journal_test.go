package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/govern/journaltest"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// durableJournal opens the journal of a store at u, and reopens it in a
// new Store (as a restarted process would).
func durableJournal(u string) journaltest.DurableOpener {
	return func(t *testing.T) (govern.Journal, journaltest.Opener) {
		return openT(t, u).Journal(), func(t *testing.T) govern.Journal { return openT(t, u).Journal() }
	}
}

func TestUAICP_5_4_Journal_SQLite(t *testing.T) {
	journaltest.RunDurable(t, func(t *testing.T) (govern.Journal, journaltest.Opener) {
		return durableJournal(sqliteURL(t))(t)
	})
}

func TestUAICP_5_4_Journal_SQLiteMemory(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) govern.Journal { return openT(t, "memory:").Journal() })
}

func TestUAICP_5_4_Journal_PostgreSQL(t *testing.T) {
	postgresURL(t) // skip early when unset
	journaltest.RunDurable(t, func(t *testing.T) (govern.Journal, journaltest.Opener) {
		return durableJournal(postgresURL(t))(t)
	})
}

// TestJournalSharedDatabase: journals of several Stores on one database —
// several processes, several replicas — appending at once keep one
// chain, and a unique key taken through one is taken for all.
func TestJournalSharedDatabase(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			const replicas, writers, appends = 3, 4, 15
			js := make([]govern.Journal, replicas)
			for i := range js {
				js[i] = openT(t, u).Journal()
			}
			var wg sync.WaitGroup
			for r := range replicas {
				for w := range writers {
					wg.Go(func() {
						for i := range appends {
							recs := []*govern.Record{
								journalfixture.Record(recordkind.Transition, fmt.Sprintf("r%d-w%d", r, w), fmt.Sprintf(`{"i":%d}`, i)),
								journalfixture.Record(recordkind.Transition, fmt.Sprintf("r%d-w%d", r, w), fmt.Sprintf(`{"i":%d,"second":true}`, i)),
							}
							if err := js[r].Append(context.Background(), i%2 == 0, recs...); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			for r, j := range js {
				n, err := govern.VerifyChain(t.Context(), j)
				if err != nil || n != 2*replicas*writers*appends {
					t.Fatalf("replica %d: VerifyChain = %d, %v; want %d records", r, n, err, 2*replicas*writers*appends)
				}
			}
			// A unique key raced through every replica is taken once.
			errs := make([]error, replicas)
			for r := range replicas {
				wg.Go(func() {
					rec := journalfixture.Record(recordkind.ApprovalDecided, "x", `{}`)
					rec.Unique = "approval:shared"
					errs[r] = js[r].Append(context.Background(), true, rec)
				})
			}
			wg.Wait()
			wins := 0
			for _, err := range errs {
				if err == nil {
					wins++
				} else if !errors.Is(err, govern.ErrDuplicate) {
					t.Error(err)
				}
			}
			if wins != 1 {
				t.Errorf("%d appends of one unique key through %d replicas succeeded, want 1", wins, replicas)
			}
		})
	}
}

// TestJournalGroupCommit: an append failing with a duplicate key does not
// fail the appends committed with it, and many concurrent appends share
// transactions.
func TestJournalGroupCommit(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) { testJournalGroupCommit(t, openT(t, newURL(t)).Journal()) })
	}
}

func testJournalGroupCommit(t *testing.T, j govern.Journal) {
	taken := journalfixture.Record(recordkind.ApprovalDecided, "x", `{}`)
	taken.Unique = "k"
	if err := j.Append(t.Context(), true, taken); err != nil {
		t.Fatal(err)
	}
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := journalfixture.Record(recordkind.Transition, "x", fmt.Sprintf(`{"i":%d}`, i))
			if i%8 == 0 {
				r.Unique = "k"
			}
			errs[i] = j.Append(context.Background(), false, r)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%8 == 0 && !errors.Is(err, govern.ErrDuplicate) {
			t.Errorf("append %d reused key k: %v, want ErrDuplicate", i, err)
		}
		if i%8 != 0 && err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	if c, err := govern.VerifyChain(t.Context(), j); err != nil || c != 1+n-n/8 {
		t.Errorf("VerifyChain = %d, %v; want %d", c, err, 1+n-n/8)
	}
}

func TestJournalTamperDetected(t *testing.T) {
	s := openT(t, sqliteURL(t))
	j := s.Journal()
	for i := range 5 {
		if err := j.Append(t.Context(), true, journalfixture.Record(recordkind.Transition, "r", fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.ExecContext(t.Context(), `UPDATE governance_journal SET record = replace(record, '"outcome":"pending"', '"outcome":"success"') WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	_, err := govern.VerifyChain(t.Context(), j)
	var ce *govern.ChainError
	if !errors.As(err, &ce) || ce.Seq != 3 {
		t.Errorf("VerifyChain after editing record 3 = %v", err)
	}
	if _, err := s.db.ExecContext(t.Context(), `UPDATE governance_journal SET record = 'garbage' WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	_, err = govern.VerifyChain(t.Context(), j)
	if !errors.As(err, &ce) || ce.Seq != 2 {
		t.Errorf("VerifyChain after breaking record 2 = %v", err)
	}
}

var _ audit.Cursor = (*AuditCursor)(nil)

func TestAuditCursor(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			c := openT(t, u).AuditCursor("siem")
			if seq, err := c.Load(t.Context()); seq != 0 || err != nil {
				t.Fatalf("new cursor: %d, %v", seq, err)
			}
			for _, seq := range []uint64{5, 900, 1 << 40} {
				if err := c.Store(t.Context(), seq); err != nil {
					t.Fatal(err)
				}
			}
			other := openT(t, u)
			if seq, err := other.AuditCursor("siem").Load(t.Context()); seq != 1<<40 || err != nil {
				t.Errorf("cursor through another store: %d, %v", seq, err)
			}
			if seq, err := other.AuditCursor("other").Load(t.Context()); seq != 0 || err != nil {
				t.Errorf("another cursor: %d, %v", seq, err)
			}
		})
	}
}

// TestJournalRecordsOf: RecordsOf yields the records of the kinds asked
// for, in order, and the rows written before the journal kept kinds
// (kind NULL) whatever their kind, so that an index following it misses
// nothing; the rows of other kinds are not read.
func TestJournalRecordsOf(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := openT(t, newURL(t))
			j := s.Journal()
			kinds := []govern.RecordKind{recordkind.RunStarted, recordkind.Transition, recordkind.Intent,
				recordkind.ApprovalRequested, recordkind.Transition, recordkind.Intent}
			for i, k := range kinds {
				if err := j.Append(t.Context(), true, journalfixture.Record(k, "r", fmt.Sprintf(`{"i":%d}`, i))); err != nil {
					t.Fatal(err)
				}
			}
			// Record 3 (an intent) as written before migration 8.
			if _, err := s.db.ExecContext(t.Context(), `UPDATE governance_journal SET kind = NULL WHERE seq = 3`); err != nil {
				t.Fatal(err)
			}
			kr := j.(interface {
				RecordsOf(context.Context, uint64, []govern.RecordKind) iter.Seq2[govern.Record, error]
			})
			var got []string
			for rec, err := range kr.RecordsOf(t.Context(), 2, []govern.RecordKind{recordkind.Transition, recordkind.ApprovalRequested}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%d %s", rec.Seq, rec.Kind))
			}
			want := []string{"2 transition", "3 invocation_intent", "4 approval_requested", "5 transition"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("RecordsOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJournalDecisionsNotified: on PostgreSQL, an approval decision
// journaled by one process reaches every process watching decisions
// (LISTEN/NOTIFY) once its append commits — the request, the approval
// and the deciding node — so that a replica resumes a run whose decider
// died without waiting for its reaper.
func TestJournalDecisionsNotified(t *testing.T) {
	if os.Getenv("AGENTRY_TEST_POSTGRES") == "" {
		t.Skip("AGENTRY_TEST_POSTGRES is not set")
	}
	u := postgresURL(t)
	decider, watcher := openT(t, u), openT(t, u)
	got := make(chan [3]string, 4)
	watcher.Journal().(interface {
		WatchDecisions(func(requestID, approvalID, node string))
	}).WatchDecisions(func(r, a, n string) { got <- [3]string{r, a, n} })
	// The listener listens once it wakes the stream watchers (signalAll).
	listening, stop := watcher.hub.watch("test")
	defer stop()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the listener did not start")
	}
	const id = "00000000-0000-4000-8000-0000000000f1"
	rec := journalfixture.Record(recordkind.ApprovalDecided, id, `{"approval_id":"ap-1","approved":false,"approver":"x"}`)
	rec.Node = "n1"
	if err := decider.Journal().Append(t.Context(), true, rec); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if want := [3]string{id, "ap-1", "n1"}; g != want {
			t.Errorf("notified %q, want %q", g, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notification of the decision")
	}
}

// TestJournalStatementFailure: an append whose statement the database
// refuses (here a trigger refusing one run's records) fails alone — the
// appends committed with it are stored — the transaction is ended, and
// the connection serves the next append (one connection in the pool, so
// that a transaction left open would fail it).
func TestJournalStatementFailure(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := openT(t, newURL(t))
			ctx := t.Context()
			trigger := []string{`CREATE TRIGGER explode BEFORE INSERT ON governance_journal WHEN NEW.request_id = 'explode'
BEGIN SELECT RAISE(ABORT, 'boom'); END`}
			if st.dialect == postgres {
				trigger = []string{`CREATE FUNCTION explode() RETURNS trigger AS $$
BEGIN IF NEW.request_id = 'explode' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
					`CREATE TRIGGER explode BEFORE INSERT ON governance_journal FOR EACH ROW EXECUTE FUNCTION explode()`}
			}
			for _, stmt := range trigger {
				if _, err := st.db.ExecContext(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			st.db.SetMaxOpenConns(1)
			j := st.Journal()
			const n = 16
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					id := "fine"
					if i%4 == 0 {
						id = "explode"
					}
					errs[i] = j.Append(context.Background(), true, journalfixture.Record(recordkind.Transition, id, fmt.Sprintf(`{"i":%d}`, i)))
				})
			}
			wg.Wait()
			for i, err := range errs {
				if i%4 == 0 && (err == nil || !strings.Contains(err.Error(), "boom")) {
					t.Errorf("append %d (refused by the trigger): %v", i, err)
				}
				if i%4 != 0 && err != nil {
					t.Errorf("append %d: %v", i, err)
				}
			}
			if err := j.Append(ctx, true, journalfixture.Record(recordkind.Transition, "after", `{}`)); err != nil {
				t.Errorf("the append after: %v", err)
			}
			if c, err := govern.VerifyChain(ctx, j); err != nil || c != n-n/4+1 {
				t.Errorf("VerifyChain = %d, %v; want %d", c, err, n-n/4+1)
			}
		})
	}
}

// runRecordsT returns the records of run id j holds.
func runRecordsT(t *testing.T, j govern.Journal, id string) []govern.Record {
	t.Helper()
	recs, err := j.(govern.RunReader).RunRecords(t.Context(), id)
	if err != nil {
		t.Fatalf("RunRecords(%s): %v", id, err)
	}
	return recs
}

// TestJournalDeferredAppends: an Append without sync returns before its
// records are sealed or committed — another store (replica) does not see
// them — and they are committed, in order, in the transaction of the next
// synced Append; Close commits those left. Unique keys are not deferred.
func TestJournalDeferredAppends(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			st, other := openT(t, u), openT(t, u).Journal()
			j := st.Journal()
			j.(*sqlJournal).flushAfter = time.Hour // only syncs commit
			ctx := t.Context()
			a, b := journalfixture.Record(recordkind.Transition, "r1", `{"n":1}`), journalfixture.Record(recordkind.Evidence, "r1", `{"n":2}`)
			if err := j.Append(ctx, false, a, b); err != nil {
				t.Fatal(err)
			}
			if a.Seq != 0 || b.Seq != 0 {
				t.Errorf("deferred records sealed at once: seq %d, %d", a.Seq, b.Seq)
			}
			if got := runRecordsT(t, other, "r1"); len(got) != 0 {
				t.Errorf("another store reads %d deferred records before anything synced", len(got))
			}
			c := journalfixture.Record(recordkind.Transition, "r2", `{"n":3}`)
			if err := j.Append(ctx, true, c); err != nil {
				t.Fatal(err)
			}
			if a.Seq != 1 || b.Seq != 2 || c.Seq != 3 || b.Prev != a.Hash || c.Prev != b.Hash {
				t.Errorf("sealed as %d, %d, %d (prev chain %v, %v)", a.Seq, b.Seq, c.Seq, b.Prev == a.Hash, c.Prev == b.Hash)
			}
			if got := runRecordsT(t, other, "r1"); len(got) != 2 {
				t.Errorf("another store reads %d records of r1 after the sync, want 2", len(got))
			}
			if st.dialect == postgres {
				var txns int
				if err := st.db.QueryRowContext(ctx, `SELECT count(DISTINCT xmin::text) FROM governance_journal`).Scan(&txns); err != nil {
					t.Fatal(err)
				}
				if txns != 1 {
					t.Errorf("the deferred and the synced records took %d transactions, want 1", txns)
				}
			}
			uq := withUniqueKey(journalfixture.Record(recordkind.Transition, "r3", `{}`), "end:r3")
			if err := j.Append(ctx, false, uq); err != nil {
				t.Fatal(err)
			}
			if uq.Seq != 4 {
				t.Errorf("an append with a unique key, without sync: seq %d on return, want 4 (not deferred)", uq.Seq)
			}
			d := journalfixture.Record(recordkind.Transition, "r4", `{}`)
			if err := j.Append(ctx, false, d); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if got := runRecordsT(t, other, "r4"); len(got) != 1 || d.Seq != 5 {
				t.Errorf("after Close: %d records of r4 (seq %d), want 1 (seq 5)", len(got), d.Seq)
			}
			if n, err := govern.VerifyChain(ctx, other); n != 5 || err != nil {
				t.Errorf("VerifyChain = %d, %v; want 5, nil", n, err)
			}
		})
	}
}

func withUniqueKey(r *govern.Record, key string) *govern.Record {
	r.Unique = key
	return r
}

// TestJournalDeferredFlushedByTimer: deferred records are committed
// without any sync, read or Close coming.
func TestJournalDeferredFlushedByTimer(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			j, other := openT(t, u).Journal(), openT(t, u).Journal()
			if err := j.Append(t.Context(), false, journalfixture.Record(recordkind.Transition, "r", `{}`)); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second) // a safety net: the timer is 50 ms
			for len(runRecordsT(t, other, "r")) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("a deferred record was not committed without a sync")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestJournalDeferredLost: when deferred records of a run cannot be
// committed, nobody is told at once; the run's records after them are
// not committed either (the journal keeps each run's order), and its
// next Append fails with govern.ErrLeased, so that the governor stops it.
// Other runs' records go on.
func TestJournalDeferredLost(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := openT(t, newURL(t))
			ctx := t.Context()
			trigger := []string{`CREATE TRIGGER explode BEFORE INSERT ON governance_journal WHEN NEW.record LIKE '%"boom"%'
BEGIN SELECT RAISE(ABORT, 'boom'); END`}
			if st.dialect == postgres {
				trigger = []string{`CREATE FUNCTION explode() RETURNS trigger AS $$
BEGIN IF NEW.record LIKE '%"boom"%' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
					`CREATE TRIGGER explode BEFORE INSERT ON governance_journal FOR EACH ROW EXECUTE FUNCTION explode()`}
			}
			for _, stmt := range trigger {
				if _, err := st.db.ExecContext(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			j := st.Journal()
			j.(*sqlJournal).flushAfter = time.Hour
			for _, r := range []*govern.Record{
				journalfixture.Record(recordkind.Transition, "x", `{"n":1}`),
				journalfixture.Record(recordkind.Transition, "x", `{"boom":true}`),
				journalfixture.Record(recordkind.Transition, "x", `{"n":3}`),
				journalfixture.Record(recordkind.Transition, "y", `{"n":1}`),
			} {
				if err := j.Append(ctx, false, r); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.Append(ctx, true, journalfixture.Record(recordkind.Transition, "z", `{}`)); err != nil {
				t.Fatalf("a synced append of another run, after the deferred ones: %v", err)
			}
			err := j.Append(ctx, true, journalfixture.Record(recordkind.Transition, "x", `{"n":4}`))
			if !errors.Is(err, govern.ErrLeased) {
				t.Errorf("the next append of the run whose deferred records were lost: %v, want ErrLeased", err)
			}
			if err := j.Append(ctx, true, journalfixture.Record(recordkind.Transition, "y", `{"n":2}`)); err != nil {
				t.Errorf("another run's append: %v", err)
			}
			for id, want := range map[string]int{"x": 1, "y": 2, "z": 1} {
				if got := runRecordsT(t, j, id); len(got) != want {
					t.Errorf("run %s: %d records committed, want %d", id, len(got), want)
				}
			}
			if n, err := govern.VerifyChain(ctx, j); n != 4 || err != nil {
				t.Errorf("VerifyChain = %d, %v; want 4, nil", n, err)
			}
		})
	}
}
