package runs

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/agentry-dev/agentry/agent"
)

// memResults keeps delivered runs' states in memory (Options.Results
// nil).
type memResults struct {
	mu     sync.Mutex
	states map[string]*agent.State
}

func (m *memResults) Save(_ context.Context, id string, st *agent.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[id] = st
	return nil
}

func (m *memResults) Load(_ context.Context, id string) (*agent.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[id]
	if !ok {
		return nil, agent.ErrNoCheckpoint
	}
	return st, nil
}

func (m *memResults) LoadMetadata(_ context.Context, id string) (*agent.CheckpointMetadata, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[id]
	if !ok {
		return nil, agent.ErrNoCheckpoint
	}
	md := agent.NewCheckpointMetadata(id, st)
	return &md, nil
}

func (m *memResults) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, id)
	return nil
}

func (m *memResults) List(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.states)), nil
}
