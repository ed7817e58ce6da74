package sqlstore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// journalBenchData is the Data of the benchmark's records, the same
// write intent as internal/journal's benchmarks use (a line of about 730
// bytes).
const journalBenchData = `{"tier":"write_low_risk","declared_tier":"write_low_risk",` +
	`"args":{"order":"A-1042","qty":2,"sku":"SKU-001","note":"leave at the door"},` +
	`"args_hash":"sha256:1770a32457f491f7dea282f3a022898deeede46626a41e31199a0e278a7508bb",` +
	`"attempt":0,"policy":{"effect":"allow","rule":"default"}}`

func journalBenchRecord(i int) *govern.Record {
	r := journalfixture.Record(recordkind.Intent, "439e0ddd-0d15-4589-a102-283a8970a4fb", journalBenchData)
	r.Tool, r.CallID = "refund", fmt.Sprint("call-", i)
	return r
}

// BenchmarkJournalAppend measures the store's governance journal: one
// record per synced Append (every Append is durable: one transaction,
// one WAL fsync on SQLite with synchronous=FULL) from 1, 8 and 64
// goroutines sharing one Journal value, whose group commit puts the
// Appends that arrive while a transaction commits into the next one.
// ns/op is per Append, wall time divided by the Appends for the parallel
// variants. PostgreSQL runs too when AGENTRY_TEST_POSTGRES is set; set
// AGENTRY_BENCH_DIR to measure another disk than the temporary
// directory's.
func BenchmarkJournalAppend(b *testing.B) {
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
		for _, n := range []int{1, 8, 64} {
			p, g := 0, 1
			if n > 1 {
				procs := runtime.GOMAXPROCS(0)
				p = (n + procs - 1) / procs
				g = p * procs
			}
			b.Run(fmt.Sprintf("%s/g=%d", name, g), func(b *testing.B) {
				st, err := Open(b.Context(), newURL(b))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				j := st.Journal()
				ctx := b.Context()
				appendOne := func(i int) bool {
					if err := j.Append(ctx, true, journalBenchRecord(i)); err != nil {
						b.Error(err) // not Fatal: RunParallel's goroutines may not call it
						return false
					}
					return true
				}
				b.ResetTimer()
				if p == 0 {
					for i := range b.N {
						if !appendOne(i) {
							return
						}
					}
				} else {
					b.SetParallelism(p)
					b.RunParallel(func(pb *testing.PB) {
						for i := 0; pb.Next(); i++ {
							if !appendOne(i) {
								return
							}
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
