package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/ids"
)

// CheckpointStore persists the latest state of each session (UAP-1.1
// §12.2). Implementations are safe for concurrent use; the agent calls Save
// for one session serially, never concurrently with itself.
//
// The internal/checkpoint package has the file store and the exported test
// suite (agent/checkpointtest) every implementation must pass;
// internal/sqlstore has SQLite and PostgreSQL.
type CheckpointStore interface {
	// Save durably stores state as the session's latest checkpoint, with a
	// new checkpoint ID. When it returns nil, the checkpoint survives a
	// crash of the process.
	Save(ctx context.Context, sessionID string, state *State) error
	// Load returns the session's latest state, or ErrNoCheckpoint.
	Load(ctx context.Context, sessionID string) (*State, error)
	// LoadMetadata returns the latest checkpoint's metadata, or
	// ErrNoCheckpoint.
	LoadMetadata(ctx context.Context, sessionID string) (*CheckpointMetadata, error)
	// Delete removes the session's checkpoints; deleting a missing session
	// is not an error.
	Delete(ctx context.Context, sessionID string) error
	// List returns the IDs of the sessions that have a checkpoint.
	List(ctx context.Context) ([]string, error)
}

// ErrNoCheckpoint is returned by CheckpointStore.Load and LoadMetadata
// for a session without a checkpoint.
var ErrNoCheckpoint = errors.New("agent: no checkpoint for this session")

// CheckpointMetadata describes a checkpoint.
type CheckpointMetadata struct {
	SessionID    string
	CheckpointID string // a new UUIDv4 per save
	Timestamp    time.Time
	Step         int
	AgentID      string // "unknown" when the state does not name one
}

// NewCheckpointMetadata returns the metadata of a checkpoint of state about
// to be saved for sessionID: a new checkpoint ID and the current time.
// Stores call it in Save.
func NewCheckpointMetadata(sessionID string, state *State) CheckpointMetadata {
	agentID := "unknown"
	if v, ok := state.Value(MetadataAgentID); ok {
		if s, ok := v.(string); ok && s != "" {
			agentID = s
		}
	}
	return CheckpointMetadata{SessionID: sessionID, CheckpointID: ids.New(), Timestamp: ids.Now(), Step: state.Step(), AgentID: agentID}
}

type metadataJSON struct {
	SessionID    string `json:"sessionId"`
	CheckpointID string `json:"checkpointId"`
	Timestamp    string `json:"timestamp"`
	Step         int    `json:"step"`
	AgentID      string `json:"agentId"`
}

// MarshalJSON writes {sessionId, checkpointId, timestamp, step, agentId}.
func (m CheckpointMetadata) MarshalJSON() ([]byte, error) {
	return json.Marshal(metadataJSON{m.SessionID, m.CheckpointID, m.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"), m.Step, m.AgentID})
}

// UnmarshalJSON reads the form MarshalJSON writes, validating it.
func (m *CheckpointMetadata) UnmarshalJSON(data []byte) error {
	var j metadataJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("agent: checkpoint metadata: %w", err)
	}
	ts, err := time.Parse(time.RFC3339Nano, j.Timestamp)
	switch {
	case j.SessionID == "":
		return errors.New("agent: checkpoint metadata: sessionId missing")
	case !ids.Valid(j.CheckpointID):
		return fmt.Errorf("agent: checkpoint metadata: checkpointId %q is not a UUIDv4", j.CheckpointID)
	case err != nil, ts.UTC().Year() < 0, ts.UTC().Year() > 9999: // beyond what MarshalJSON can write
		return fmt.Errorf("agent: checkpoint metadata: timestamp %q", j.Timestamp)
	case j.Step < 0:
		return errors.New("agent: checkpoint metadata: negative step")
	}
	*m = CheckpointMetadata{j.SessionID, j.CheckpointID, ts.UTC(), j.Step, j.AgentID}
	return nil
}

// Metadata keys the agent sets on the states it returns.
const (
	MetadataAgentID   = "agentId"
	MetadataSessionID = "sessionId"
)

// defaultCheckpointQueue is Options.CheckpointQueue's default.
const defaultCheckpointQueue = 16

// checkpointer saves states in the background (UAP-1.1 §12.3): per
// session one goroutine writes them in the order they were queued, never
// failing the run. Failures — an error, or a panic of the store — are
// logged and counted. By default every state is written: a session's
// queue holds up to limit states waiting behind the one being written,
// and enqueue waits for room when it is full (back-pressure on the step).
// With coalesce, a newer state replaces the one waiting, and enqueue
// never waits.
type checkpointer struct {
	store    CheckpointStore
	logger   *slog.Logger
	timeout  time.Duration
	limit    int
	coalesce bool

	mu       sync.Mutex
	sessions map[string]*sessionQueue // sessions with states queued or being written
	idle     chan struct{}            // closed when sessions becomes empty

	saved  atomic.Int64
	failed atomic.Int64
}

// sessionQueue is one session's pending work.
type sessionQueue struct {
	states []*State      // waiting, oldest first (the one being written is not here)
	room   chan struct{} // closed when a state leaves a full queue; nil while nobody waits
	done   chan struct{} // closed when the queue is empty and nothing is being written
}

func newCheckpointer(store CheckpointStore, logger *slog.Logger, limit int, coalesce bool) *checkpointer {
	if limit == 0 {
		limit = defaultCheckpointQueue
	}
	return &checkpointer{store: store, logger: logger, timeout: 30 * time.Second, limit: limit, coalesce: coalesce,
		sessions: map[string]*sessionQueue{}}
}

// enqueue queues s for saving under sessionID. When the session's queue
// is full it waits for room; if ctx ends meanwhile, s is queued anyway
// (beyond the bound by one: the run is ending, and nothing it reached is
// dropped).
func (c *checkpointer) enqueue(ctx context.Context, sessionID string, s *State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		q := c.sessions[sessionID]
		if q == nil {
			q = &sessionQueue{done: make(chan struct{})}
			if len(c.sessions) == 0 {
				c.idle = make(chan struct{})
			}
			c.sessions[sessionID] = q
			go c.drain(sessionID, q)
		}
		switch {
		case c.coalesce:
			clear(q.states)
			q.states = append(q.states[:0], s)
			return
		case len(q.states) < c.limit || ctx.Err() != nil:
			q.states = append(q.states, s)
			return
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		c.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
		}
		c.mu.Lock()
	}
}

func (c *checkpointer) drain(sessionID string, q *sessionQueue) {
	for {
		c.mu.Lock()
		if len(q.states) == 0 {
			delete(c.sessions, sessionID)
			close(q.done)
			if len(c.sessions) == 0 {
				close(c.idle)
			}
			c.mu.Unlock()
			return
		}
		s := q.states[0]
		q.states[0] = nil
		q.states = q.states[1:]
		if q.room != nil {
			close(q.room)
			q.room = nil
		}
		c.mu.Unlock()
		if err := c.save(sessionID, s); err != nil {
			c.failed.Add(1)
			attrs := []any{"session", sessionID, "step", s.Step(), "error", err}
			if p, ok := err.(*savePanic); ok {
				attrs = append(attrs, "stack", p.stack)
			}
			c.logger.Error("agent: checkpoint save failed", attrs...)
			continue
		}
		c.saved.Add(1)
	}
}

// save calls the store, turning a panic into an error: a failed save
// must not throw (§12.3), least of all on a goroutine nobody can recover.
func (c *checkpointer) save(sessionID string, s *State) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			err = &savePanic{value: v, stack: string(debug.Stack())}
		}
	}()
	return c.store.Save(ctx, sessionID, s)
}

// savePanic is the failure of a Save that panicked.
type savePanic struct {
	value any
	stack string
}

func (p *savePanic) Error() string { return fmt.Sprintf("CheckpointStore.Save panicked: %v", p.value) }

// flush waits until every state queued so far, of every session, has been
// written (or has failed).
func (c *checkpointer) flush(ctx context.Context) error {
	c.mu.Lock()
	if len(c.sessions) == 0 {
		c.mu.Unlock()
		return nil
	}
	done := c.idle
	c.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushSession waits until the session's queue is written (or ctx ends).
func (c *checkpointer) flushSession(ctx context.Context, sessionID string) {
	c.mu.Lock()
	q := c.sessions[sessionID]
	c.mu.Unlock()
	if q == nil {
		return
	}
	select {
	case <-q.done:
	case <-ctx.Done():
	}
}

// MaxSessionIDLen bounds the length of a session ID, in bytes.
const MaxSessionIDLen = 128

// ErrInvalidSessionID is returned (wrapped) by every operation of the
// stores for a session ID that ValidateSessionID rejects.
var ErrInvalidSessionID = errors.New("agent: invalid session ID")

// ValidateSessionID reports whether id can name a session: a non-empty,
// valid UTF-8 string of at most MaxSessionIDLen bytes, without control
// characters, without path separators ('/' and '\'), without "..", and not
// starting with '.' (the file store's own names start with one). A UUIDv4,
// which the agent generates, is always valid. The error wraps
// ErrInvalidSessionID.
//
// The rules make a session ID a safe single path element: a file store
// never reads or writes outside its directory, whatever the ID.
func ValidateSessionID(id string) error {
	reason := ""
	switch {
	case id == "":
		reason = "empty"
	case len(id) > MaxSessionIDLen:
		reason = fmt.Sprintf("longer than %d bytes", MaxSessionIDLen)
	case !utf8.ValidString(id):
		reason = "not valid UTF-8"
	case strings.ContainsAny(id, `/\`):
		reason = "contains a path separator"
	case strings.Contains(id, ".."):
		reason = `contains ".."`
	case id[0] == '.':
		reason = `starts with "."`
	case strings.IndexFunc(id, isControl) >= 0:
		reason = "contains a control character"
	default:
		return nil
	}
	if len(id) > MaxSessionIDLen {
		id = id[:32] + "…"
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidSessionID, id, reason)
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }
