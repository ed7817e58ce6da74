package runs

import (
	"encoding/json"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
)

// EventType says what an Event reports.
type EventType string

// The event types. The durable ones are derived from the run's records in
// the governance journal, so they are the same after a restart; the
// transient ones (the model's) exist only while the run executes in this
// process.
const (
	// EventRunStarted: the run opened (durable; Agent).
	EventRunStarted EventType = "run_started"
	// EventPhase: the run entered a phase of the UAICP state machine —
	// plan, execute, verify, deliver, fail_safe (durable; From, Phase,
	// Reasons on a repair or fail_safe).
	EventPhase EventType = "phase"
	// EventModelText: text the model streamed (transient; Text;
	// Unverified when a governed run let it through before verification).
	EventModelText EventType = "model_text"
	// EventModelTurn: the model ended a turn asking for tool calls
	// (transient; ToolCalls with their arguments).
	EventModelTurn EventType = "model_turn"
	// EventToolCall: a tool call passed the gate and runs (durable; Tool,
	// CallID, Tier, Args — the arguments of a read-only call are not
	// journaled: see EventModelTurn — and ApprovalID of an approved call).
	EventToolCall EventType = "tool_call"
	// EventToolResult: a tool call ended (durable; Tool, CallID, Outcome
	// success with Result, or failure with Reasons).
	EventToolResult EventType = "tool_result"
	// EventToolBlocked: the governor refused a call before it ran, or
	// holds it for an approval (durable; Tool, CallID, Reasons, Detail,
	// ApprovalID).
	EventToolBlocked EventType = "tool_blocked"
	// EventApprovalRequested: a call waits for a human's approval
	// (durable; ApprovalID, Tool, CallID, Reasons).
	EventApprovalRequested EventType = "approval_requested"
	// EventApprovalDecided: an approver decided (durable; ApprovalID,
	// Approved, Approver, Detail: the approver's reason).
	EventApprovalDecided EventType = "approval_decided"
	// EventPaused: the run waits for its approvals (durable; Approvals).
	EventPaused EventType = "paused"
	// EventResumed: the paused run continues (durable).
	EventResumed EventType = "resumed"
	// EventRollback: a recorded write is being undone (durable; Tool,
	// CallID, Outcome pending when it starts, then success or failure).
	EventRollback EventType = "rollback"
	// EventEnded: the run delivered or failed safe; it is the last event
	// (durable; Status, Reasons, Error, Output when delivered).
	EventEnded EventType = "ended"
	// EventSubagentStart, EventSubagentEvent and EventSubagentEnd are a
	// sub-agent's run inside a tool call, named as UAP-1.1 §8 names
	// them (transient; Agent: the sub-agent; CallID: the parent's tool
	// call). Start has Text, the sub-agent's input; an event has Text
	// its model streamed, or ToolCalls it asked for; End has Outcome,
	// and Output on success or Detail, the error, on failure. A
	// sub-agent's own sub-agents are reported the same way, with their
	// own Agent.
	EventSubagentStart EventType = "subagent_start"
	EventSubagentEvent EventType = "subagent_event"
	EventSubagentEnd   EventType = "subagent_end"
)

// Event is one event of a run (Service.Events). Which fields are set
// depends on Type (see the EventType constants).
//
// Seq orders a run's events and never repeats: a client resumes after
// the last Seq it saw. The events derived from the journal record with
// sequence number n are numbered from n×1,000,000 (n×1,000,000+999,999
// for EventEnded); the transient events that follow them, up to the next
// record, take the numbers in between. So a Seq names the same durable
// event after a restart, and transient events, which are not kept, leave
// gaps when missed.
type Event struct {
	Seq       uint64    `json:"seq"`
	Type      EventType `json:"type"`
	RequestID string    `json:"request_id"`
	Time      time.Time `json:"time"`
	// Durable marks the events derived from the journal.
	Durable bool `json:"durable"`

	Agent      string          `json:"agent,omitempty"`
	From       govern.Phase    `json:"from,omitempty"`
	Phase      govern.Phase    `json:"phase,omitempty"`
	Text       string          `json:"text,omitempty"`
	Unverified bool            `json:"unverified,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	CallID     string          `json:"call_id,omitempty"`
	Tier       string          `json:"tier,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Outcome    govern.Outcome  `json:"outcome,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	Approvals  []string        `json:"approvals,omitempty"`
	Approved   *bool           `json:"approved,omitempty"`
	Approver   string          `json:"approver,omitempty"`
	Reasons    []govern.Reason `json:"reasons,omitempty"`
	Detail     string          `json:"detail,omitempty"`
	Status     Status          `json:"status,omitempty"`
	Output     string          `json:"output,omitempty"`
	Error      *govern.Cause   `json:"error,omitempty"`
}

// ToolCall is a tool call the model asked for.
type ToolCall struct {
	CallID string         `json:"call_id"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args,omitempty"`
}

// seqStride spaces the numbers of the events of consecutive journal
// records (Event.Seq).
const seqStride = 1_000_000

// endSeq is the Seq of the EventEnded derived from record n.
func endSeq(n uint64) uint64 { return n*seqStride + seqStride - 1 }

// deriver turns a run's journal records, in order, into its durable
// events.
type deriver struct {
	intents map[string]bool // call IDs with an invocation_intent
}

// events returns the events of rec, and the EventEnded it implies (the
// terminal transition), which the caller publishes last.
func (d *deriver) events(rec govern.Record) (evs []*Event, end *Event) {
	if d.intents == nil {
		d.intents = map[string]bool{}
	}
	add := func(ev *Event) {
		ev.Seq = rec.Seq*seqStride + uint64(len(evs))
		ev.RequestID, ev.Time, ev.Durable = rec.RequestID, rec.Timestamp.Time, true
		evs = append(evs, ev)
	}
	switch rec.Kind {
	case recordkind.RunStarted:
		var st govern.RunStart
		_ = json.Unmarshal(rec.Data, &st)
		add(&Event{Type: EventRunStarted, Agent: st.Resumer})
	case recordkind.Transition:
		add(&Event{Type: EventPhase, From: rec.From, Phase: rec.To, Reasons: rec.Reasons})
		if rec.To.Terminal() {
			end = &Event{Seq: endSeq(rec.Seq), Type: EventEnded, RequestID: rec.RequestID, Time: rec.Timestamp.Time, Durable: true, Status: Delivered}
			if rec.To == govern.FailSafe {
				var td govern.TransitionData
				_ = json.Unmarshal(rec.Data, &td)
				end.Status, end.Reasons, end.Error = FailSafe, rec.Reasons, td.Cause
			}
		}
	case recordkind.Intent:
		var in govern.CallIntent
		_ = json.Unmarshal(rec.Data, &in)
		d.intents[rec.CallID] = true
		add(&Event{Type: EventToolCall, Tool: rec.Tool, CallID: rec.CallID, Tier: tierName(in.Tier), Args: in.Args, ApprovalID: in.ApprovalID})
	case recordkind.Commit:
		var out govern.CallOutcome
		_ = json.Unmarshal(rec.Data, &out)
		if !d.intents[rec.CallID] { // a read-only call: journaled once it ran
			add(&Event{Type: EventToolCall, Tool: rec.Tool, CallID: rec.CallID, Tier: govern.ReadOnly.String()})
		}
		ev := &Event{Type: EventToolResult, Tool: rec.Tool, CallID: rec.CallID, Outcome: govern.Success}
		if len(out.Evidence) > 0 && out.Evidence[0].Hash == out.ResultHash {
			ev.Result = out.Evidence[0].Payload
		}
		add(ev)
	case recordkind.Failed:
		if !d.intents[rec.CallID] {
			add(&Event{Type: EventToolCall, Tool: rec.Tool, CallID: rec.CallID, Tier: govern.ReadOnly.String()})
		}
		// The tool's error text is not sent: it may be anything.
		add(&Event{Type: EventToolResult, Tool: rec.Tool, CallID: rec.CallID, Outcome: govern.Failure, Reasons: rec.Reasons})
	case recordkind.Blocked:
		var in govern.CallIntent
		_ = json.Unmarshal(rec.Data, &in)
		add(&Event{Type: EventToolBlocked, Tool: rec.Tool, CallID: rec.CallID, Tier: tierName(in.Tier), Reasons: rec.Reasons,
			Detail: in.Detail, ApprovalID: in.ApprovalID})
	case recordkind.ApprovalRequested:
		var a govern.ApprovalRequest
		_ = json.Unmarshal(rec.Data, &a)
		add(&Event{Type: EventApprovalRequested, ApprovalID: a.ID, Tool: rec.Tool, CallID: rec.CallID, Tier: tierName(a.Tier), Reasons: rec.Reasons})
	case recordkind.ApprovalDecided:
		var dec govern.ApprovalDecision
		_ = json.Unmarshal(rec.Data, &dec)
		approved := dec.Approved
		add(&Event{Type: EventApprovalDecided, ApprovalID: dec.ApprovalID, Tool: rec.Tool, CallID: rec.CallID,
			Approved: &approved, Approver: dec.Approver, Detail: dec.Reason})
	case recordkind.Paused:
		var p govern.PauseData
		_ = json.Unmarshal(rec.Data, &p)
		add(&Event{Type: EventPaused, Approvals: p.Approvals, Reasons: rec.Reasons})
	case recordkind.Resumed:
		add(&Event{Type: EventResumed})
	case recordkind.RollbackStarted, recordkind.RollbackDone, recordkind.RollbackFailed:
		add(&Event{Type: EventRollback, Tool: rec.Tool, CallID: rec.CallID, Outcome: rec.Outcome, Reasons: rec.Reasons})
	}
	return evs, end
}

func tierName(t govern.Tier) string {
	if !t.Valid() {
		return ""
	}
	return t.String()
}

// modelEvent returns the transient event of an agent stream event, if it
// has one (its Seq is set when published).
func modelEvent(requestID string, text string, unverified bool, calls []llm.ToolCall) *Event {
	ev := &Event{RequestID: requestID, Time: time.Now()}
	if calls != nil {
		ev.Type = EventModelTurn
		for _, c := range calls {
			ev.ToolCalls = append(ev.ToolCalls, ToolCall{CallID: c.ToolCallID, Tool: c.ToolName, Args: c.Arguments})
		}
		return ev
	}
	ev.Type, ev.Text, ev.Unverified = EventModelText, text, unverified
	return ev
}

// subagentEvents returns the events of a sub-agent's UAP event (UAP-1.1
// §8: subagent_start, subagent_event, subagent_end), nil for other
// events and for the inner events that carry neither text nor tool calls.
func subagentEvents(requestID string, u *agent.UAPEvent) []*Event {
	str := func(k string) string { v, _ := u.Data[k].(string); return v }
	ev := &Event{RequestID: requestID, Time: time.Now(), Type: EventType(u.Type), Agent: str("subagentType"), CallID: str("parentToolCallId")}
	switch u.Type {
	case agent.EventSubagentStart:
		ev.Text = str("prompt")
	case agent.EventSubagentEnd:
		if ok, _ := u.Data["success"].(bool); ok {
			ev.Outcome, ev.Output = govern.Success, str("result")
		} else {
			ev.Outcome, ev.Detail = govern.Failure, str("error")
		}
	case agent.EventSubagentEvent:
		inner, ok := u.Data["event"].(agent.Event)
		switch {
		case !ok:
			return nil
		case inner.Source == agent.SourceUPP && inner.UPP != nil && inner.UPP.Type == llm.TextDelta && inner.UPP.Delta.Text != "":
			ev.Text = inner.UPP.Delta.Text
		case inner.Source == agent.SourceUAP && inner.UAP != nil && inner.UAP.Type == agent.EventAction:
			calls, _ := inner.UAP.Data["toolCalls"].([]llm.ToolCall)
			if len(calls) == 0 {
				return nil
			}
			for _, c := range calls {
				ev.ToolCalls = append(ev.ToolCalls, ToolCall{CallID: c.ToolCallID, Tool: c.ToolName, Args: c.Arguments})
			}
		case inner.Source == agent.SourceUAP && inner.UAP != nil:
			return subagentEvents(requestID, inner.UAP) // a sub-agent's own sub-agent
		default:
			return nil
		}
	default:
		return nil
	}
	return []*Event{ev}
}
