package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
)

// Session is one interaction with a workflow (UAIP-0.1 "Session"): where
// it stands and its key-value state. State keys are flat strings; a dotted
// key such as "user.email" is one literal key.
type Session struct {
	ID       string
	Workflow string
	Stage    string
	State    map[string]any
	// Version counts committed changes; stores use it to detect
	// concurrent writers (compare-and-swap).
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when the session lapses; zero means never.
	ExpiresAt time.Time
}

// Clone returns a copy whose State map can be changed independently
// (values are shared; state values are treated as immutable JSON values).
func (s *Session) Clone() *Session {
	c := *s
	c.State = maps.Clone(s.State)
	if c.State == nil {
		c.State = map[string]any{}
	}
	return &c
}

// Expired reports whether the session has lapsed at now.
func (s *Session) Expired(now time.Time) bool {
	return !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt)
}

type sessionJSON struct {
	SessionID    string         `json:"session_id"`
	Workflow     string         `json:"workflow"`
	CurrentStage string         `json:"current_stage"`
	State        map[string]any `json:"state"`
	Version      int64          `json:"version"`
	CreatedAt    time.Time      `json:"created_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	ExpiresAt    *time.Time     `json:"expires_at,omitempty"`
}

// MarshalJSON writes the session as GET /api/sessions/{id} returns it:
// {session_id, workflow, current_stage, state, version, created_at,
// updated_at, expires_at?}.
func (s *Session) MarshalJSON() ([]byte, error) {
	j := sessionJSON{s.ID, s.Workflow, s.Stage, s.State, s.Version, s.CreatedAt.UTC(), s.UpdatedAt.UTC(), nil}
	if j.State == nil {
		j.State = map[string]any{}
	}
	if !s.ExpiresAt.IsZero() {
		t := s.ExpiresAt.UTC()
		j.ExpiresAt = &t
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (s *Session) UnmarshalJSON(data []byte) error {
	var j sessionJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*s = Session{ID: j.SessionID, Workflow: j.Workflow, Stage: j.CurrentStage, State: j.State, Version: j.Version,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
	if j.ExpiresAt != nil {
		s.ExpiresAt = *j.ExpiresAt
	}
	return nil
}

// SessionStore persists sessions. Implementations are safe for concurrent
// use; internal/memstore and internal/sqlstore (SQLite, PostgreSQL) provide
// them, and workflow/sessiontest is the suite they all pass.
//
// Durability: when Create or Update returns nil, the change survives a
// crash of the process (and, for the SQL stores, of the machine: it is
// fsynced). Several server processes may share one store; Update's
// compare-and-swap keeps them from overwriting each other.
//
// Stores keep times at millisecond resolution and state values in their
// JSON form; expiry in Get is judged by the store's wall clock (the engine
// checks again with its own).
type SessionStore interface {
	// Create stores a new session as version 1 (whatever s.Version says).
	// It fails with ErrConflict when the ID exists.
	Create(ctx context.Context, s *Session) error
	// Get returns a copy of the session, or an error wrapping
	// ErrSessionNotFound when it does not exist or has expired.
	Get(ctx context.Context, id string) (*Session, error)
	// Update stores s if the stored session's version is s.Version-1
	// (the caller increments Version); otherwise it fails with ErrConflict
	// (ErrSessionNotFound when the session is gone).
	Update(ctx context.Context, s *Session) error
	// Delete removes a session; a missing one is not an error.
	Delete(ctx context.Context, id string) error
	// DeleteExpired removes the sessions expired at now and returns how
	// many it removed.
	DeleteExpired(ctx context.Context, now time.Time) (int, error)
}

// SessionLister is an optional interface of a SessionStore: the live
// (unexpired) sessions of one workflow, newest first, a page at a time.
// internal/memstore and internal/sqlstore implement it; Engine.ListSessions
// uses it.
type SessionLister interface {
	// ListSessions returns at most limit sessions of workflow created
	// before the position cursor names ("" for the newest), and the
	// cursor of the next page ("" when there is none). Cursors are
	// opaque; a malformed one is an error.
	ListSessions(ctx context.Context, workflow, cursor string, limit int) ([]*Session, string, error)
}

// SessionCursor is the cursor of the page after s in a SessionLister's
// order (newest created first, then by ID): the creation time in Unix
// milliseconds and the ID.
func SessionCursor(s *Session) string {
	return strconv.FormatInt(s.CreatedAt.UnixMilli(), 10) + ":" + s.ID
}

// ParseSessionCursor splits a SessionCursor; "" is the start.
func ParseSessionCursor(c string) (createdMS int64, id string, err error) {
	if c == "" {
		return 0, "", nil
	}
	ms, id, ok := strings.Cut(c, ":")
	if ok {
		createdMS, err = strconv.ParseInt(ms, 10, 64)
	}
	if !ok || err != nil || id == "" {
		return 0, "", fmt.Errorf("workflow: %q is not a session cursor", c)
	}
	return createdMS, id, nil
}
