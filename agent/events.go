package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/agentry-dev/agentry/internal/stream"
	"github.com/agentry-dev/agentry/llm"
)

// EventType is a UAP stream event type (UAP-1.1 §11.2 UAPEventType).
type EventType string

// The UAP event types of the specification, plus the plan strategy's.
const (
	EventStepStart     EventType = "step_start"
	EventStepEnd       EventType = "step_end"
	EventReasoning     EventType = "reasoning"
	EventAction        EventType = "action"
	EventObservation   EventType = "observation"
	EventSubagentStart EventType = "subagent_start"
	EventSubagentEvent EventType = "subagent_event"
	EventSubagentEnd   EventType = "subagent_end"
	// The plan strategy's events (as in the reference implementation).
	EventPlanCreated   EventType = "plan_created"
	EventPlanStepStart EventType = "plan_step_start"
	EventPlanStepEnd   EventType = "plan_step_end"
)

// Source says whether an event comes from the agent or from UPP.
type Source string

// Event sources.
const (
	SourceUAP Source = "uap"
	SourceUPP Source = "upp"
)

// Event is AgentStreamEvent: exactly one of UAP and UPP is set, as Source
// says.
type Event struct {
	Source Source
	UAP    *UAPEvent
	UPP    *llm.StreamEvent
	// Unverified marks output a middleware gating the run's result (a
	// governed run, govern.Governor.Middleware) let through before the
	// result was verified: it is not the run's answer, and it may be
	// rejected — only the stream's Result says what was delivered. A
	// consumer must not present it as final. (An extension of UAP-1.1.)
	Unverified bool
	// Metadata carries what such a middleware adds to the event (for a
	// governed run: the run's request ID and the chunk's UAICP streaming
	// block); nil on most events. (An extension of UAP-1.1.)
	Metadata map[string]any
}

// UAPEvent is an agent-level event. Data's keys depend on the type:
//
//	step_start, step_end   "iteration" or "phase"
//	reasoning              "reasoning" (string)
//	action                 "toolCalls" ([]llm.ToolCall)
//	observation            "observations" ([]llm.ToolExecution)
//	plan_created           "plan" ([]PlanStep)
//	plan_step_start/_end   "planStep" (PlanStep)
//	subagent_start         "subagentId", "subagentType", "parentToolCallId", "prompt"
//	subagent_event         "subagentId", "subagentType", "parentToolCallId", "event" (Event)
//	subagent_end           "subagentId", "subagentType", "parentToolCallId", "success", "result" or "error"
type UAPEvent struct {
	Type    EventType
	Step    int
	AgentID string
	Data    map[string]any
}

type eventJSON struct {
	Source     Source           `json:"source"`
	UAP        *uapEventJSON    `json:"uap,omitempty"`
	UPP        *llm.StreamEvent `json:"upp,omitempty"`
	Unverified bool             `json:"unverified,omitempty"`
	Metadata   map[string]any   `json:"metadata,omitempty"`
}

type uapEventJSON struct {
	Type    EventType      `json:"type"`
	Step    int            `json:"step"`
	AgentID string         `json:"agentId"`
	Data    map[string]any `json:"data"`
}

// MarshalJSON writes {source, uap?: {type, step, agentId, data}, upp?,
// unverified?, metadata?}.
func (e Event) MarshalJSON() ([]byte, error) {
	j := eventJSON{Source: e.Source, UPP: e.UPP, Unverified: e.Unverified, Metadata: e.Metadata}
	if e.UAP != nil {
		data := e.UAP.Data
		if data == nil {
			data = map[string]any{}
		}
		j.UAP = &uapEventJSON{e.UAP.Type, e.UAP.Step, e.UAP.AgentID, data}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes; Data values arrive as
// generic JSON values.
func (e *Event) UnmarshalJSON(data []byte) error {
	var j eventJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("agent event: %w", err)
	}
	switch {
	case j.Source == SourceUAP && j.UAP != nil && j.UPP == nil:
		*e = Event{Source: SourceUAP, UAP: &UAPEvent{j.UAP.Type, j.UAP.Step, j.UAP.AgentID, j.UAP.Data}}
	case j.Source == SourceUPP && j.UPP != nil && j.UAP == nil:
		*e = Event{Source: SourceUPP, UPP: j.UPP}
	default:
		return errors.New("agent event: source must be uap with a uap object or upp with a upp object")
	}
	e.Unverified, e.Metadata = j.Unverified, j.Metadata
	return nil
}

// StreamResult is AgentStreamResult (UAP-1.1 §11.1). It starts when Events
// or Result is first called. Breaking out of Events cancels the run;
// Result drains unread events and returns exactly what Generate would have
// returned; Abort cancels the run (in-flight tool calls included) and
// Result then fails with CANCELLED.
type StreamResult struct {
	s *stream.Stream[Event, *Result]
}

// Events returns the events as they arrive; a failure ends the sequence
// with a final (zero event, error) pair.
func (r *StreamResult) Events() iter.Seq2[Event, error] { return r.s.Events() }

// Result waits for the run to end and returns its result.
func (r *StreamResult) Result() (*Result, error) { return r.s.Result() }

// Abort cancels the run.
func (r *StreamResult) Abort() { r.s.Abort() }

// streamBuffer bounds how many events a run may emit ahead of its
// consumer. It is the run's only buffer: a step's UPP events are passed
// straight into it (llm.LLMInstance.EmitStep). 32 Events (48 bytes each)
// streamed the peers benchmark's turn as fast as 64 did, with 1.5 KB less
// garbage a run.
const streamBuffer = 32

func newStreamResult(ctx context.Context, run func(ctx context.Context, emit func(Event)) (*Result, error)) *StreamResult {
	return &StreamResult{stream.New(ctx, streamBuffer, run)}
}
