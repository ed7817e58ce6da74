package audit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// fastOptions retry and poll without noticeable waits.
func fastOptions(c audit.Cursor) *audit.Options {
	return &audit.Options{Cursor: c, BatchSize: 7, PollInterval: time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)}
}

func appendRecords(t *testing.T, j govern.Journal, n int) {
	t.Helper()
	for i := range n {
		r := journalfixture.Record(recordkind.Transition, fmt.Sprintf("run-%d", i%4), fmt.Sprintf(`{"i":%d}`, i))
		if err := j.Append(t.Context(), i%3 == 0, r); err != nil {
			t.Fatal(err)
		}
	}
}

// recordingSink records what it accepted; it fails its first failures
// calls, and calls got after each accepted batch.
type recordingSink struct {
	mu       sync.Mutex
	failures int
	calls    int
	seqs     []uint64
	got      chan int // the number of records held, after each success
}

func (s *recordingSink) Export(ctx context.Context, recs []govern.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.failures {
		return fmt.Errorf("sink down (call %d)", s.calls)
	}
	for _, r := range recs {
		s.seqs = append(s.seqs, r.Seq)
	}
	if s.got != nil {
		s.got <- len(s.seqs)
	}
	return nil
}

func (s *recordingSink) held() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seqs)
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// waitFor reads counts from got until one reaches n.
func waitFor(t *testing.T, got chan int, n int) {
	t.Helper()
	for c := range got {
		if c >= n {
			return
		}
	}
}

func TestFailingSinkGetsEveryRecordInOrder(t *testing.T) {
	j := govern.NewMemoryJournal()
	appendRecords(t, j, 50)
	sink := &recordingSink{failures: 5, got: make(chan int, 1000)}
	ex := audit.NewExporter(j, sink, fastOptions(nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- ex.Run(ctx) }()
	waitFor(t, sink.got, 50)
	// Records appended later are picked up too.
	appendRecords(t, j, 23)
	waitFor(t, sink.got, 73)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after cancel, want nil", err)
	}
	if got := sink.held(); !slices.Equal(got, seqRange(1, 73)) {
		t.Errorf("sink holds %v, want 1…73 once each, in order", got)
	}
	if sink.calls <= 5 {
		t.Errorf("%d calls", sink.calls)
	}
	if ex.Exported() != 73 {
		t.Errorf("Exported() = %d", ex.Exported())
	}
}

func TestRestartWithPersistedCursor(t *testing.T) {
	dir := t.TempDir()
	j := govern.NewMemoryJournal()
	cursor := audit.FileCursor(filepath.Join(dir, "cursor"))
	appendRecords(t, j, 40)
	first := &recordingSink{}
	n, err := audit.NewExporter(j, first, fastOptions(cursor)).ExportPending(t.Context())
	if err != nil || n != 40 {
		t.Fatalf("first exporter: %d, %v", n, err)
	}
	appendRecords(t, j, 15)
	// A new process: a new exporter on the same cursor exports what the
	// first did not, nothing it did.
	second := &recordingSink{}
	n, err = audit.NewExporter(j, second, fastOptions(audit.FileCursor(filepath.Join(dir, "cursor")))).ExportPending(t.Context())
	if err != nil || n != 15 {
		t.Fatalf("second exporter: %d, %v", n, err)
	}
	if got := second.held(); !slices.Equal(got, seqRange(41, 55)) {
		t.Errorf("after restart the sink got %v, want 41…55", got)
	}
	if seq, err := cursor.Load(t.Context()); seq != 55 || err != nil {
		t.Errorf("cursor = %d, %v", seq, err)
	}
}

// failingCursor stores nothing while broken.
type failingCursor struct {
	audit.Cursor
	broken bool
}

func (c *failingCursor) Store(ctx context.Context, seq uint64) error {
	if c.broken {
		return errors.New("disk full")
	}
	return c.Cursor.Store(ctx, seq)
}

// A cursor that cannot be stored: the exporter does not export the same
// batch twice in the meantime, and stores the position once it can.
func TestCursorFailure(t *testing.T) {
	j := govern.NewMemoryJournal()
	appendRecords(t, j, 10)
	c := &failingCursor{Cursor: audit.FileCursor(filepath.Join(t.TempDir(), "cursor")), broken: true}
	sink := &recordingSink{}
	ex := audit.NewExporter(j, sink, fastOptions(c))
	if _, err := ex.ExportPending(t.Context()); err == nil {
		t.Fatal("no error while the cursor cannot be stored")
	}
	if _, err := ex.ExportPending(t.Context()); err == nil {
		t.Fatal("no error while the cursor cannot be stored")
	}
	if got := sink.held(); !slices.Equal(got, seqRange(1, 7)) {
		t.Errorf("sink got %v, want the first batch once", got)
	}
	c.broken = false
	if _, err := ex.ExportPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.held(); !slices.Equal(got, seqRange(1, 10)) {
		t.Errorf("sink got %v", got)
	}
	if seq, _ := c.Load(t.Context()); seq != 10 {
		t.Errorf("cursor = %d", seq)
	}
}

// A crash after the sink accepted a batch and before the cursor moved:
// the batch is exported again, and the JSONL sink writes it once.
func TestJSONLFileDeduplicatesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	j := govern.NewMemoryJournal()
	appendRecords(t, j, 20)
	out := filepath.Join(dir, "audit.jsonl")
	c := &failingCursor{Cursor: audit.FileCursor(filepath.Join(dir, "cursor")), broken: true}
	sink := audit.JSONLFile(out)
	audit.NewExporter(j, sink, fastOptions(c)).ExportPending(t.Context()) // exports 1…7, cannot store the cursor
	sink.Close()
	// The restarted exporter starts from the stored cursor (none).
	sink = audit.JSONLFile(out)
	defer sink.Close()
	c.broken = false
	if n, err := audit.NewExporter(j, sink, fastOptions(c)).ExportPending(t.Context()); err != nil || n != 20 {
		t.Fatalf("after restart: %d, %v", n, err)
	}
	// The file is a journal of every record once: it verifies.
	f, err := journal.Open(out, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := govern.VerifyChain(t.Context(), f); err != nil || n != 20 {
		t.Errorf("exported file: VerifyChain = %d, %v", n, err)
	}
	var want []govern.Record
	for r, err := range j.Records(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	var got []govern.Record
	for r, err := range f.Records(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if d := journalfixture.Diff(want, got); d != "" {
		t.Errorf("exported records (-journal +file):\n%s", d)
	}
}

func TestJSONLFileCutsTornLine(t *testing.T) {
	dir := t.TempDir()
	j := govern.NewMemoryJournal()
	appendRecords(t, j, 5)
	out := filepath.Join(dir, "audit.jsonl")
	sink := audit.JSONLFile(out)
	ex := audit.NewExporter(j, sink, fastOptions(nil))
	if _, err := ex.ExportPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	sink.Close()
	fh, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(`{"seq":6,"prev":"sha256:0`) // a write cut short
	fh.Close()
	appendRecords(t, j, 3)
	sink = audit.JSONLFile(out)
	defer sink.Close()
	if _, err := audit.NewExporter(j, sink, fastOptions(nil)).ExportPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	f, err := journal.Open(out, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := govern.VerifyChain(t.Context(), f); err != nil || n != 8 || f.TornBytes() != 0 {
		t.Errorf("VerifyChain = %d, %v (torn %d)", n, err, f.TornBytes())
	}
}

// The exporter flushes a file journal before exporting, and works on it
// like on any journal.
func TestExportFileJournal(t *testing.T) {
	dir := t.TempDir()
	var syncs int
	var mu sync.Mutex
	j, err := journal.Open(filepath.Join(dir, "j.jsonl"), &journal.Options{FlushInterval: -1, FaultHook: func(p string) {
		if p == journal.PointSynced {
			mu.Lock()
			syncs++
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 5 {
		if err := j.Append(t.Context(), false, journalfixture.Record(recordkind.Transition, "r", fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	sink := &recordingSink{}
	if n, err := audit.NewExporter(j, sink, fastOptions(nil)).ExportPending(t.Context()); err != nil || n != 5 {
		t.Fatalf("%d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if syncs == 0 {
		t.Error("exported records that were not durable: no flush")
	}
}

func TestFileCursor(t *testing.T) {
	c := audit.FileCursor(filepath.Join(t.TempDir(), "sub", "cursor"))
	if seq, err := c.Load(t.Context()); seq != 0 || err != nil {
		t.Errorf("missing cursor: %d, %v", seq, err)
	}
	if err := c.Store(t.Context(), 1<<63); err != nil {
		t.Fatal(err)
	}
	if seq, err := c.Load(t.Context()); seq != 1<<63 || err != nil {
		t.Errorf("Load = %d, %v", seq, err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("twelve"), 0o600)
	if _, err := audit.FileCursor(bad).Load(t.Context()); err == nil {
		t.Error("a cursor file that is not a number loaded")
	}
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(bad)))
	for _, e := range entries {
		if e.Name() != "bad" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestCursorAheadOfJournal(t *testing.T) {
	j := govern.NewMemoryJournal()
	appendRecords(t, j, 3)
	c := audit.FileCursor(filepath.Join(t.TempDir(), "cursor"))
	c.Store(t.Context(), 10) // ahead of the journal: nothing to export yet
	sink := &recordingSink{}
	ex := audit.NewExporter(j, sink, fastOptions(c))
	if n, err := ex.ExportPending(t.Context()); n != 0 || err != nil {
		t.Errorf("cursor ahead: %d, %v", n, err)
	}
	if ex.Exported() != 10 {
		t.Errorf("Exported = %d", ex.Exported())
	}
}
