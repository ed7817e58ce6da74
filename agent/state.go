package agent

import (
	"iter"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
)

// State is AgentState (UAP-1.1 §6): an immutable snapshot of an agent's
// execution. Every With method returns a new State with a new ID and leaves
// the receiver untouched; no two States share a mutable backing array. The
// accessors return copies. A nil *State behaves as an empty state.
//
// Messages are shared between states (they are UPP values treated as
// immutable); metadata values are copied shallowly.
type State struct {
	// id is the snapshot's ID. A state made while IDs are random
	// (ids.Random) draws it from ids.NewRandom on the first ID() — most
	// snapshots of a run are never asked — and lazyID says so; otherwise
	// it is set when the state is made (nil: the ID is "").
	id        atomic.Pointer[string]
	lazyID    bool
	messages  []llm.Message
	step      int
	metadata  map[string]any
	reasoning []string
	plan      []PlanStep // nil when no plan was set
	traces    []SubagentTrace
}

// Initial returns an empty state with a new ID.
func Initial() *State {
	s := &State{}
	s.newID()
	return s
}

// newID gives a state being made a new ID: one drawn on its first ID()
// while IDs are random, one drawn now otherwise (a test's Source sees
// the IDs asked for in the order the states are made).
func (s *State) newID() {
	if ids.Random() {
		s.lazyID = true
		return
	}
	s.setID(ids.New())
}

// setID sets the ID of a state being made.
func (s *State) setID(id string) { s.id.Store(&id) }

// clone copies s (slices capped so that appends never share) with a new ID.
func (s *State) clone() *State {
	if s == nil {
		return Initial()
	}
	c := &State{
		messages:  slices.Clip(s.messages),
		step:      s.step,
		metadata:  s.metadata,
		reasoning: slices.Clip(s.reasoning),
		plan:      slices.Clip(s.plan),
		traces:    slices.Clip(s.traces),
	}
	c.newID()
	return c
}

// ID returns the snapshot's UUIDv4.
func (s *State) ID() string {
	if s == nil {
		return ""
	}
	if p := s.id.Load(); p != nil {
		return *p
	}
	if !s.lazyID {
		return ""
	}
	id := ids.NewRandom()
	if s.id.CompareAndSwap(nil, &id) {
		return id
	}
	return *s.id.Load() // another goroutine drew it first
}

// Messages returns a copy of the conversation history.
func (s *State) Messages() []llm.Message {
	if s == nil {
		return nil
	}
	return slices.Clone(s.messages)
}

// AllMessages iterates over the history without copying it.
func (s *State) AllMessages() iter.Seq2[int, llm.Message] {
	return func(yield func(int, llm.Message) bool) {
		if s == nil {
			return
		}
		for i, m := range s.messages {
			if !yield(i, m) {
				return
			}
		}
	}
}

// Len returns the number of messages.
func (s *State) Len() int {
	if s == nil {
		return 0
	}
	return len(s.messages)
}

// Step returns the step counter.
func (s *State) Step() int {
	if s == nil {
		return 0
	}
	return s.step
}

// Metadata returns a copy of the user metadata.
func (s *State) Metadata() map[string]any {
	if s == nil {
		return map[string]any{}
	}
	return maps.Clone(s.metadataOrEmpty())
}

// Value returns one metadata entry.
func (s *State) Value(key string) (any, bool) {
	if s == nil {
		return nil, false
	}
	v, ok := s.metadata[key]
	return v, ok
}

func (s *State) metadataOrEmpty() map[string]any {
	if s.metadata == nil {
		return map[string]any{}
	}
	return s.metadata
}

// Reasoning returns a copy of the reasoning traces.
func (s *State) Reasoning() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.reasoning)
}

// Plan returns a copy of the execution plan, nil when none was set.
func (s *State) Plan() []PlanStep {
	if s == nil || s.plan == nil {
		return nil
	}
	out := make([]PlanStep, len(s.plan))
	for i, p := range s.plan {
		out[i] = p.clone()
	}
	return out
}

// SubagentTraces returns a copy of the sub-agent execution traces.
func (s *State) SubagentTraces() []SubagentTrace {
	if s == nil {
		return nil
	}
	return slices.Clone(s.traces)
}

// WithMessage returns a state with m appended.
func (s *State) WithMessage(m llm.Message) *State { return s.WithMessages(m) }

// WithMessages returns a state with ms appended.
func (s *State) WithMessages(ms ...llm.Message) *State {
	c := s.clone()
	c.messages = append(c.messages, ms...)
	return c
}

// WithContext returns a state whose history is replaced by ms (context
// window management, UAP-1.1 §6.3).
func (s *State) WithContext(ms []llm.Message) *State {
	c := s.clone()
	c.messages = slices.Clone(ms)
	return c
}

// WithStep returns a state with the step counter set.
func (s *State) WithStep(step int) *State {
	c := s.clone()
	c.step = step
	return c
}

// WithMetadata returns a state with metadata[key] = value.
func (s *State) WithMetadata(key string, value any) *State {
	c := s.clone()
	c.metadata = maps.Clone(c.metadataOrEmpty())
	c.metadata[key] = value
	return c
}

// WithReasoning returns a state with a reasoning trace appended.
func (s *State) WithReasoning(reasoning string) *State {
	c := s.clone()
	c.reasoning = append(c.reasoning, reasoning)
	return c
}

// WithPlan returns a state with the plan replaced by a copy of plan.
func (s *State) WithPlan(plan []PlanStep) *State {
	c := s.clone()
	c.plan = make([]PlanStep, len(plan))
	for i, p := range plan {
		c.plan[i] = p.clone()
	}
	return c
}

// WithSubagentTrace returns a state with a sub-agent trace appended.
func (s *State) WithSubagentTrace(t SubagentTrace) *State {
	c := s.clone()
	c.traces = append(c.traces, t)
	return c
}

// PlanStatus is a plan step's status.
type PlanStatus string

// Plan step statuses.
const (
	PlanPending    PlanStatus = "pending"
	PlanInProgress PlanStatus = "in_progress"
	PlanCompleted  PlanStatus = "completed"
	PlanFailed     PlanStatus = "failed"
)

// PlanStep is one step of a Plan strategy's plan.
type PlanStep struct {
	ID          string     `json:"id"`
	Description string     `json:"description"`
	Tool        string     `json:"tool,omitempty"`
	DependsOn   []string   `json:"dependsOn"`
	Status      PlanStatus `json:"status"`
}

func (p PlanStep) clone() PlanStep {
	p.DependsOn = slices.Clone(p.DependsOn)
	if p.DependsOn == nil {
		p.DependsOn = []string{}
	}
	return p
}

// SubagentTrace records one sub-agent execution (UAP-1.1 §8.5,
// SubagentExecutionTrace).
type SubagentTrace struct {
	SubagentID       string               `json:"subagentId"`
	SubagentType     string               `json:"subagentType"`
	ParentToolCallID string               `json:"parentToolCallId"`
	Prompt           string               `json:"prompt"`
	StartTime        time.Time            `json:"-"`
	EndTime          time.Time            `json:"-"`
	Success          bool                 `json:"success"`
	Result           string               `json:"result,omitempty"`
	Error            string               `json:"error,omitempty"`
	ToolExecutions   []ToolExecutionTrace `json:"toolExecutions,omitempty"`
	Usage            *llm.TokenUsage      `json:"usage,omitempty"`
}

// ToolExecutionTrace is a tool execution inside a sub-agent, as a
// SubagentTrace records it.
type ToolExecutionTrace struct {
	ToolName   string         `json:"toolName"`
	ToolCallID string         `json:"toolCallId,omitempty"`
	Arguments  map[string]any `json:"arguments"`
	Result     string         `json:"result"`
	IsError    bool           `json:"isError,omitempty"`
	Duration   int64          `json:"duration,omitempty"` // milliseconds
}
