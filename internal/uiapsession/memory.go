package uiapsession

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// NewMemory returns a Store in memory, for one process: an App's
// sessions then move only between Apps of the process (and tests). Times
// are kept to the millisecond, as in the database.
func NewMemory() Store { return &memory{m: map[string]*memoryEntry{}} }

type memoryEntry struct {
	s      Session // its slices never modified once stored
	events []Event
}

type memory struct {
	mu sync.Mutex
	m  map[string]*memoryEntry
}

func (u *memory) live(id string, now time.Time) *memoryEntry {
	e := u.m[id]
	if e == nil || !e.s.ExpiresAt.After(now) {
		return nil
	}
	return e
}

func clone(s *Session) *Session {
	c := *s
	c.TokenHash, c.State, c.App = bytes.Clone(s.TokenHash), bytes.Clone(s.State), bytes.Clone(s.App)
	return &c
}

func (u *memory) Create(_ context.Context, s *Session) error {
	if !validID(s.ID) {
		return fmt.Errorf("uiapsession: invalid session ID %q", s.ID)
	}
	c := clone(s)
	c.Version, c.ExpiresAt = 1, s.ExpiresAt.Truncate(time.Millisecond)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[s.ID] != nil {
		return ErrConflict
	}
	u.m[s.ID] = &memoryEntry{s: *c}
	return nil
}

func (u *memory) Get(_ context.Context, id string, now time.Time) (*Session, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.live(id, now)
	if e == nil {
		return nil, ErrNotFound
	}
	return clone(&e.s), nil
}

func (u *memory) Claim(_ context.Context, id string, tokenHash, newHash []byte, expires, now time.Time) (*Session, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.live(id, now)
	if e == nil {
		return nil, ErrNotFound
	}
	if e.s.TokenHash == nil || !bytes.Equal(e.s.TokenHash, tokenHash) {
		return nil, ErrConflict
	}
	e.s.Version++
	e.s.TokenHash, e.s.ExpiresAt = bytes.Clone(newHash), expires.Truncate(time.Millisecond)
	return clone(&e.s), nil
}

// at returns the session id at version, or nil.
func (u *memory) at(id string, version int64) *memoryEntry {
	if e := u.m[id]; e != nil && e.s.Version == version {
		return e
	}
	return nil
}

func (u *memory) Append(_ context.Context, id string, version int64, ev Event, keep int) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.at(id, version)
	if e == nil || ev.Seq != e.s.Seq+1 {
		return ErrConflict
	}
	e.s.Seq = ev.Seq
	e.events = append(e.events, Event{Seq: ev.Seq, Data: bytes.Clone(ev.Data)})
	if n := len(e.events) - max(keep, 1); n > 0 {
		e.events = slices.Delete(e.events, 0, n)
	}
	return nil
}

func (u *memory) Events(_ context.Context, id string, after int64) ([]Event, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.m[id]
	if e == nil {
		return nil, nil
	}
	var out []Event
	for _, ev := range e.events {
		if ev.Seq > after {
			out = append(out, Event{Seq: ev.Seq, Data: bytes.Clone(ev.Data)})
		}
	}
	return out, nil
}

func (u *memory) Touch(_ context.Context, id string, version int64, expires time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.at(id, version)
	if e == nil {
		return ErrConflict
	}
	e.s.ExpiresAt = expires.Truncate(time.Millisecond)
	return nil
}

func (u *memory) Delete(_ context.Context, id string, version int64) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.at(id, version) == nil {
		return ErrConflict
	}
	delete(u.m, id)
	return nil
}

func (u *memory) Sweep(_ context.Context, now time.Time) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for id, e := range u.m {
		if !e.s.ExpiresAt.After(now) {
			delete(u.m, id)
			n++
		}
	}
	return n, nil
}

// validID reports whether a session ID can be stored: not empty, UTF-8
// without NUL bytes (what PostgreSQL's TEXT takes).
func validID(id string) bool { return id != "" && utf8.ValidString(id) && !strings.ContainsRune(id, 0) }
