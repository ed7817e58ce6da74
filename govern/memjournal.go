package govern

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/recordkind"
)

// memoryJournal is NewMemoryJournal's journal.
type memoryJournal struct {
	mu sync.RWMutex
	// recs are the records in chunks of memChunk (the last one filling),
	// so that a long journal grows without copying what it holds.
	recs   [][]Record
	n      int // records in recs
	unique map[string]bool
	leases map[string]*memLease
	closed bool
}

// NewMemoryJournal returns an empty Journal in memory: chained and
// checked like the others, but gone with the process. It is the journal
// of a Governor without Options.Journal, and useful in tests.
func NewMemoryJournal() Journal { return newMemoryJournal() }

func newMemoryJournal() *memoryJournal {
	return &memoryJournal{unique: map[string]bool{}, leases: map[string]*memLease{}}
}

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
	for _, r := range recs {
		if l := j.leases[r.RequestID]; r.Epoch > 0 && (l == nil || l.state != leaseRunning || l.epoch != r.Epoch) {
			return fmt.Errorf("govern: run %s at lease epoch %d: %w", r.RequestID, r.Epoch, ErrLeased)
		}
	}
	// Sealed in place at the end of j.recs, and cut back if one fails.
	n := j.n
	for _, r := range recs {
		var prev *Record
		if j.n > 0 {
			prev = j.at(j.n - 1)
		}
		if err := Seal(prev, r); err != nil {
			j.truncate(n)
			return err
		}
		j.push(*r)
	}
	for k := range batch {
		j.unique[k] = true
	}
	for _, r := range recs {
		switch l := j.leases[r.RequestID]; {
		case l != nil && r.Kind == recordkind.ApprovalDecided:
			l.decided = r.Seq
		case r.Epoch == 0 || l == nil:
		case r.Kind == recordkind.Paused:
			l.state = leaseReleased
		case r.Kind == recordkind.Transition && r.To.Terminal():
			l.state = leaseEnded
		}
	}
	return nil
}

// memChunk is how many records a chunk of memoryJournal.recs holds.
const memChunk = 256

// at returns record i (from 0).
func (j *memoryJournal) at(i int) *Record { return &j.recs[i/memChunk][i%memChunk] }

// push appends r.
func (j *memoryJournal) push(r Record) {
	if j.n%memChunk == 0 && j.n/memChunk == len(j.recs) {
		capacity := memChunk
		if j.n == 0 {
			capacity = 8 // a short journal stays small
		}
		j.recs = append(j.recs, make([]Record, 0, capacity))
	}
	last := &j.recs[len(j.recs)-1]
	*last = append(*last, r)
	j.n++
}

// truncate cuts the journal back to its first n records.
func (j *memoryJournal) truncate(n int) {
	for j.n > n {
		j.n--
		last := &j.recs[j.n/memChunk]
		(*last)[len(*last)-1] = Record{}
		*last = (*last)[:len(*last)-1]
	}
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
			if i >= uint64(j.n) {
				j.mu.RUnlock()
				return
			}
			r := *j.at(int(i))
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

// The memory journal's leases (Options.Lease), for governors sharing one
// journal in one process — replicas in tests — on the process's clock
// (a fake one inside testing/synctest).

// Lease states.
const (
	leaseRunning = iota
	leaseReleased
	leaseEnded
)

type memLease struct {
	owner   string
	epoch   uint64
	state   int
	expires time.Time
	decided uint64 // the seq of a decision journaled since the last claim; 0: none
}

// Claim implements leaser.
func (j *memoryJournal) Claim(_ context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	l := j.leases[key]
	switch {
	case l == nil:
		j.leases[key] = &memLease{owner: owner, epoch: 1, expires: time.Now().Add(ttl)}
		return 1, nil
	case l.state == leaseEnded:
		return 0, ErrRunClosed
	case l.state == leaseRunning && l.owner != owner && time.Now().Before(l.expires):
		return 0, fmt.Errorf("%w (%s)", ErrLeased, l.owner)
	}
	l.owner, l.epoch, l.state, l.expires, l.decided = owner, l.epoch+1, leaseRunning, time.Now().Add(ttl), 0
	return l.epoch, nil
}

// NextExpiry implements leaser.
func (j *memoryJournal) NextExpiry(_ context.Context, owner string) (time.Duration, bool, error) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	var next time.Time
	for key, l := range j.leases {
		if l.state == leaseRunning && l.owner != owner && !strings.Contains(key, ":") && (next.IsZero() || l.expires.Before(next)) {
			next = l.expires
		}
	}
	if next.IsZero() {
		return 0, false, nil
	}
	return max(time.Until(next), 0), true, nil
}

// Decided implements leaser.
func (j *memoryJournal) Decided(_ context.Context, limit int) ([]string, error) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	var keys []string
	for key, l := range j.leases {
		if l.state == leaseReleased && l.decided > 0 {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(j.leases[a].decided, j.leases[b].decided) })
	return keys[:min(len(keys), max(limit, 0))], nil
}

// ClaimExpired implements leaser.
func (j *memoryJournal) ClaimExpired(_ context.Context, owner string, ttl time.Duration, limit int) (map[string]uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]uint64{}
	now := time.Now()
	for key, l := range j.leases {
		if len(out) >= limit {
			break
		}
		if l.state == leaseRunning && !strings.Contains(key, ":") && now.After(l.expires) {
			l.owner, l.epoch, l.expires = owner, l.epoch+1, now.Add(ttl)
			out[key] = l.epoch
		}
	}
	return out, nil
}

// Renew implements leaser.
func (j *memoryJournal) Renew(_ context.Context, owner string, ttl time.Duration, held map[string]uint64) ([]string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var lost []string
	for key, epoch := range held {
		l := j.leases[key]
		if l == nil || l.state != leaseRunning || l.owner != owner || l.epoch != epoch {
			lost = append(lost, key)
			continue
		}
		l.expires = time.Now().Add(ttl)
	}
	return lost, nil
}

// Release implements leaser.
func (j *memoryJournal) Release(_ context.Context, key string, epoch uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if l := j.leases[key]; l != nil && l.state == leaseRunning && l.epoch == epoch {
		l.state = leaseReleased
	}
	return nil
}
