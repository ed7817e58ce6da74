package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
)

// CheckpointStore persists the latest state of each session (UAP-1.1
// §12.2). Implementations are safe for concurrent use; the agent calls Save
// for one session serially, never concurrently with itself.
//
// The agent/checkpoint package has the file store and the exported test
// suite (agent/checkpoint/storetest) every implementation must pass;
// store/sqlstore has SQLite and PostgreSQL.
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

// checkpointer saves states in the background: per session in order, the
// latest state winning over ones not yet written, never blocking the run
// and never failing it (UAP-1.1 §12.3). Failures are logged and counted.
type checkpointer struct {
	store   CheckpointStore
	logger  *slog.Logger
	timeout time.Duration

	mu      sync.Mutex
	pending map[string]*State
	active  map[string]bool
	idle    chan struct{} // closed when no session is being written

	saved  atomic.Int64
	failed atomic.Int64
}

func newCheckpointer(store CheckpointStore, logger *slog.Logger) *checkpointer {
	return &checkpointer{store: store, logger: logger, timeout: 30 * time.Second,
		pending: map[string]*State{}, active: map[string]bool{}}
}

func (c *checkpointer) enqueue(sessionID string, s *State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[sessionID] = s
	if c.active[sessionID] {
		return
	}
	if len(c.active) == 0 {
		c.idle = make(chan struct{})
	}
	c.active[sessionID] = true
	go c.drain(sessionID)
}

func (c *checkpointer) drain(sessionID string) {
	for {
		c.mu.Lock()
		s := c.pending[sessionID]
		delete(c.pending, sessionID)
		if s == nil {
			delete(c.active, sessionID)
			if len(c.active) == 0 {
				close(c.idle)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		err := c.store.Save(ctx, sessionID, s)
		cancel()
		if err != nil {
			c.failed.Add(1)
			c.logger.Error("agent: checkpoint save failed", "session", sessionID, "step", s.Step(), "error", err)
			continue
		}
		c.saved.Add(1)
	}
}

// flush waits until every enqueued state has been written (or failed).
func (c *checkpointer) flush(ctx context.Context) error {
	c.mu.Lock()
	if len(c.active) == 0 {
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
