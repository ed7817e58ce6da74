package envelope

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ReplayGuard refuses envelopes seen before and envelopes too far from
// now (§6, replay protection). Check is called for an envelope whose
// signature verified, so that unauthenticated traffic cannot fill the
// guard; it may be called concurrently.
type ReplayGuard interface {
	// Check accepts the envelope (from, id) stamped ts once: it returns
	// nil and remembers the pair, or an *Error — 4.01 wrapping
	// ErrReplayed for a pair already accepted, 4.01 for a ts out of
	// the window, 5.04 when the guard cannot remember more now.
	Check(ctx context.Context, from, id string, ts time.Time) error
}

// ReplayStore remembers (from, id) pairs until they expire: the
// persistence hook of ReplayWindow. NewMemoryReplayStore keeps them in
// memory, an append-only file (tests); a database store lets
// several servers share one window.
type ReplayStore interface {
	// Remember records (from, id) until expires (inclusive). If the
	// pair is recorded with an expiry not before now, it records nothing
	// and returns an error wrapping ErrReplayed. Of concurrent calls with one pair,
	// at most one succeeds. Once Remember returns nil the pair is as
	// durable as the store is: a store that survives a restart must
	// not forget it. Remember may be called concurrently.
	Remember(ctx context.Context, from, id string, expires, now time.Time) error
}

// DefaultReplayWindow is ReplayWindow's default skew limit.
const DefaultReplayWindow = 5 * time.Minute

// ReplayOptions configures a ReplayWindow; the zero value works.
type ReplayOptions struct {
	// Window is how far ts may be from now, either way (inclusive);
	// default DefaultReplayWindow. A pair is remembered until its ts +
	// Window, after which its envelope is refused as too old anyway.
	Window time.Duration
	// Store remembers the pairs; default NewMemoryReplayStore's, with its
	// default capacity, which a restart empties.
	Store ReplayStore
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// ReplayWindow is a ReplayGuard: it refuses a ts more than Window away
// from now and a (from, id) pair its store remembers. Ids are compared
// in their bare lowercase form (ParseID), so the URN and bare spellings
// of one id are one id.
type ReplayWindow struct {
	window time.Duration
	store  ReplayStore
	now    func() time.Time
}

// NewReplayWindow returns a ReplayWindow; opts may be nil.
func NewReplayWindow(opts *ReplayOptions) *ReplayWindow {
	var o ReplayOptions
	if opts != nil {
		o = *opts
	}
	if o.Window <= 0 {
		o.Window = DefaultReplayWindow
	}
	if o.Store == nil {
		o.Store = NewMemoryReplayStore(0)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &ReplayWindow{window: o.Window, store: o.Store, now: o.Now}
}

// Check implements ReplayGuard.
func (w *ReplayWindow) Check(ctx context.Context, from, id string, ts time.Time) error {
	now := w.now()
	if err := CheckSkew(ts, now, w.window); err != nil {
		return err
	}
	key, ok := ParseID(id)
	if !ok {
		return NewError(CodeBadRequest, "id is not a UUID", nil)
	}
	err := w.store.Remember(ctx, from, key, ts.Add(w.window), now)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrReplayed):
		return unauthenticated("envelope replayed: this (from, id) was accepted before", ErrReplayed)
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		return e
	}
	return NewError(CodeBusy, "cannot record the envelope now", err)
}

// CheckSkew refuses (4.01) a ts more than max away from now, either way.
func CheckSkew(ts, now time.Time, max time.Duration) error {
	d := now.Sub(ts)
	switch {
	case d > max:
		return unauthenticated(fmt.Sprintf("ts is %s old, more than the %s allowed", d.Round(time.Second), max), nil)
	case -d > max:
		return unauthenticated(fmt.Sprintf("ts is %s ahead, more than the %s allowed", (-d).Round(time.Second), max), nil)
	}
	return nil
}

// defaultReplayCapacity is NewMemoryReplayStore's default capacity.
const defaultReplayCapacity = 1 << 20

// memoryReplayStore is NewMemoryReplayStore's store.
type memoryReplayStore struct {
	mu       sync.Mutex
	capacity int
	seen     map[replayKey]time.Time
	byExpiry expiryHeap
}

type replayKey struct{ from, id string }

// NewMemoryReplayStore returns an empty ReplayStore in memory, holding
// at most capacity unexpired pairs (1 << 20 when capacity <= 0); when
// full it refuses new pairs (5.04, retryable) rather than forget one
// early. It is safe for concurrent use; a restart empties it.
func NewMemoryReplayStore(capacity int) ReplayStore { return newMemoryReplayStore(capacity) }

func newMemoryReplayStore(capacity int) *memoryReplayStore {
	if capacity <= 0 {
		capacity = defaultReplayCapacity
	}
	return &memoryReplayStore{capacity: capacity, seen: map[replayKey]time.Time{}}
}

// Remember implements ReplayStore.
func (s *memoryReplayStore) Remember(_ context.Context, from, id string, expires, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remember(replayKey{from, id}, expires, now)
}

func (s *memoryReplayStore) remember(k replayKey, expires, now time.Time) error {
	s.expire(now)
	if exp, ok := s.seen[k]; ok && !now.After(exp) {
		return ErrReplayed
	}
	if len(s.seen) >= s.capacity {
		return NewError(CodeBusy, "too many envelopes in the replay window", nil)
	}
	s.seen[k] = expires
	heap.Push(&s.byExpiry, expiryEntry{k, expires})
	return nil
}

// forget undoes remember (a durable store that could not persist).
func (s *memoryReplayStore) forget(k replayKey) { delete(s.seen, k) }

// expire drops the pairs expired at now.
func (s *memoryReplayStore) expire(now time.Time) {
	for len(s.byExpiry) > 0 && s.byExpiry[0].expires.Before(now) {
		e := heap.Pop(&s.byExpiry).(expiryEntry)
		if exp, ok := s.seen[e.key]; ok && exp.Equal(e.expires) {
			delete(s.seen, e.key)
		}
	}
}

// len returns the number of pairs held, expired ones included until the
// next Remember drops them.
func (s *memoryReplayStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

type expiryEntry struct {
	key     replayKey
	expires time.Time
}

type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
