package sqlstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/cputime"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/workflow"
)

// benchState is the state of a session a few actions into a shop
// workflow: about 300 bytes of JSON.
func benchState(i int) map[string]any {
	return map[string]any{
		"user.email": fmt.Sprintf("user%d@example.com", i),
		"cart": []any{
			map[string]any{"product_id": "SKU-001", "quantity": 2.0, "price": 19.99},
			map[string]any{"product_id": "SKU-042", "quantity": 1.0, "price": 5.5},
		},
		"cart_total": 45.48,
		"shipping":   map[string]any{"method": "standard", "country": "DE", "postcode": "10115"},
		"step":       float64(i % 7),
	}
}

func benchDir(b *testing.B) string {
	if d := os.Getenv("AGENTRY_BENCH_DIR"); d != "" {
		d, err := os.MkdirTemp(d, "bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}

// updateOwnTx is the baseline: an Update without group commit, in a
// transaction of its own (SQLite: BEGIN IMMEDIATE … COMMIT with an fsync
// each, serialized by the store's writer lock).
func updateOwnTx(ctx context.Context, st *Store, s *workflow.Session) error {
	w, err := newWrite(updateSession, s)
	if err != nil {
		return err
	}
	unlock, err := st.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	outcome, err := applyWrite(ctx, tx, st.queries, w, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return outcome
}

// runUpdates has c writers, each on a session of its own, Update
// (version after version) b.N times in all, and returns updates/s.
func runUpdates(b *testing.B, st *Store, c int, update func(ctx context.Context, st *Store, s *workflow.Session) error) float64 {
	b.Helper()
	sess := make([]*workflow.Session, c)
	now := time.Now().UTC()
	for i := range sess {
		sess[i] = &workflow.Session{ID: ids.New(), Workflow: "shop", Stage: "cart", State: benchState(i),
			Version: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
		if err := st.Sessions().Create(b.Context(), sess[i]); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	cpu, _ := cputime.Process()
	for w := range c {
		wg.Go(func() {
			s := sess[w]
			for n.Add(1) <= int64(b.N) {
				s.Version++
				s.UpdatedAt = time.Now()
				s.State["step"] = float64(s.Version)
				if err := update(b.Context(), st, s); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rate := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(rate, "updates/s")
	if end, ok := cputime.Process(); ok {
		b.ReportMetric(float64((end-cpu).Microseconds())/float64(b.N), "cpu-µs/update")
	}
	return rate
}

// BenchmarkSessionsUpdateParallel measures durable session Updates from 1
// and 16 concurrent writers, each on its own session: group commit
// (Sessions().Update) against the baseline of one transaction per Update,
// measured in the same run, on SQLite (WAL, synchronous=FULL: an fsync per
// commit) and, when AGENTRY_TEST_POSTGRES is set, PostgreSQL. Set
// AGENTRY_BENCH_DIR to measure another disk than the temporary
// directory's.
func BenchmarkSessionsUpdateParallel(b *testing.B) {
	dbs := map[string]func(b *testing.B) string{
		"sqlite": func(b *testing.B) string { return "sqlite://" + filepath.Join(benchDir(b), "agentry.db") },
	}
	if os.Getenv("AGENTRY_TEST_POSTGRES") != "" {
		dbs["postgres"] = func(b *testing.B) string { return postgresURL(b) }
	}
	for _, name := range []string{"sqlite", "postgres"} {
		newURL, ok := dbs[name]
		if !ok {
			continue
		}
		for _, c := range []int{1, 16} {
			var baseline float64
			open := func(b *testing.B) *Store {
				st, err := Open(b.Context(), newURL(b))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				return st
			}
			b.Run(fmt.Sprintf("%s/c=%d/baseline-tx-per-update", name, c), func(b *testing.B) {
				baseline = runUpdates(b, open(b), c, updateOwnTx)
			})
			b.Run(fmt.Sprintf("%s/c=%d/group-commit", name, c), func(b *testing.B) {
				st := open(b)
				batches, writes := st.commits.batches.Load(), st.commits.writes.Load()
				rate := runUpdates(b, st, c, func(ctx context.Context, st *Store, s *workflow.Session) error {
					return st.Sessions().Update(ctx, s)
				})
				batches, writes = st.commits.batches.Load()-batches, st.commits.writes.Load()-writes
				b.ReportMetric(float64(writes)/float64(batches), "updates/tx")
				if baseline > 0 {
					b.ReportMetric(rate/baseline, "x-baseline")
				}
			})
		}
	}
}
