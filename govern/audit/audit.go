// Package audit exports the audit journal of UAICP 0.3
// (github.com/UAICP/uaicp §5.4) — a govern.Journal — to audit sinks: a JSONL
// file (JSONLFile), a log/slog logger (Slog), or any Sink. The export is
// asynchronous and lossless: an Exporter reads the journal from a
// persisted Cursor, hands batches to the sink in order, and moves the
// cursor only once the sink accepted a batch; a failing sink is retried
// with capped exponential backoff, never skipped.
//
//	ex := audit.NewExporter(j, audit.JSONLFile("/var/log/agentry/audit.jsonl"),
//		&audit.Options{Cursor: audit.FileCursor("/var/lib/agentry/audit.cursor")})
//	go ex.Run(ctx)
//
// Delivery is at least once: after a crash between a sink accepting a
// batch and the cursor moving, the batch is exported again. Records carry
// their Seq, so a sink can drop what it has (JSONLFile does).
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/govern"
)

// Sink receives journal records. Export is called by one goroutine at a
// time, with records in Seq order, each batch following the previous one
// — except that after a restart a batch may repeat records already
// exported (at least once). It returns nil only once the sink holds recs
// as durably as it can; an error makes the exporter retry the same
// records later.
type Sink interface {
	Export(ctx context.Context, recs []govern.Record) error
}

// Cursor persists the Seq of the last record a sink accepted. Load
// returns 0 when nothing was stored.
type Cursor interface {
	Load(ctx context.Context) (uint64, error)
	Store(ctx context.Context, seq uint64) error
}

// flusher is a journal that can make what was appended durable (the file
// journal). The exporter flushes such a journal before exporting a batch,
// so that no sink ever holds a record that a crash can take back.
type flusher interface {
	Flush(ctx context.Context) error
}

// Defaults of Options.
const (
	defaultBatchSize    = 256
	defaultPollInterval = time.Second
	defaultMinBackoff   = 100 * time.Millisecond
	defaultMaxBackoff   = 30 * time.Second
)

// Options configures an Exporter; nil or zero fields take the defaults:
// batches of 256 records, a poll every second, a backoff from 100 ms to
// 30 s.
type Options struct {
	// Cursor persists the export position; nil keeps it in memory only,
	// so that each Exporter starts at the journal's first record.
	Cursor Cursor
	// BatchSize is the most records one Export call gets.
	BatchSize int
	// PollInterval is how long Run waits before looking for new records
	// when it has exported everything.
	PollInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before retrying after a
	// failure: it starts at MinBackoff and doubles up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives a record of each failure; nil is slog.Default().
	Logger *slog.Logger
}

// Exporter exports a journal to a sink. It is safe for concurrent use;
// exports run one at a time.
type Exporter struct {
	j    govern.Journal
	sink Sink
	opts Options

	exported atomic.Uint64 // the last record the sink accepted

	mu      sync.Mutex // held by an export
	loaded  bool
	pos     uint64 // the last record the sink accepted
	pending bool   // pos not yet stored in the cursor
}

// NewExporter returns an exporter of j to sink.
func NewExporter(j govern.Journal, sink Sink, opts *Options) *Exporter {
	e := &Exporter{j: j, sink: sink}
	if opts != nil {
		e.opts = *opts
	}
	if e.opts.BatchSize <= 0 {
		e.opts.BatchSize = defaultBatchSize
	}
	if e.opts.PollInterval <= 0 {
		e.opts.PollInterval = defaultPollInterval
	}
	if e.opts.MinBackoff <= 0 {
		e.opts.MinBackoff = defaultMinBackoff
	}
	if e.opts.MaxBackoff < e.opts.MinBackoff {
		e.opts.MaxBackoff = max(defaultMaxBackoff, e.opts.MinBackoff)
	}
	if e.opts.Logger == nil {
		e.opts.Logger = slog.Default()
	}
	return e
}

// Exported returns the Seq of the last record the sink accepted.
func (e *Exporter) Exported() uint64 { return e.exported.Load() }

// Run exports until ctx is done, then returns nil: everything in the
// journal, then what is appended later (looking every PollInterval). A
// failure — of the journal, the sink or the cursor — is logged and
// retried after a backoff; the same records are exported again, none is
// skipped.
func (e *Exporter) Run(ctx context.Context) error {
	backoff := e.opts.MinBackoff
	for {
		n, err := e.ExportPending(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := e.opts.PollInterval
		if err != nil {
			e.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "audit: export failed; retrying",
				slog.Uint64("exported", e.Exported()), slog.Duration("backoff", backoff), slog.String("error", err.Error()))
			wait, backoff = backoff, min(2*backoff, e.opts.MaxBackoff)
		} else {
			backoff = e.opts.MinBackoff
			if n > 0 {
				continue
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// ExportPending exports the records the journal holds now, batch by
// batch, and returns how many it exported; it stops at the first failure
// (which a later call retries).
func (e *Exporter) ExportPending(ctx context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded {
		if e.opts.Cursor != nil {
			pos, err := e.opts.Cursor.Load(ctx)
			if err != nil {
				return 0, fmt.Errorf("audit: load the cursor: %w", err)
			}
			e.pos = pos
			e.exported.Store(pos)
		}
		e.loaded = true
	}
	total := 0
	for {
		if err := e.storeLocked(ctx); err != nil {
			return total, err
		}
		batch, err := e.readLocked(ctx)
		if err != nil || len(batch) == 0 {
			return total, err
		}
		if f, ok := e.j.(flusher); ok {
			if err := f.Flush(ctx); err != nil {
				return total, fmt.Errorf("audit: flush the journal: %w", err)
			}
		}
		if err := e.sink.Export(ctx, batch); err != nil {
			return total, fmt.Errorf("audit: sink: %w", err)
		}
		e.pos, e.pending = batch[len(batch)-1].Seq, true
		e.exported.Store(e.pos)
		total += len(batch)
	}
}

// storeLocked stores a position the cursor lacks.
func (e *Exporter) storeLocked(ctx context.Context) error {
	if !e.pending || e.opts.Cursor == nil {
		e.pending = false
		return nil
	}
	if err := e.opts.Cursor.Store(ctx, e.pos); err != nil {
		return fmt.Errorf("audit: store the cursor: %w", err)
	}
	e.pending = false
	return nil
}

// errGap: the journal does not continue where the export stands.
var errGap = errors.New("audit: the journal does not continue at the exported position")

// readLocked reads the next batch after pos.
func (e *Exporter) readLocked(ctx context.Context) ([]govern.Record, error) {
	var batch []govern.Record
	for r, err := range e.j.Records(ctx, e.pos+1) {
		if err != nil {
			return nil, fmt.Errorf("audit: read the journal: %w", err)
		}
		if want := e.pos + 1 + uint64(len(batch)); r.Seq != want {
			return nil, fmt.Errorf("%w: record %d where %d was expected", errGap, r.Seq, want)
		}
		batch = append(batch, r)
		if len(batch) == e.opts.BatchSize {
			break
		}
	}
	return batch, nil
}
