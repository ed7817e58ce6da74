package streamlog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Memory is a Store in the process's memory: Servers of one process
// that share it resume each other's streams (what the tests of several
// replicas use). Its clock is time.Now.
type Memory struct {
	mu       sync.Mutex
	streams  map[Key]*memStream
	requests map[[2]string]Key // (owner, request id) → key
	watchers map[Key]map[chan struct{}]struct{}
}

type memStream struct {
	head    Head
	deltas  [][]byte // delta_seq first … head.Next-1
	first   int64
	lease   time.Time
	expires time.Time
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{streams: map[Key]*memStream{}, requests: map[[2]string]Key{}, watchers: map[Key]map[chan struct{}]struct{}{}}
}

// live returns k's stream unless absent or expired; m.mu is held.
func (m *Memory) live(k Key, now time.Time) *memStream {
	st := m.streams[k]
	if st == nil || !now.Before(st.expires) {
		return nil
	}
	return st
}

// head returns st's head as read at now.
func (st *memStream) headAt(now time.Time) Head {
	h := st.head
	h.Alive = now.Before(st.lease)
	return h
}

// remove deletes k's stream; m.mu is held.
func (m *Memory) remove(k Key) {
	if st := m.streams[k]; st != nil {
		delete(m.requests, [2]string{k.Owner, st.head.RequestID})
		delete(m.streams, k)
	}
}

// signal wakes k's watchers; m.mu is held.
func (m *Memory) signal(k Key) {
	for c := range m.watchers[k] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Create implements Store.Create.
func (m *Memory) Create(ctx context.Context, h Head, t Terms) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	rk := [2]string{h.Owner, h.RequestID}
	if m.live(h.Key, now) != nil {
		return fmt.Errorf("stream %q of %s: %w", h.ID, h.Owner, ErrExists)
	}
	if k, ok := m.requests[rk]; ok && m.live(k, now) != nil {
		return fmt.Errorf("request %s of %s: %w", h.RequestID, h.Owner, ErrExists)
	}
	m.remove(h.Key)
	if k, ok := m.requests[rk]; ok {
		m.remove(k)
	}
	lease := now.Add(t.Lease)
	m.streams[h.Key] = &memStream{
		head:  Head{Key: h.Key, RequestID: h.RequestID, Acked: -1},
		lease: lease, expires: lease.Add(t.Linger),
	}
	m.requests[rk] = h.Key
	m.signal(h.Key)
	return nil
}

// Append implements Store.Append.
func (m *Memory) Append(ctx context.Context, k Key, first int64, deltas [][]byte, final bool, keep int, t Terms) (Head, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.live(k, now)
	switch {
	case st == nil:
		return Head{}, fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrNotFound)
	case st.head.Final || first != st.head.Next:
		return Head{}, fmt.Errorf("stream %q of %s: append at %d, next %d, final %v: %w", k.ID, k.Owner, first, st.head.Next, st.head.Final, ErrConflict)
	}
	for _, d := range deltas {
		st.deltas = append(st.deltas, slices.Clone(d))
	}
	st.head.Next += int64(len(deltas))
	if drop := len(st.deltas) - max(keep, 0); drop > 0 {
		st.deltas = slices.Delete(st.deltas, 0, drop)
		st.first += int64(drop)
	}
	st.lease = now.Add(t.Lease)
	st.expires = st.lease.Add(t.Linger)
	if final && len(deltas) > 0 {
		st.head.Final = true
		st.expires = now.Add(t.Linger)
	}
	m.signal(k)
	return st.headAt(now), nil
}

// Renew implements Store.Renew.
func (m *Memory) Renew(ctx context.Context, k Key, t Terms) (Head, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.live(k, now)
	if st == nil {
		return Head{}, fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrNotFound)
	}
	if !st.head.Final {
		st.lease = now.Add(t.Lease)
		st.expires = st.lease.Add(t.Linger)
	}
	return st.headAt(now), nil
}

// Head implements Store.Head.
func (m *Memory) Head(ctx context.Context, k Key) (Head, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.live(k, now)
	if st == nil {
		return Head{}, fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrNotFound)
	}
	return st.headAt(now), nil
}

// Request implements Store.Request.
func (m *Memory) Request(ctx context.Context, owner, requestID string) (Head, error) {
	m.mu.Lock()
	k, ok := m.requests[[2]string{owner, requestID}]
	m.mu.Unlock()
	if !ok {
		return Head{}, fmt.Errorf("request %s of %s: %w", requestID, owner, ErrNotFound)
	}
	return m.Head(ctx, k)
}

// Read implements Store.Read.
func (m *Memory) Read(ctx context.Context, k Key, from int64, limit int) ([][]byte, Head, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.live(k, now)
	if st == nil {
		return nil, Head{}, fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrNotFound)
	}
	i := max(from-st.first, 0)
	var out [][]byte
	for ; i < int64(len(st.deltas)) && len(out) < limit; i++ {
		out = append(out, slices.Clone(st.deltas[i]))
	}
	return out, st.headAt(now), nil
}

// Ack implements Store.Ack.
func (m *Memory) Ack(ctx context.Context, k Key, seq int64) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.live(k, now)
	if st == nil {
		return fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrNotFound)
	}
	if seq > st.head.Acked {
		st.head.Acked = seq
		m.signal(k)
	}
	return nil
}

// Cancel implements Store.Cancel.
func (m *Memory) Cancel(ctx context.Context, k Key) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.live(k, now)
	switch {
	case st == nil:
		return fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrNotFound)
	case st.head.Final || st.head.Cancelled:
		return fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrEnded)
	}
	st.head.Cancelled = true
	m.signal(k)
	return nil
}

// EndDead implements Store.EndDead.
func (m *Memory) EndDead(ctx context.Context, k Key, seq int64, delta []byte, linger time.Duration) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.live(k, now)
	switch {
	case st == nil:
		return fmt.Errorf("stream %q of %s: %w", k.ID, k.Owner, ErrNotFound)
	case st.head.Final || seq != st.head.Next || now.Before(st.lease):
		return fmt.Errorf("stream %q of %s: end at %d, next %d, final %v: %w", k.ID, k.Owner, seq, st.head.Next, st.head.Final, ErrConflict)
	}
	st.deltas = append(st.deltas, slices.Clone(delta))
	st.head.Next++
	st.head.Final = true
	st.expires = now.Add(linger)
	m.signal(k)
	return nil
}

// Delete implements Store.Delete.
func (m *Memory) Delete(ctx context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove(k)
	m.signal(k)
	return nil
}

// Sweep implements Store.Sweep.
func (m *Memory) Sweep(ctx context.Context) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.streams {
		if m.live(k, now) == nil {
			m.remove(k)
		}
	}
	return nil
}

// Watch implements Store.Watch.
func (m *Memory) Watch(k Key) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	m.mu.Lock()
	if m.watchers[k] == nil {
		m.watchers[k] = map[chan struct{}]struct{}{}
	}
	m.watchers[k][c] = struct{}{}
	m.mu.Unlock()
	return c, func() {
		m.mu.Lock()
		delete(m.watchers[k], c)
		if len(m.watchers[k]) == 0 {
			delete(m.watchers, k)
		}
		m.mu.Unlock()
	}
}

var _ Store = (*Memory)(nil)
