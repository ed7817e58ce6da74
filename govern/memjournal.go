package govern

import (
	"context"
	"fmt"
	"iter"
	"sync"
)

// memoryJournal is NewMemoryJournal's journal.
type memoryJournal struct {
	mu     sync.RWMutex
	recs   []Record
	unique map[string]bool
	closed bool
}

// NewMemoryJournal returns an empty Journal in memory: chained and
// checked like the others, but gone with the process. It is the journal
// of a Governor without Options.Journal, and useful in tests.
func NewMemoryJournal() Journal { return newMemoryJournal() }

func newMemoryJournal() *memoryJournal { return &memoryJournal{unique: map[string]bool{}} }

// Append implements Journal; sync has no meaning in memory.
func (j *memoryJournal) Append(ctx context.Context, _ bool, recs ...*Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return fmt.Errorf("govern: journal is closed")
	}
	batch := map[string]bool{}
	for _, r := range recs {
		if r.Unique == "" {
			continue
		}
		if j.unique[r.Unique] || batch[r.Unique] {
			return fmt.Errorf("govern: unique key %q: %w", r.Unique, ErrDuplicate)
		}
		batch[r.Unique] = true
	}
	var prev *Record
	if n := len(j.recs); n > 0 {
		prev = &j.recs[n-1]
	}
	sealed := make([]Record, 0, len(recs))
	for _, r := range recs {
		if err := Seal(prev, r); err != nil {
			return err
		}
		sealed = append(sealed, *r)
		prev = &sealed[len(sealed)-1]
	}
	j.recs = append(j.recs, sealed...)
	for k := range batch {
		j.unique[k] = true
	}
	return nil
}

// Records implements Journal.
func (j *memoryJournal) Records(ctx context.Context, from uint64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if from == 0 {
			from = 1
		}
		for i := from - 1; ; i++ {
			if err := ctx.Err(); err != nil {
				yield(Record{}, err)
				return
			}
			j.mu.RLock()
			if j.closed {
				j.mu.RUnlock()
				yield(Record{}, fmt.Errorf("govern: journal is closed"))
				return
			}
			if i >= uint64(len(j.recs)) {
				j.mu.RUnlock()
				return
			}
			r := j.recs[i]
			j.mu.RUnlock()
			if !yield(r, nil) {
				return
			}
		}
	}
}

// Close implements Journal.
func (j *memoryJournal) Close() error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	return nil
}
