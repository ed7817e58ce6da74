// Package uiapsession is the persistence of app-side UIAP sessions (UIAP
// Core 0.1 at uiap.dev, §7 and §8.2): what a uicontrol.App needs to let a
// session whose transport was lost be resumed by another App sharing the
// store — another replica of a server on one PostgreSQL database.
//
// A stored session is a row with a version. The App that holds the
// session (its owner) writes with the version it read; a resume (Claim)
// checks the resume token and bumps the version, so that the former
// owner's later writes fail with ErrConflict and it lets go. Of two
// resumes with one token exactly one succeeds: the token is replaced in
// the same write. The events the app sent are kept, numbered by seq, so
// that the new owner replays those the agent missed.
//
// Implementations: NewMemory (one process; internal/memstore's),
// internal/sqlstore (SQLite, PostgreSQL). Package uiapsessiontest is the
// suite they pass.
package uiapsession

import (
	"context"
	"errors"
	"time"
)

// Errors of a Store.
var (
	// ErrNotFound: no session with that ID, or it expired.
	ErrNotFound = errors.New("uiapsession: session not found")
	// ErrConflict: the write's condition failed — the ID exists already
	// (Create), the resume token does not match (Claim), or the session is
	// no longer at the version the writer holds (it was claimed elsewhere,
	// deleted or swept).
	ErrConflict = errors.New("uiapsession: session changed")
)

// Session is one stored session.
type Session struct {
	ID string
	// Version is 1 when created and bumped by every Claim.
	Version int64
	// TokenHash is the SHA-256 of the current resume token; nil: the
	// session cannot be resumed.
	TokenHash []byte
	// Seq is the seq of the last event appended (0: none).
	Seq int64
	// State is uicontrol's encoding of what the handshake settled (JSON).
	State []byte
	// App is the embedding application's data (JSON or empty), kept as
	// given: package uiapworkflow keeps the workflow and UAIP session a
	// UIAP session drives.
	App []byte
	// ExpiresAt is when the session stops being resumable; Sweep removes
	// it after. Kept to the millisecond.
	ExpiresAt time.Time
}

// Event is an event the app sent, as its encoded envelope.
type Event struct {
	Seq  int64
	Data []byte
}

// Store keeps sessions. Implementations are safe for concurrent use, also
// by several processes when they share a database. A session ID that is
// not valid UTF-8 or holds a NUL byte is never stored: Get and Claim
// report ErrNotFound for it.
type Store interface {
	// Create stores a new session at version 1 (s.Version is ignored).
	// ErrConflict if a session with the ID exists, even expired (IDs are
	// UUIDv4: they are never reused).
	Create(ctx context.Context, s *Session) error
	// Get returns the session unless it is missing or expired at now
	// (ErrNotFound).
	Get(ctx context.Context, id string, now time.Time) (*Session, error)
	// Claim resumes the session: if it exists, has not expired at now,
	// and its token hash is tokenHash, it sets the token hash to newHash
	// (nil: none), the expiry to expires, bumps the version and returns
	// the session as written. ErrNotFound if missing or expired,
	// ErrConflict if the token does not match; nothing is changed then.
	Claim(ctx context.Context, id string, tokenHash, newHash []byte, expires, now time.Time) (*Session, error)
	// Append adds the event ev of the session at version; ev.Seq must be
	// the session's Seq + 1, which it becomes. The session keeps at least
	// its keep latest events. ErrConflict if the session is not at
	// version or ev.Seq is not the next.
	Append(ctx context.Context, id string, version int64, ev Event, keep int) error
	// Events returns the kept events of the session with a seq above
	// after, in order.
	Events(ctx context.Context, id string, after int64) ([]Event, error)
	// Touch sets the expiry of the session at version (also of one that
	// expired but was not swept yet). ErrConflict if it is not at version.
	Touch(ctx context.Context, id string, version int64, expires time.Time) error
	// Delete removes the session at version and its events. ErrConflict
	// if it is not at version.
	Delete(ctx context.Context, id string, version int64) error
	// Sweep removes the sessions expired at now, with their events, and
	// returns how many.
	Sweep(ctx context.Context, now time.Time) (int, error)
}
