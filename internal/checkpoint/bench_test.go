package checkpoint_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/checkpointtest"
	"github.com/agentry-dev/agentry/internal/checkpoint"
	"github.com/agentry-dev/agentry/internal/sqlstore"
	"github.com/agentry-dev/agentry/llm"
)

// benchState is a checkpoint of a typical length: the sample state plus
// 40 exchanged messages (about 20 KB of JSON).
func benchState() *agent.State {
	s := checkpointtest.SampleState()
	for i := range 20 {
		s = s.WithMessages(
			llm.NewAssistantMessage([]llm.ContentBlock{llm.Text(strings.Repeat(fmt.Sprintf("thinking about step %d. ", i), 8))},
				[]llm.ToolCall{{ToolCallID: fmt.Sprintf("c%d", i), ToolName: "search", Arguments: map[string]any{"q": "incidents", "page": float64(i)}}}),
			llm.NewToolResultMessage([]llm.ToolResult{{ToolCallID: fmt.Sprintf("c%d", i), Result: strings.Repeat("result line; ", 20)}}))
	}
	return s.WithStep(23)
}

// saveLatencies runs save once per b.Loop iteration and reports the
// 50th and 99th percentile latencies in milliseconds and, when baseline
// is set, the p50 as a multiple of the baseline's p50.
func saveLatencies(b *testing.B, baseline time.Duration, save func() error) time.Duration {
	b.Helper()
	durs := make([]time.Duration, 0, 1024)
	for b.Loop() {
		start := time.Now()
		if err := save(); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	slices.Sort(durs)
	p50, p99 := durs[len(durs)/2], durs[min(len(durs)-1, len(durs)*99/100)]
	b.ReportMetric(float64(p50)/1e6, "p50-ms")
	b.ReportMetric(float64(p99)/1e6, "p99-ms")
	if baseline > 0 {
		b.ReportMetric(float64(p50)/float64(baseline), "p50-x-baseline")
	}
	return p50
}

// writeFsync is the baseline: the bytes a file checkpoint holds written
// to one file with os.WriteFile's flags, then fsynced.
func writeFsync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// BenchmarkSave measures durable checkpoint saves: the file store (two
// files, each written, fsynced, renamed, directory fsynced) and the
// SQLite store (WAL, synchronous=FULL), against the baseline of one
// os.WriteFile+fsync of the same bytes measured in the same run. Run with
// -benchtime=1000x or more for a stable p99; set AGENTRY_BENCH_DIR to
// measure another disk than the temporary directory's.
func BenchmarkSave(b *testing.B) {
	state := benchState()
	raw, _ := state.MarshalJSON()
	data, _ := json.MarshalIndent(json.RawMessage(raw), "", "  ")
	b.Logf("state JSON: %d bytes indented, %d compact", len(data), len(raw))
	dir := func(b *testing.B) string {
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
	var baseline time.Duration
	b.Run("baseline-writefile-fsync", func(b *testing.B) {
		path := filepath.Join(dir(b), "checkpoint.json")
		baseline = saveLatencies(b, 0, func() error { return writeFsync(path, data) })
	})
	b.Run("file", func(b *testing.B) {
		s, err := checkpoint.File(dir(b))
		if err != nil {
			b.Fatal(err)
		}
		saveLatencies(b, baseline, func() error { return s.Save(b.Context(), "bench", state) })
	})
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlstore.Open(b.Context(), "sqlite://"+filepath.Join(dir(b), "agentry.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		s := st.Checkpoints()
		saveLatencies(b, baseline, func() error { return s.Save(b.Context(), "bench", state) })
	})
}
