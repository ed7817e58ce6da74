package uampagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/messaging"
)

// HandlerOptions configures NewHandler; nil or the zero value works.
type HandlerOptions struct {
	// Input turns a request into the agent's input and the state its run
	// starts from. Default TextInput: body.content as a text prompt
	// (body.type text/*, utf-8, uncompressed; 4.00 otherwise), from an
	// initial state whose metadata "uamp" records the request's from and
	// id. An *envelope.Error it returns is the requester's answer.
	Input func(req *envelope.Envelope) (llm.Input, *agent.State, error)
	// Progress chooses which agent events become progress deltas; nil
	// forwards every UAP event and the UPP events other than text deltas
	// (which are chunks) and the message, content-block and tool-call
	// fragment framing (see NewHandler).
	Progress func(agent.Event) bool
}

// The payload sizes an agent's deltas are kept under: text is cut into
// chunks of at most maxChunkText bytes, and an event whose JSON exceeds
// maxProgressEvent is forwarded without its data.
const (
	maxChunkText     = 64 << 10
	maxProgressEvent = 256 << 10
)

// Done is the payload of the done delta of an agent served by
// NewHandler.
type Done struct {
	// Content is the reply text (the run's last assistant message): for
	// a governed agent, the delivered answer, which chunks marked
	// unverified may not have been.
	// A reply too large for a delta (over 256 KiB with Data) is sent
	// without Content and Data, with "truncated": true: its text is in
	// the chunks.
	Content string `json:"content"`
	// Usage is the run's token usage.
	Usage llm.TokenUsage `json:"usage"`
	// Data is the structured output, when the agent asked for one.
	Data any `json:"data,omitempty"`
}

// NewHandler returns the messaging.Handler that serves agent a over UAMP
// ("agents over UAMP", docs/spec-notes/uamp.md): each ask runs a from the
// request's input (HandlerOptions.Input) and streams the run's events as
// deltas:
//
//   - a UPP text_delta is a chunk {"content": "<text>"}, as Echo sends,
//     so that a consumer reassembles the reply the same way; a delta the
//     run marked unverified (agent.Event.Unverified: a governed run's
//     answer before its verification) is {"content": "<text>",
//     "unverified": true} — not the reply until done confirms it, and
//     never confirmed when the stream ends with an error;
//   - every other forwarded event is a progress {"event": <the event's
//     JSON, agent.Event's form {source, uap|upp}>}: step_start/step_end,
//     reasoning, action, observation, subagent_*, plan_*, and the UPP
//     reasoning, object, media and tool-execution events. The framing
//     events (message_start/stop, content_block_start/stop) and
//     tool_call_delta fragments are not forwarded: an action event
//     carries the complete calls;
//   - the run's end is done, with Done as payload;
//   - a failure is an error delta: 5.04 (retryable) when the model is
//     unavailable for a retryable reason (rate limit, network, timeout),
//     anything else 5.00 without its text; a request Input refuses is
//     answered with Input's *envelope.Error.
//
// A cancel from the requester cancels the run (its tool calls
// included), and the stream ends with a cancel delta. The run's events
// wait for the consumer: a run never gets more than the stream's window
// ahead of it.
func NewHandler(a *agent.Agent, opts *HandlerOptions) messaging.Handler {
	var o HandlerOptions
	if opts != nil {
		o = *opts
	}
	if o.Input == nil {
		o.Input = TextInput
	}
	if o.Progress == nil {
		o.Progress = forwardedEvent
	}
	return &agentHandler{a: a, opts: o}
}

type agentHandler struct {
	a    *agent.Agent
	opts HandlerOptions
}

// TextInput is HandlerOptions.Input's default: the request's body.content
// as a text prompt, from an initial state whose metadata "uamp" holds
// {"from", "id"} of the request.
func TextInput(req *envelope.Envelope) (llm.Input, *agent.State, error) {
	b := req.Body
	mt, _, _ := strings.Cut(b.Type, ";")
	switch {
	case !strings.HasPrefix(strings.TrimSpace(strings.ToLower(mt)), "text/"):
		return nil, nil, envelope.NewError(envelope.CodeBadRequest, fmt.Sprintf("body.type %q: this agent reads text/*", b.Type), nil)
	case b.Encoding != "" && !strings.EqualFold(b.Encoding, "utf-8"):
		return nil, nil, envelope.NewError(envelope.CodeBadRequest, fmt.Sprintf("body.encoding %q: this agent reads utf-8", b.Encoding), nil)
	case b.Compression != "" && b.Compression != "none":
		return nil, nil, envelope.NewError(envelope.CodeBadRequest, fmt.Sprintf("body.compression %q: this agent reads uncompressed text", b.Compression), nil)
	case strings.TrimSpace(b.Content) == "":
		return nil, nil, envelope.NewError(envelope.CodeBadRequest, "body.content is empty", nil)
	}
	state := agent.Initial().WithMetadata("uamp", map[string]any{"from": req.From, "id": req.ID})
	return llm.Text(b.Content), state, nil
}

// forwardedEvent is HandlerOptions.Progress's default.
func forwardedEvent(ev agent.Event) bool {
	if ev.Source != agent.SourceUPP || ev.UPP == nil {
		return ev.UAP != nil
	}
	switch ev.UPP.Type {
	case llm.MessageStart, llm.MessageStop, llm.ContentBlockStart, llm.ContentBlockStop, llm.ToolCallDelta:
		return false
	}
	return true
}

func (h *agentHandler) ServeUAMP(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) error {
	input, state, err := h.opts.Input(req)
	if err != nil {
		return err
	}
	if state == nil {
		state = agent.Initial()
	}
	run := h.a.Stream(ctx, input, state)
	for ev, evErr := range run.Events() {
		if evErr != nil {
			break // Result says why
		}
		if err := h.forward(ctx, s, ev); err != nil {
			return err // leaving the loop cancels the run
		}
	}
	res, err := run.Result()
	if err != nil {
		return agentError(ctx, err)
	}
	done := Done{Content: res.Turn.Text(), Usage: res.Turn.Usage, Data: res.Turn.Data}
	payload, err := json.Marshal(done)
	if err == nil && len(payload) <= maxProgressEvent {
		err = s.Send(ctx, envelope.DeltaDone, payload)
		if err == nil || ctx.Err() != nil || !errors.Is(err, envelope.CodeBadRequest) {
			return err
		}
	}
	// The reply does not fit a delta payload (too large, or a number
	// beyond 2^53 in Data): end with the usage alone — the text was in
	// the chunks — rather than not at all.
	payload, _ = json.Marshal(map[string]any{"usage": done.Usage, "truncated": true})
	return s.Send(ctx, envelope.DeltaDone, payload)
}

// forward sends the delta of one agent event, if any.
func (h *agentHandler) forward(ctx context.Context, s *messaging.Stream, ev agent.Event) error {
	if ev.Source == agent.SourceUPP && ev.UPP != nil && ev.UPP.Type == llm.TextDelta {
		text := ev.UPP.Delta.Text
		for len(text) > 0 {
			n := min(len(text), maxChunkText)
			for n < len(text) && !utf8.RuneStart(text[n]) {
				n--
			}
			payload, _ := json.Marshal(chunkPayload{Content: text[:n], Unverified: ev.Unverified})
			if err := s.Send(ctx, envelope.DeltaChunk, payload); err != nil {
				return err
			}
			text = text[n:]
		}
		return nil
	}
	if !h.opts.Progress(ev) {
		return nil
	}
	payload, err := json.Marshal(map[string]any{"event": ev})
	if err != nil || len(payload) > maxProgressEvent {
		payload = withoutData(ev)
	}
	err = s.Send(ctx, envelope.DeltaProgress, payload)
	if err != nil && ctx.Err() == nil && errors.Is(err, envelope.CodeBadRequest) {
		// A value the strict delta decoders refuse (a number beyond
		// 2^53): the event goes without its data.
		err = s.Send(ctx, envelope.DeltaProgress, withoutData(ev))
	}
	return err
}

// chunkPayload is the payload of a chunk delta the handler sends.
type chunkPayload struct {
	Content    string `json:"content"`
	Unverified bool   `json:"unverified,omitempty"`
}

// withoutData is the progress payload of an event whose data cannot be
// forwarded: its type and position, and "truncated": true.
func withoutData(ev agent.Event) []byte {
	short := agent.Event{Source: ev.Source, Unverified: ev.Unverified}
	switch {
	case ev.UAP != nil:
		short.UAP = &agent.UAPEvent{Type: ev.UAP.Type, Step: ev.UAP.Step, AgentID: ev.UAP.AgentID, Data: map[string]any{"truncated": true}}
	case ev.UPP != nil:
		short.UPP = &llm.StreamEvent{Type: ev.UPP.Type, Index: ev.UPP.Index}
	}
	b, _ := json.Marshal(map[string]any{"event": short, "truncated": true})
	return b
}

// agentError is the stream's answer to a failed run: the requester's
// cancel as the stream's cause, a retryable model failure as 5.04;
// anything else is passed on for the Server to send as 5.00 without its
// text. (An *envelope.Error inside a run's failure is a peer's answer to
// the agent, not to this requester: it is not passed on.)
func agentError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if le := (*llm.Error)(nil); errors.As(err, &le) && le.Code.Retryable() {
		e := envelope.NewError(envelope.CodeBusy, "the agent's model is unavailable; retry later", err)
		e.RetryAfter = le.RetryAfter
		return e
	}
	return err
}
