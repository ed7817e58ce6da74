// Package memstore provides in-memory implementations of agentry's
// persistence interfaces, for tests and ephemeral use: nothing survives
// the process: the agent.CheckpointStore of UAP-1.1 §12.2
// (github.com/ProviderProtocol/agents), the workflow.SessionStore of UAIP-0.1
// (github.com/concierge-hq/uaip), the govern.Journal of UAICP-0.3 §5.4
// (github.com/UAICP/uaicp) and the app-side UIAP sessions of UIAP Core 0.1
// (uiap.dev); internal/sqlstore is the durable counterpart.
//
//	store := memstore.New()
//	a, err := agent.New(&agent.Options{LLMOptions: opts, Checkpoints: store.Checkpoints()})
//	engine := workflow.NewEngine(store.Sessions(), nil)
//	g, err := govern.New(ctx, &govern.Options{Journal: store.Journal()})
//
// The in-memory checkpoint store lives here rather than in internal/checkpoint
// so that one Store value carries the in-memory version of every
// persistence interface, as a sqlstore.Store carries the database one.
package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/checkpoint"
	"github.com/agentry-dev/agentry/internal/uiapsession"
)

// Store holds in-memory stores. The zero value is not usable; call New.
// It is safe for concurrent use.
type Store struct {
	checkpoints *checkpoints
	sessions    *sessions

	journalOnce sync.Once
	journal     govern.Journal

	uiapOnce sync.Once
	uiap     uiapsession.Store
}

// New returns an empty store.
func New() *Store {
	return &Store{checkpoints: &checkpoints{m: map[string]entry{}}, sessions: newSessions()}
}

// Checkpoints returns the store's agent.CheckpointStore. It keeps each
// checkpoint as its AgentStateJSON, so that Load returns a state decoded
// afresh, exactly as a durable store would, and sessions are named as in
// every store (agent.ValidateSessionID).
func (s *Store) Checkpoints() agent.CheckpointStore { return s.checkpoints }

// Journal returns the store's govern.Journal: govern.NewMemoryJournal's,
// created at the first call, the same one on every call. Closing it
// closes it for every user of the store.
func (s *Store) Journal() govern.Journal {
	s.journalOnce.Do(func() { s.journal = govern.NewMemoryJournal() })
	return s.journal
}

type entry struct {
	state []byte
	meta  agent.CheckpointMetadata
}

type checkpoints struct {
	mu sync.RWMutex
	m  map[string]entry
}

func check(ctx context.Context, sessionID string) error {
	if err := agent.ValidateSessionID(sessionID); err != nil {
		return err
	}
	return ctx.Err()
}

func (c *checkpoints) Save(ctx context.Context, sessionID string, state *agent.State) error {
	if err := check(ctx, sessionID); err != nil {
		return err
	}
	data, err := state.MarshalJSON()
	if err != nil {
		return fmt.Errorf("memstore: session %q: %w", sessionID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[sessionID] = entry{state: data, meta: agent.NewCheckpointMetadata(sessionID, state)}
	return nil
}

func (c *checkpoints) get(ctx context.Context, sessionID string) (entry, error) {
	if err := check(ctx, sessionID); err != nil {
		return entry{}, err
	}
	c.mu.RLock()
	e, ok := c.m[sessionID]
	c.mu.RUnlock()
	if !ok {
		return entry{}, agent.ErrNoCheckpoint
	}
	return e, nil
}

func (c *checkpoints) Load(ctx context.Context, sessionID string) (*agent.State, error) {
	e, err := c.get(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	state, err := agent.FromJSON(e.state)
	if err != nil {
		return nil, fmt.Errorf("%w: session %q: %w", checkpoint.ErrCorrupt, sessionID, err)
	}
	return state, nil
}

func (c *checkpoints) LoadMetadata(ctx context.Context, sessionID string) (*agent.CheckpointMetadata, error) {
	e, err := c.get(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	m := e.meta
	return &m, nil
}

func (c *checkpoints) Delete(ctx context.Context, sessionID string) error {
	if err := check(ctx, sessionID); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, sessionID)
	return nil
}

func (c *checkpoints) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids := make([]string, 0, len(c.m))
	for id := range c.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}
