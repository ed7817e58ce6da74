package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/agentry-dev/agentry/internal/durable"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journal"
)

// JSONLSink appends records to a file, one per line, in the file
// journal's line format (journal.AppendRecord): an export from the first
// record is itself a journal file that `agentry audit verify --file`
// checks. Each Export is one write(2) and one fsync. Records it already
// holds (Seq not above its last line's) are dropped, so that repeated
// batches after a restart are written once; bytes after its last
// complete line, left by an interrupted write, are cut when it opens.
type JSONLSink struct {
	path string

	mu   sync.Mutex
	f    *os.File
	last uint64
}

// JSONLFile returns a sink appending to the file at path, created (0600,
// with its directory) at the first Export. Close releases it.
func JSONLFile(path string) *JSONLSink { return &JSONLSink{path: path} }

// Export implements Sink.
func (s *JSONLSink) Export(ctx context.Context, recs []govern.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.f == nil {
		if err := s.open(); err != nil {
			return err
		}
	}
	var buf []byte
	last := s.last
	for i := range recs {
		if recs[i].Seq <= last {
			continue
		}
		var err error
		if buf, err = journal.AppendRecord(buf, &recs[i]); err != nil {
			return err
		}
		last = recs[i].Seq
	}
	if len(buf) == 0 {
		return nil
	}
	_, err := s.f.Write(buf)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// What reached the file is unknown: reopen (cutting a partial
		// line) before the retry.
		s.f.Close()
		s.f = nil
		return fmt.Errorf("audit: %s: %w", s.path, err)
	}
	s.last = last
	return nil
}

// open opens the file, cuts a torn last line and reads the last Seq.
func (s *JSONLSink) open() error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	last, end, size, err := lastLine(f)
	if err == nil && end < size {
		if err = f.Truncate(end); err == nil {
			err = f.Sync()
		}
	}
	if err == nil && size == 0 {
		err = durable.SyncDir(filepath.Dir(s.path))
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %s: %w", s.path, err)
	}
	if last != nil {
		r, err := journal.DecodeRecord(last)
		if err != nil {
			f.Close()
			return fmt.Errorf("audit: %s: the last line is not a journal record: %w", s.path, err)
		}
		s.last = r.Seq
	}
	s.f = f
	return nil
}

// lastLine returns f's last complete line (nil for none), where the
// complete lines end, and the file's size.
func lastLine(f *os.File) (line []byte, end, size int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, 0, err
	}
	size = fi.Size()
	// Read back from the end, in growing windows, until the window holds
	// the last line whole (the '\n' before it, or the file's start).
	for window := int64(64 << 10); ; window *= 4 {
		start := max(size-window, 0)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, 0, err
		}
		nl := bytes.LastIndexByte(buf, '\n')
		if nl < 0 {
			if start == 0 {
				return nil, 0, size, nil // no complete line at all
			}
			continue
		}
		end = start + int64(nl) + 1
		prev := bytes.LastIndexByte(buf[:nl], '\n')
		if prev < 0 && start > 0 {
			if window > journal.MaxRecordSize*2 {
				return nil, 0, 0, errors.New("the last line is longer than a journal record")
			}
			continue
		}
		return buf[prev+1 : nl+1], end, size, nil
	}
}

// Close closes the file; a later Export opens it again.
func (s *JSONLSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Slog returns a sink writing one log record per journal record to
// logger's handler: message "uaicp.journal", the record's timestamp as
// the time, level INFO (WARN when its outcome is failure or uncertain),
// and attributes seq, kind, request_id, trace_id, actor (a group of id
// and kind), outcome and reasons — plus parent_trace_id, node, from, to,
// tool and call_id when set, and hash. Data is not logged. An error from
// the handler fails the Export (the batch is retried).
func Slog(logger *slog.Logger) Sink { return slogSink{logger.Handler()} }

type slogSink struct{ h slog.Handler }

func (s slogSink) Export(ctx context.Context, recs []govern.Record) error {
	for i := range recs {
		r := &recs[i]
		level := slog.LevelInfo
		if r.Outcome == govern.Failure || r.Outcome == govern.Uncertain {
			level = slog.LevelWarn
		}
		if !s.h.Enabled(ctx, level) {
			continue
		}
		reasons := make([]string, len(r.Reasons))
		for k, x := range r.Reasons {
			reasons[k] = string(x)
		}
		rec := slog.NewRecord(r.Timestamp.Time, level, "uaicp.journal", 0)
		rec.AddAttrs(
			slog.Uint64("seq", r.Seq),
			slog.String("kind", string(r.Kind)),
			slog.String("request_id", r.RequestID),
			slog.String("trace_id", r.TraceID),
			slog.Group("actor", slog.String("id", r.Actor.ID), slog.String("kind", string(r.Actor.Kind))),
			slog.String("outcome", string(r.Outcome)),
			slog.Any("reasons", reasons),
		)
		for _, a := range []struct{ k, v string }{
			{"parent_trace_id", r.ParentTraceID}, {"node", r.Node}, {"from", string(r.From)}, {"to", string(r.To)},
			{"tool", r.Tool}, {"call_id", r.CallID},
		} {
			if a.v != "" {
				rec.AddAttrs(slog.String(a.k, a.v))
			}
		}
		if r.Epoch > 0 {
			rec.AddAttrs(slog.Uint64("epoch", r.Epoch))
		}
		rec.AddAttrs(slog.String("hash", r.Hash))
		if err := s.h.Handle(ctx, rec); err != nil {
			return fmt.Errorf("audit: slog handler: record %d: %w", r.Seq, err)
		}
	}
	return nil
}

// FileCursor returns a Cursor kept in the file at path, holding the seq
// in decimal. Store replaces the file atomically: a temporary file in the
// same directory, fsynced, renamed over it, the directory fsynced.
func FileCursor(path string) Cursor { return fileCursor(path) }

type fileCursor string

func (c fileCursor) Load(ctx context.Context) (uint64, error) {
	b, err := os.ReadFile(string(c))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("audit: cursor: %w", err)
	}
	seq, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("audit: cursor %s: %w", string(c), err)
	}
	return seq, nil
}

func (c fileCursor) Store(ctx context.Context, seq uint64) error {
	path := string(c)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("audit: cursor: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("audit: cursor: %w", err)
	}
	_, err = tmp.WriteString(strconv.FormatUint(seq, 10) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("audit: cursor: %w", err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("audit: cursor: %w", err)
	}
	return nil
}
