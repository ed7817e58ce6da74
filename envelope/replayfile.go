package envelope

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/durable"
)

// replayFile is a ReplayStore that survives a restart: the pairs are held
// in memory (NewMemoryReplayStore's) and appended to a file, one JSON line
// {"from","id","exp"} each, fsynced before Remember returns. Opening the
// file reloads the unexpired pairs and rewrites it without the expired
// ones; a torn last line (a crash during an append that was never
// acknowledged) is dropped. It is safe for concurrent use within one
// process; two processes must not open one file.
type replayFile struct {
	mu    sync.Mutex
	path  string
	mem   *memoryReplayStore
	f     *os.File
	lines int // records in the file
}

type replayRecord struct {
	From string `json:"from"`
	ID   string `json:"id"`
	Exp  int64  `json:"exp"` // Unix milliseconds, rounded up
}

// openReplayFile opens (creating it if need be) the replay file at path,
// holding at most capacity unexpired pairs (defaultReplayCapacity when
// capacity <= 0). now is the time expired records are dropped at.
func openReplayFile(path string, capacity int, now time.Time) (*replayFile, error) {
	r := &replayFile{path: path, mem: newMemoryReplayStore(capacity)}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for n, rest := 1, data; len(rest) > 0; n++ {
		line, tail, complete := bytes.Cut(rest, []byte{'\n'})
		rest = tail
		if !complete {
			break // torn append: never acknowledged
		}
		var rec replayRecord
		if err := json.Unmarshal(line, &rec); err != nil || rec.ID == "" {
			return nil, fmt.Errorf("envelope: replay file %s: line %d is corrupt", path, n)
		}
		exp := time.UnixMilli(rec.Exp)
		k := replayKey{rec.From, rec.ID}
		if exp.Before(now) {
			continue
		}
		if prev, ok := r.mem.seen[k]; ok && !exp.After(prev) {
			continue
		}
		r.mem.seen[k] = exp
		heap.Push(&r.mem.byExpiry, expiryEntry{k, exp})
	}
	if err := r.rewrite(); err != nil {
		return nil, err
	}
	return r, nil
}

// rewrite replaces the file by the pairs held, durably, and opens it for
// appending.
func (r *replayFile) rewrite() error {
	tmp := r.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for k, exp := range r.mem.seen {
		if err := enc.Encode(replayRecord{From: k.from, ID: k.id, Exp: ceilMilli(exp)}); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, r.path); err != nil {
		return err
	}
	if err := durable.SyncDir(filepath.Dir(r.path)); err != nil {
		return err
	}
	if r.f != nil {
		r.f.Close()
	}
	r.f, err = os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	r.lines = len(r.mem.seen)
	return nil
}

// Remember implements ReplayStore: the pair is on disk when it returns
// nil.
func (r *replayFile) Remember(ctx context.Context, from, id string, expires, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return errors.New("envelope: replay file is closed")
	}
	k := replayKey{from, id}
	if err := r.mem.remember(k, expires, now); err != nil {
		return err
	}
	line, err := json.Marshal(replayRecord{From: from, ID: id, Exp: ceilMilli(expires)})
	if err == nil {
		_, err = r.f.Write(append(line, '\n'))
	}
	if err == nil {
		err = r.f.Sync()
	}
	if err != nil {
		r.mem.forget(k)
		return fmt.Errorf("envelope: replay file: %w", err)
	}
	r.lines++
	if r.lines > 2*len(r.mem.seen)+1024 {
		// Compact: the file holds mostly expired pairs. A failure here
		// leaves the old file, which is still correct.
		if err := r.rewrite(); err != nil {
			return nil
		}
	}
	return nil
}

// Close closes the file.
func (r *replayFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

var _ io.Closer = (*replayFile)(nil)

// ceilMilli returns t in Unix milliseconds, rounded up: a pair may be
// remembered longer than asked, never shorter.
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}
