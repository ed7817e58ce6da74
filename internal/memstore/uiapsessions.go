package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
)

// UIAPSessions returns the store's uiapsession.Store: the app-side UIAP
// sessions (UIAP Core 0.1 at uiap.dev, §8.2) of every uicontrol.App given
// it, in memory. Times are kept to the millisecond, as in the database.
func (s *Store) UIAPSessions() uiapsession.Store {
	s.uiapOnce.Do(func() { s.uiap = &uiapSessions{m: map[string]*uiapEntry{}} })
	return s.uiap
}

type uiapEntry struct {
	s      uiapsession.Session // its slices never modified once stored
	events []uiapsession.Event
}

type uiapSessions struct {
	mu sync.Mutex
	m  map[string]*uiapEntry
}

func (u *uiapSessions) live(id string, now time.Time) *uiapEntry {
	e := u.m[id]
	if e == nil || !e.s.ExpiresAt.After(now) {
		return nil
	}
	return e
}

func copySession(s *uiapsession.Session) *uiapsession.Session {
	c := *s
	c.TokenHash, c.State, c.App = bytes.Clone(s.TokenHash), bytes.Clone(s.State), bytes.Clone(s.App)
	return &c
}

func (u *uiapSessions) Create(_ context.Context, s *uiapsession.Session) error {
	if !validText(s.ID) || s.ID == "" {
		return fmt.Errorf("memstore: invalid UIAP session ID %q", s.ID)
	}
	c := copySession(s)
	c.Version, c.ExpiresAt = 1, s.ExpiresAt.Truncate(time.Millisecond)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[s.ID] != nil {
		return uiapsession.ErrConflict
	}
	u.m[s.ID] = &uiapEntry{s: *c}
	return nil
}

func (u *uiapSessions) Get(_ context.Context, id string, now time.Time) (*uiapsession.Session, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.live(id, now)
	if e == nil {
		return nil, uiapsession.ErrNotFound
	}
	return copySession(&e.s), nil
}

func (u *uiapSessions) Claim(_ context.Context, id string, tokenHash, newHash []byte, expires, now time.Time) (*uiapsession.Session, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.live(id, now)
	if e == nil {
		return nil, uiapsession.ErrNotFound
	}
	if e.s.TokenHash == nil || !bytes.Equal(e.s.TokenHash, tokenHash) {
		return nil, uiapsession.ErrConflict
	}
	e.s.Version++
	e.s.TokenHash, e.s.ExpiresAt = bytes.Clone(newHash), expires.Truncate(time.Millisecond)
	return copySession(&e.s), nil
}

// at returns the session id at version, or nil.
func (u *uiapSessions) at(id string, version int64) *uiapEntry {
	if e := u.m[id]; e != nil && e.s.Version == version {
		return e
	}
	return nil
}

func (u *uiapSessions) Append(_ context.Context, id string, version int64, ev uiapsession.Event, keep int) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.at(id, version)
	if e == nil || ev.Seq != e.s.Seq+1 {
		return uiapsession.ErrConflict
	}
	e.s.Seq = ev.Seq
	e.events = append(e.events, uiapsession.Event{Seq: ev.Seq, Data: bytes.Clone(ev.Data)})
	if n := len(e.events) - max(keep, 1); n > 0 {
		e.events = slices.Delete(e.events, 0, n)
	}
	return nil
}

func (u *uiapSessions) Events(_ context.Context, id string, after int64) ([]uiapsession.Event, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.m[id]
	if e == nil {
		return nil, nil
	}
	var out []uiapsession.Event
	for _, ev := range e.events {
		if ev.Seq > after {
			out = append(out, uiapsession.Event{Seq: ev.Seq, Data: bytes.Clone(ev.Data)})
		}
	}
	return out, nil
}

func (u *uiapSessions) Touch(_ context.Context, id string, version int64, expires time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.at(id, version)
	if e == nil {
		return uiapsession.ErrConflict
	}
	e.s.ExpiresAt = expires.Truncate(time.Millisecond)
	return nil
}

func (u *uiapSessions) Delete(_ context.Context, id string, version int64) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.at(id, version) == nil {
		return uiapsession.ErrConflict
	}
	delete(u.m, id)
	return nil
}

func (u *uiapSessions) Sweep(_ context.Context, now time.Time) (int, error) {
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
