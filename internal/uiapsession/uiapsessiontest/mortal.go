package uiapsessiontest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
)

// ErrGone is what a Mortal store answers once killed.
var ErrGone = errors.New("uiapsessiontest: the process is gone")

// Mortal is a replica's access to a store shared with other replicas:
// after Kill every call fails with ErrGone, as the calls of a process
// killed (SIGKILL) would stop reaching the database — without a word to
// the store, which keeps what it had.
type Mortal struct {
	uiapsession.Store
	dead atomic.Bool
}

// Kill cuts m off the store for good.
func (m *Mortal) Kill() { m.dead.Store(true) }

// Create is the Store's, or ErrGone once m is killed.
func (m *Mortal) Create(ctx context.Context, s *uiapsession.Session) error {
	if m.dead.Load() {
		return ErrGone
	}
	return m.Store.Create(ctx, s)
}

// Get is the Store's, or ErrGone once m is killed.
func (m *Mortal) Get(ctx context.Context, id string, now time.Time) (*uiapsession.Session, error) {
	if m.dead.Load() {
		return nil, ErrGone
	}
	return m.Store.Get(ctx, id, now)
}

// Claim is the Store's, or ErrGone once m is killed.
func (m *Mortal) Claim(ctx context.Context, id string, h, next []byte, expires, now time.Time) (*uiapsession.Session, error) {
	if m.dead.Load() {
		return nil, ErrGone
	}
	return m.Store.Claim(ctx, id, h, next, expires, now)
}

// Append is the Store's, or ErrGone once m is killed.
func (m *Mortal) Append(ctx context.Context, id string, version int64, ev uiapsession.Event, keep int) error {
	if m.dead.Load() {
		return ErrGone
	}
	return m.Store.Append(ctx, id, version, ev, keep)
}

// Events is the Store's, or ErrGone once m is killed.
func (m *Mortal) Events(ctx context.Context, id string, after int64) ([]uiapsession.Event, error) {
	if m.dead.Load() {
		return nil, ErrGone
	}
	return m.Store.Events(ctx, id, after)
}

// Touch is the Store's, or ErrGone once m is killed.
func (m *Mortal) Touch(ctx context.Context, id string, version int64, expires time.Time) error {
	if m.dead.Load() {
		return ErrGone
	}
	return m.Store.Touch(ctx, id, version, expires)
}

// Delete is the Store's, or ErrGone once m is killed.
func (m *Mortal) Delete(ctx context.Context, id string, version int64) error {
	if m.dead.Load() {
		return ErrGone
	}
	return m.Store.Delete(ctx, id, version)
}

// Sweep is the Store's, or ErrGone once m is killed.
func (m *Mortal) Sweep(ctx context.Context, now time.Time) (int, error) {
	if m.dead.Load() {
		return 0, ErrGone
	}
	return m.Store.Sweep(ctx, now)
}
