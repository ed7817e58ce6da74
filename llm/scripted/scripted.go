// Package scripted provides deterministic UPP-1.3 models for tests and
// offline demos: a scripted model that replays a FIFO queue of steps (text,
// reasoning, tool calls, structured data, errors, delays), streaming them
// chunk by chunk, and a function model whose replies a Go function decides.
//
// Both are llm providers: pass Model.Ref() as LLMOptions.Model.
//
//	m := scripted.New(scripted.Step{Text: "Hello!"})
//	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref()})
//	turn, _ := inst.Generate(ctx, nil, llm.Text("Hi"))
//
// In tests, NewT fails the test on a call the script did not expect and,
// at cleanup, on steps left unused.
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/llm"
)

// providerName is the name scripted models report as their provider.
const providerName = "scripted"

// Step is one scripted reply.
type Step struct {
	// Reasoning is emitted first, as a reasoning block.
	Reasoning string
	// Text is the reply text.
	Text string
	// ToolCalls are requested after the text. An empty ToolCallID is
	// filled with "call_<c>_<i>": the model's call number and the call's
	// position.
	ToolCalls []llm.ToolCall
	// Data is structured output: it becomes Response.Data, and its JSON
	// is the message text when Text is empty (streamed as object_delta).
	Data any
	// Usage is reported as is; when zero, a deterministic estimate is
	// reported (words of the request and of the reply).
	Usage llm.TokenUsage
	// Err fails the call. Complete fails at once; Stream fails after the
	// step's content was streamed (a Text with an Err is a mid-stream
	// failure). A plain error is wrapped as PROVIDER_ERROR.
	Err error
	// Delay is waited before replying; ChunkDelay between streamed chunks.
	// Both end early when the context ends (CANCELLED).
	Delay, ChunkDelay time.Duration
	// Chunks, when set, are the streamed text deltas (their concatenation
	// should equal Text); otherwise Text is split after each space, and
	// Data's JSON into pieces of 8 characters.
	Chunks []string
	// StopReason is reported as the response's stop reason; default
	// "tool_use" with tool calls, else "end_turn".
	StopReason string
}

// Func decides one reply from the request; it is the function model's
// brain. The request must not be modified.
type Func func(ctx context.Context, req *llm.Request) (Step, error)

// TB is the part of testing.TB the scripted model uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Cleanup(func())
}

// Model is a scripted or function model, used through its Ref. It is safe
// for concurrent use.
type Model struct {
	// ID is the model id reported in the reference; default "scripted".
	ID string
	// Caps are the capabilities it declares; New enables all of them.
	Caps llm.LLMCapabilities

	fn Func
	t  TB

	mu    sync.Mutex
	steps []Step
	calls []Call // the most recent maxRecorded calls at most
	n     int    // calls received
}

// maxRecorded bounds how many calls a model remembers for Calls.
const maxRecorded = 4096

var allCaps = llm.LLMCapabilities{Streaming: true, Tools: true, StructuredOutput: true,
	ImageInput: true, DocumentInput: true, VideoInput: true, AudioInput: true}

// New returns a model that replies with steps, in order. A call beyond the
// last step fails with an INVALID_REQUEST error naming the call.
func New(steps ...Step) *Model {
	return &Model{ID: "scripted", Caps: allCaps, steps: steps}
}

// NewT is New for tests: an unexpected extra call also fails t, and steps
// left unused fail t at cleanup.
func NewT(t TB, steps ...Step) *Model {
	t.Helper()
	m := New(steps...)
	m.t = t
	t.Cleanup(func() { m.AssertComplete(t) })
	return m
}

// NewFunc returns a function model: fn decides every reply.
func NewFunc(fn Func) *Model {
	return &Model{ID: "scripted", Caps: allCaps, fn: fn}
}

// Ref returns the reference to put in LLMOptions.Model.
func (m *Model) Ref() llm.ModelReference {
	return llm.ModelReference{ModelID: m.ID, Provider: provider{m}}
}

// provider is a Model as an llm.LLMProvider and its llm.Handler.
type provider struct{ m *Model }

func (provider) Name() string                                         { return providerName }
func (provider) Version() string                                      { return "1.0.0" }
func (p provider) LLMHandler(llm.ModelReference) (llm.Handler, error) { return p, nil }
func (p provider) Capabilities() llm.LLMCapabilities                  { return p.m.Caps }

func (p provider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return p.m.complete(ctx, req)
}

func (p provider) Stream(ctx context.Context, req *llm.Request, emit func(llm.StreamEvent)) (*llm.Response, error) {
	return p.m.stream(ctx, req, emit)
}

// Push appends steps to the script.
func (m *Model) Push(steps ...Step) {
	m.mu.Lock()
	m.steps = append(m.steps, steps...)
	m.mu.Unlock()
}

// Remaining returns how many steps are left.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.steps)
}

// Call is one request the model received.
type Call struct {
	Request *llm.Request // a copy of the request; treat its Messages as read-only
	Stream  bool         // whether it came through Stream
}

// Calls returns the calls received so far, in order (at most the 4096
// most recent, so that a long-lived model stays bounded).
func (m *Model) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls...)
}

// Requests returns the requests of Calls.
func (m *Model) Requests() []*llm.Request {
	calls := m.Calls()
	out := make([]*llm.Request, len(calls))
	for i, c := range calls {
		out[i] = c.Request
	}
	return out
}

// AssertComplete fails t when scripted steps were left unused.
func (m *Model) AssertComplete(t TB) {
	t.Helper()
	if n := m.Remaining(); n > 0 {
		t.Errorf("scripted model: %d scripted step(s) never used", n)
	}
}

// next records req and returns the step to play.
func (m *Model) next(ctx context.Context, req *llm.Request, stream bool) (Step, error) {
	m.mu.Lock()
	snapshot := *req // Messages is shared: the core only ever appends past it
	m.n++
	n := m.n
	if len(m.calls) == maxRecorded { // a long-lived model (a demo server) must not grow without bound
		m.calls = append(m.calls[:0], m.calls[maxRecorded/2:]...)
	}
	m.calls = append(m.calls, Call{Request: &snapshot, Stream: stream})
	if m.fn != nil {
		m.mu.Unlock()
		return m.fn(ctx, req)
	}
	if len(m.steps) == 0 {
		m.mu.Unlock()
		err := llm.NewError(llm.InvalidRequest, providerName, fmt.Sprintf("unexpected call %d: the script has no steps left", n), nil)
		if m.t != nil {
			m.t.Helper()
			m.t.Errorf("scripted model: %v", err)
		}
		return Step{}, err
	}
	s := m.steps[0]
	m.steps = m.steps[1:]
	m.mu.Unlock()
	return s, nil
}

// complete is llm.Handler's Complete.
func (m *Model) complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	s, err := m.next(ctx, req, false)
	if err != nil {
		return nil, llm.AsError(err, providerName, llm.ProviderError)
	}
	if err := wait(ctx, s.Delay); err != nil {
		return nil, err
	}
	if s.Err != nil {
		return nil, llm.AsError(s.Err, providerName, llm.ProviderError)
	}
	return m.response(req, &s)
}

// stream is llm.Handler's Stream.
func (m *Model) stream(ctx context.Context, req *llm.Request, emit func(llm.StreamEvent)) (*llm.Response, error) {
	s, err := m.next(ctx, req, true)
	if err != nil {
		return nil, llm.AsError(err, providerName, llm.ProviderError)
	}
	if err := wait(ctx, s.Delay); err != nil {
		return nil, err
	}
	resp, err := m.response(req, &s)
	if err != nil {
		return nil, err
	}
	pace := func() error { return wait(ctx, s.ChunkDelay) }
	emit(llm.StreamEvent{Type: llm.MessageStart})
	index := 0
	block := func(deltas []string, typ llm.StreamEventType) error {
		emit(llm.StreamEvent{Type: llm.ContentBlockStart, Index: index})
		for _, d := range deltas {
			if err := pace(); err != nil {
				return err
			}
			emit(llm.StreamEvent{Type: typ, Index: index, Delta: llm.EventDelta{Text: d}})
		}
		emit(llm.StreamEvent{Type: llm.ContentBlockStop, Index: index})
		index++
		return nil
	}
	if s.Reasoning != "" {
		if err := block(split(s.Reasoning), llm.ReasoningDelta); err != nil {
			return nil, err
		}
	}
	if text := resp.Message.Text(); text != "" {
		typ, chunks := llm.TextDelta, s.Chunks
		if s.Data != nil {
			typ = llm.ObjectDelta
		}
		if chunks == nil && s.Data != nil {
			chunks = splitRunes(text, 8)
		} else if chunks == nil {
			chunks = split(text)
		}
		if err := block(chunks, typ); err != nil {
			return nil, err
		}
	}
	for _, c := range resp.Message.ToolCalls {
		if err := pace(); err != nil {
			return nil, err
		}
		args := c.RawArguments
		if args == "" && c.ArgumentsJSON != nil {
			args = string(c.ArgumentsJSON)
		} else if args == "" {
			b, _ := json.Marshal(c.Arguments)
			args = string(b)
		}
		half := len(args) / 2
		emit(llm.StreamEvent{Type: llm.ContentBlockStart, Index: index})
		emit(llm.StreamEvent{Type: llm.ToolCallDelta, Index: index, Delta: llm.EventDelta{ToolCallID: c.ToolCallID, ToolName: c.ToolName, ArgumentsJSON: args[:half]}})
		emit(llm.StreamEvent{Type: llm.ToolCallDelta, Index: index, Delta: llm.EventDelta{ToolCallID: c.ToolCallID, ToolName: c.ToolName, ArgumentsJSON: args[half:]}})
		emit(llm.StreamEvent{Type: llm.ContentBlockStop, Index: index})
		index++
	}
	if s.Err != nil {
		return nil, llm.AsError(s.Err, providerName, llm.ProviderError)
	}
	emit(llm.StreamEvent{Type: llm.MessageStop})
	return resp, nil
}

func (m *Model) response(req *llm.Request, s *Step) (*llm.Response, error) {
	var content []llm.ContentBlock
	if s.Reasoning != "" {
		content = append(content, llm.ReasoningBlock{Text: s.Reasoning})
	}
	text := s.Text
	if text == "" && s.Data != nil {
		b, err := json.Marshal(s.Data)
		if err != nil {
			return nil, llm.NewError(llm.InvalidRequest, providerName, "step data is not JSON", err)
		}
		text = string(b)
	}
	if text != "" {
		content = append(content, llm.TextBlock{Text: text})
	}
	var calls []llm.ToolCall
	if len(s.ToolCalls) > 0 {
		calls = make([]llm.ToolCall, len(s.ToolCalls))
		m.mu.Lock()
		for i, c := range s.ToolCalls {
			if c.ToolCallID == "" {
				c.ToolCallID = fmt.Sprintf("call_%d_%d", m.n, i+1)
			}
			calls[i] = c
		}
		m.mu.Unlock()
	}
	msg := llm.NewAssistantMessage(content, calls)
	stop := s.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(calls) > 0 {
			stop = "tool_use"
		}
	}
	msg.Metadata = llm.Metadata{providerName: map[string]any{"stop_reason": stop}}
	usage := s.Usage
	if usage.InputTokens == 0 && usage.OutputTokens == 0 && usage.CacheReadTokens == 0 && usage.CacheWriteTokens == 0 {
		usage = estimate(req, text+s.Reasoning)
	}
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens
	resp := &llm.Response{Message: msg, Usage: usage, StopReason: stop}
	if req.Structure != nil {
		resp.Data = s.Data
	}
	return resp, nil
}

// estimate counts words: a stable stand-in for token counts.
func estimate(req *llm.Request, reply string) llm.TokenUsage {
	in := len(strings.Fields(req.System))
	for _, m := range req.Messages {
		in += len(strings.Fields(m.Text()))
	}
	return llm.TokenUsage{InputTokens: in, OutputTokens: len(strings.Fields(reply))}
}

// split cuts s after each space, keeping every byte.
func split(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// splitRunes cuts s into pieces of n runes.
func splitRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		if err := ctx.Err(); err != nil {
			return llm.AsError(err, providerName, llm.Cancelled)
		}
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return llm.AsError(ctx.Err(), providerName, llm.Cancelled)
	}
}
