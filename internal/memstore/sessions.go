package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/workflow"
)

// Sessions returns the store's workflow.SessionStore (UAIP-0.1 sessions).
// It keeps each state as its JSON encoding and decodes it afresh on every
// Get, so that a caller never shares a map with the store, values read as
// they would from internal/sqlstore (numbers as float64, structs as objects),
// and an idle session costs little more than its JSON bytes. Times are
// kept to the millisecond, as in the database. Expiry is judged by the
// wall clock.
func (s *Store) Sessions() workflow.SessionStore { return s.sessions }

// sessionEntry is a stored session; its ID is the map key.
type sessionEntry struct {
	workflow, stage string
	state           []byte // JSON object; never modified once stored
	version         int64
	// Unix milliseconds; zeroMS is the zero time (for expires: never).
	created, updated, expires int64
}

var zeroMS = time.Time{}.UnixMilli()

func toMS(t time.Time) int64 { return t.UnixMilli() }

func fromMS(ms int64) time.Time {
	if ms == zeroMS {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// expired mirrors workflow.Session.Expired at millisecond precision.
func (e *sessionEntry) expired(now time.Time) bool {
	return e.expires != zeroMS && e.expires <= now.UnixMilli()
}

type sessions struct {
	mu sync.RWMutex
	m  map[string]sessionEntry
}

func newSessions() *sessions { return &sessions{m: map[string]sessionEntry{}} }

// validText reports whether a session's ID, workflow or stage can be
// stored: UTF-8 without NUL bytes, as in internal/sqlstore (PostgreSQL's
// TEXT refuses anything else).
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// encode validates s and returns the entry storing it.
func encode(s *workflow.Session) (sessionEntry, error) {
	if s.ID == "" || !validText(s.ID) {
		return sessionEntry{}, fmt.Errorf("memstore: invalid session ID %q", s.ID)
	}
	if !validText(s.Workflow) || !validText(s.Stage) {
		return sessionEntry{}, fmt.Errorf("memstore: session %q: workflow or stage name is not UTF-8 text", s.ID)
	}
	state := s.State
	if state == nil {
		state = map[string]any{}
	}
	data, err := json.Marshal(state)
	if err != nil {
		return sessionEntry{}, fmt.Errorf("memstore: session %q: state: %w", s.ID, err)
	}
	return sessionEntry{workflow: s.Workflow, stage: s.Stage, state: data, version: s.Version,
		created: toMS(s.CreatedAt), updated: toMS(s.UpdatedAt), expires: toMS(s.ExpiresAt)}, nil
}

func (e *sessionEntry) session(id string) (*workflow.Session, error) {
	var state map[string]any
	if err := json.Unmarshal(e.state, &state); err != nil { // cannot happen: we encoded it
		return nil, fmt.Errorf("memstore: session %q: state: %w", id, err)
	}
	return &workflow.Session{ID: id, Workflow: e.workflow, Stage: e.stage, State: state, Version: e.version,
		CreatedAt: fromMS(e.created), UpdatedAt: fromMS(e.updated), ExpiresAt: fromMS(e.expires)}, nil
}

func notFound(id string) error {
	return fmt.Errorf("memstore: session %q: %w", id, workflow.ErrSessionNotFound)
}

func (m *sessions) Create(ctx context.Context, s *workflow.Session) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e, err := encode(s)
	if err != nil {
		return err
	}
	e.version = 1
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.m[s.ID]; ok && !old.expired(now) {
		return fmt.Errorf("memstore: create session %q: %w", s.ID, workflow.ErrConflict)
	}
	m.m[s.ID] = e
	return nil
}

func (m *sessions) Get(ctx context.Context, id string) (*workflow.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	e, ok := m.m[id]
	m.mu.RUnlock()
	if !ok || e.expired(time.Now()) {
		return nil, notFound(id)
	}
	return e.session(id)
}

func (m *sessions) Update(ctx context.Context, s *workflow.Session) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.ID == "" || !validText(s.ID) {
		return notFound(s.ID) // such a session cannot exist
	}
	e, err := encode(s)
	if err != nil {
		return err
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.m[s.ID]
	if !ok || old.expired(now) {
		return notFound(s.ID)
	}
	if old.version != s.Version-1 {
		return fmt.Errorf("memstore: update session %q from version %d (stored: %d): %w", s.ID, s.Version-1, old.version, workflow.ErrConflict)
	}
	m.m[s.ID] = e
	return nil
}

func (m *sessions) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.m, id)
	m.mu.Unlock()
	return nil
}

func (m *sessions) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, e := range m.m {
		if e.expired(now) {
			delete(m.m, id)
			n++
		}
	}
	return n, nil
}

// ListSessions implements workflow.SessionLister: the live sessions of
// workflow, newest created first (then by ID, descending), after cursor.
func (m *sessions) ListSessions(ctx context.Context, wf, cursor string, limit int) ([]*workflow.Session, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	cms, cid, err := workflow.ParseSessionCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	type item struct {
		id string
		e  sessionEntry
	}
	now := time.Now()
	var items []item
	m.mu.RLock()
	for id, e := range m.m {
		if e.workflow != wf || e.expired(now) {
			continue
		}
		if cursor != "" && (e.created > cms || e.created == cms && id >= cid) {
			continue
		}
		items = append(items, item{id, e})
	}
	m.mu.RUnlock()
	slices.SortFunc(items, func(a, b item) int {
		if c := cmp.Compare(b.e.created, a.e.created); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	out := make([]*workflow.Session, 0, len(items))
	for _, it := range items {
		s, err := it.e.session(it.id)
		if err != nil {
			return nil, "", err
		}
		out = append(out, s)
	}
	if !more {
		return out, "", nil
	}
	return out, workflow.SessionCursor(out[len(out)-1]), nil
}
