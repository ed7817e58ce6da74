package journal_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/cputime"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// benchData is the Data of the benchmarks' records: a write's intent as
// the governor journals it, so that a record line is about 730 bytes.
const benchData = `{"tier":"write_low_risk","declared_tier":"write_low_risk",` +
	`"args":{"order":"A-1042","qty":2,"sku":"SKU-001","note":"leave at the door"},` +
	`"args_hash":"sha256:1770a32457f491f7dea282f3a022898deeede46626a41e31199a0e278a7508bb",` +
	`"attempt":0,"policy":{"effect":"allow","rule":"default"}}`

func benchRecords(n int) []*govern.Record {
	recs := make([]*govern.Record, n)
	for i := range recs {
		recs[i] = journalfixture.Record(recordkind.Intent, "439e0ddd-0d15-4589-a102-283a8970a4fb", benchData)
		recs[i].Tool, recs[i].CallID = "refund", fmt.Sprint("call-", i)
	}
	return recs
}

// openBench opens a journal in a temporary directory and returns it
// with its fsync counter.
func openBench(b *testing.B) (*journal.File, *atomic.Int64) {
	b.Helper()
	fsyncs := new(atomic.Int64)
	f, err := journal.Open(filepath.Join(b.TempDir(), "journal.jsonl"), &journal.Options{FaultHook: func(point string) {
		if point == journal.PointSynced {
			fsyncs.Add(1)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f, fsyncs
}

// parallelism returns the b.SetParallelism value for about n goroutines
// (0: one goroutine, without RunParallel) and the goroutines it makes.
func parallelism(n int) (p, goroutines int) {
	if n == 1 {
		return 0, 1
	}
	procs := runtime.GOMAXPROCS(0)
	p = (n + procs - 1) / procs
	return p, p * procs
}

// BenchmarkAppend measures the file journal's Append in a temporary
// directory (real fsyncs): one record per Append with sync from 1, 8
// and 64 goroutines (group commit: concurrent appends share an fsync),
// without sync, and batches of 16 records. It reports records/s,
// fsyncs/op and the bytes written per Append (disk-B/op); ns/op is per
// Append, wall time divided by the Appends for the parallel variants.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		sync       bool
		batch      int
		goroutines int
	}{
		{true, 1, 1}, {true, 1, 8}, {true, 1, 64}, {false, 1, 1}, {true, 16, 1}, {false, 16, 1},
	} {
		p, g := parallelism(c.goroutines)
		b.Run(fmt.Sprintf("sync=%t/batch=%d/g=%d", c.sync, c.batch, g), func(b *testing.B) {
			f, fsyncs := openBench(b)
			ctx := b.Context()
			appendOne := func() bool {
				if err := f.Append(ctx, c.sync, benchRecords(c.batch)...); err != nil {
					b.Error(err) // not Fatal: RunParallel's goroutines may not call it
					return false
				}
				return true
			}
			size0, fsyncs0 := fileSize(b, f), fsyncs.Load()
			cpu0, cpuOK := cputime.Process()
			b.ResetTimer()
			if p == 0 {
				for range b.N {
					if !appendOne() {
						return
					}
				}
			} else {
				b.SetParallelism(p)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if !appendOne() {
							return
						}
					}
				})
			}
			b.StopTimer()
			reportCPU(b, cpu0, cpuOK, b.N)
			b.ReportMetric(float64(b.N*c.batch)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(fsyncs.Load()-fsyncs0)/float64(b.N), "fsyncs/op")
			b.ReportMetric(float64(fileSize(b, f)-size0)/float64(b.N), "disk-B/op")
		})
	}
}

// reportCPU reports the process's CPU time since cpu0 per op
// (cpu-ns/op): on a machine shared with other work, a steadier figure
// than the wall time.
func reportCPU(b *testing.B, cpu0 time.Duration, ok bool, ops int) {
	if cpu1, ok1 := cputime.Process(); ok && ok1 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(ops), "cpu-ns/op")
	}
}

func fileSize(b *testing.B, f *journal.File) int64 {
	fi, err := os.Stat(f.Path())
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// scanRecords is the size of the journal the read benchmarks read.
const scanRecords = 10_000

// writeJournal writes a journal of n records, closes it and returns
// its path and size.
func writeJournal(b *testing.B, n int) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "journal.jsonl")
	f, err := journal.Open(path, &journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += 100 {
		if err := f.Append(b.Context(), false, benchRecords(min(100, n-i))...); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, fi.Size()
}

// BenchmarkRecords measures reading a 10,000-record journal with
// Records (pread by the offset index, strict decoding); one op reads
// them all.
func BenchmarkRecords(b *testing.B) {
	path, size := writeJournal(b, scanRecords)
	f, err := journal.Open(path, &journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(size)
	for b.Loop() {
		n := 0
		for _, err := range f.Records(b.Context(), 1) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != scanRecords {
			b.Fatalf("read %d records, want %d", n, scanRecords)
		}
	}
	b.ReportMetric(scanRecords*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkOpen measures opening a 10,000-record journal for writing:
// reading it whole, decoding every line and verifying the hash chain. It
// reports records/s of wall time and records/cpu-s of the process's CPU
// time (steadier on a shared machine).
func BenchmarkOpen(b *testing.B) {
	path, size := writeJournal(b, scanRecords)
	b.SetBytes(size)
	cpu0, cpuOK := cputime.Process()
	for b.Loop() {
		f, err := journal.Open(path, &journal.Options{FlushInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		if f.Len() != scanRecords {
			b.Fatalf("Len = %d, want %d", f.Len(), scanRecords)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0, cpuOK, b.N)
	b.ReportMetric(scanRecords*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if cpu, ok := cputime.Process(); ok && cpuOK {
		b.ReportMetric(scanRecords*float64(b.N)/(cpu-cpu0).Seconds(), "records/cpu-s")
	}
}

// BenchmarkSeal splits the CPU cost of sealing one record
// (govern.Seal: encoding/json, then JCS, then SHA-256) and compares it
// with encoding the line Append writes.
func BenchmarkSeal(b *testing.B) {
	rec := benchRecords(1)[0]
	if err := govern.Seal(&govern.Record{Seq: 41, Hash: "sha256:00"}, rec); err != nil {
		b.Fatal(err)
	}
	marshaled, err := json.Marshal(rec)
	if err != nil {
		b.Fatal(err)
	}
	canon, err := jcs.Transform(marshaled)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Seal", func(b *testing.B) {
		b.SetBytes(int64(len(marshaled)))
		for b.Loop() {
			if err := govern.Seal(&govern.Record{Seq: 41, Hash: "sha256:00"}, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(marshaled)))
		for b.Loop() {
			if _, err := json.Marshal(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jcs.Transform", func(b *testing.B) {
		b.SetBytes(int64(len(marshaled)))
		for b.Loop() {
			if _, err := jcs.Transform(marshaled); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(int64(len(canon)))
		for b.Loop() {
			sha256.Sum256(canon)
		}
	})
	b.Run("AppendRecord", func(b *testing.B) {
		b.SetBytes(int64(len(marshaled)))
		var buf []byte
		for b.Loop() {
			if buf, err = journal.AppendRecord(buf[:0], rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeRecord", func(b *testing.B) {
		b.SetBytes(int64(len(marshaled)))
		for b.Loop() {
			if _, err := journal.DecodeRecord(marshaled); err != nil {
				b.Fatal(err)
			}
		}
	})
}
