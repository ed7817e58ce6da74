package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/wire"
)

// chatResponse is a non-streamed reply, and each line of a streamed one.
// Error is set instead of everything else when the server failed.
type chatResponse struct {
	Model              string        `json:"model"`
	CreatedAt          string        `json:"created_at"`
	Message            *replyMessage `json:"message"`
	Done               bool          `json:"done"`
	DoneReason         string        `json:"done_reason"`
	TotalDuration      int64         `json:"total_duration"`
	LoadDuration       int64         `json:"load_duration"`
	PromptEvalCount    int           `json:"prompt_eval_count"`
	PromptEvalDuration int64         `json:"prompt_eval_duration"`
	EvalCount          int           `json:"eval_count"`
	EvalDuration       int64         `json:"eval_duration"`
	Error              *string       `json:"error"`
}

type replyMessage struct {
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Thinking  string          `json:"thinking"`
	ToolCalls []replyToolCall `json:"tool_calls"`
}

type replyToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func invalidResponse(msg string, cause error) *llm.Error {
	return llm.NewError(llm.InvalidResponse, name, msg, cause)
}

// decodeResponse decodes a non-streamed chat reply. structured makes the
// content the structured output (parsed into Data).
func decodeResponse(data []byte, structured bool) (*llm.Response, error) {
	var r chatResponse
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, invalidResponse("malformed response body", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalidResponse("trailing data after the response object", nil)
	}
	if r.Error != nil {
		return nil, streamError(*r.Error)
	}
	if r.Message == nil {
		return nil, invalidResponse("response has no message", nil)
	}
	var blocks []llm.ContentBlock
	if r.Message.Thinking != "" {
		blocks = append(blocks, llm.ReasoningBlock{Text: r.Message.Thinking})
	}
	if r.Message.Content != "" {
		blocks = append(blocks, llm.TextBlock{Text: r.Message.Content})
	}
	var calls []llm.ToolCall
	for _, tc := range r.Message.ToolCalls {
		call, _ := toolCall(tc)
		calls = append(calls, call)
	}
	return finish(&r, blocks, calls, r.Message.Content, structured), nil
}

// finish assembles the response from the decoded blocks and the reply's
// final fields.
func finish(r *chatResponse, blocks []llm.ContentBlock, calls []llm.ToolCall, content string, structured bool) *llm.Response {
	msg := llm.NewAssistantMessage(blocks, calls)
	msg.Metadata = llm.Metadata{name: metadata(r)}
	resp := &llm.Response{
		Message:    msg,
		StopReason: r.DoneReason,
		Usage: llm.TokenUsage{
			InputTokens:  r.PromptEvalCount,
			OutputTokens: r.EvalCount,
			TotalTokens:  r.PromptEvalCount + r.EvalCount,
		},
	}
	if structured {
		var v any
		if json.Unmarshal([]byte(content), &v) == nil {
			resp.Data = v
		}
	}
	return resp
}

// metadata is the vendor data kept under metadata["ollama"].
func metadata(r *chatResponse) map[string]any {
	m := map[string]any{}
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set("model", r.Model, r.Model != "")
	set("created_at", r.CreatedAt, r.CreatedAt != "")
	set("done_reason", r.DoneReason, r.DoneReason != "")
	set("total_duration", r.TotalDuration, r.TotalDuration != 0)
	set("load_duration", r.LoadDuration, r.LoadDuration != 0)
	set("prompt_eval_duration", r.PromptEvalDuration, r.PromptEvalDuration != 0)
	set("eval_duration", r.EvalDuration, r.EvalDuration != 0)
	return m
}

// toolCall converts a vendor tool call and returns it with its arguments
// as JSON text. Arguments should be an object; a string holding a JSON
// object is accepted too; missing, null or blank arguments are an empty
// object; anything else is kept as RawArguments.
func toolCall(tc replyToolCall) (llm.ToolCall, string) {
	call := llm.ToolCall{ToolCallID: tc.ID, ToolName: tc.Function.Name}
	if call.ToolCallID == "" {
		call.ToolCallID = "call_" + ids.New()
	}
	raw := bytes.TrimSpace(tc.Function.Arguments)
	if len(raw) == 0 || string(raw) == "null" {
		call.Arguments = map[string]any{}
		return call, "{}"
	}
	text := string(raw)
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		text = s
		if strings.TrimSpace(text) == "" {
			call.Arguments = map[string]any{}
			return call, "{}"
		}
	}
	if c := llm.NewToolCall(call.ToolCallID, call.ToolName, []byte(text)); c.Arguments != nil {
		call.Arguments, call.ArgumentsJSON = c.Arguments, c.ArgumentsJSON
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(text)) == nil {
			text = buf.String()
		}
		return call, text
	}
	call.RawArguments = text
	return call, text
}

// decodeStream reads an NDJSON chat stream, emitting events as the lines
// arrive, and returns the assembled response. Read errors are returned
// as they are (the caller normalizes them); malformed lines, a missing
// done line and error lines are *llm.Error.
func decodeStream(r io.Reader, structured bool, emit func(llm.StreamEvent)) (*llm.Response, error) {
	s := &streamState{emit: emit, structured: structured, open: -1}
	emit(llm.StreamEvent{Type: llm.MessageStart})
	lines := wire.NewLines(r, maxLine)
	for {
		line, err := lines.Next()
		if err == io.EOF {
			return nil, invalidResponse("stream truncated: it ended before the final (done) line", nil)
		}
		if errors.Is(err, wire.ErrLineTooLong) {
			return nil, invalidResponse(fmt.Sprintf("stream line exceeds %d bytes", maxLine), err)
		}
		if err != nil {
			return nil, err
		}
		var chunk chatResponse
		if err := json.Unmarshal(line, &chunk); err != nil {
			return nil, invalidResponse("malformed stream line", err)
		}
		if chunk.Error != nil {
			return nil, streamError(*chunk.Error)
		}
		if chunk.Message != nil {
			s.message(chunk.Message)
		}
		if chunk.Done {
			s.close()
			resp := finish(&chunk, s.blocks(), s.calls, s.content.String(), structured)
			emit(llm.StreamEvent{Type: llm.MessageStop})
			return resp, nil
		}
	}
}

type runKind int

const (
	runReasoning runKind = iota
	runText
)

// run is one stream block of reasoning or text.
type run struct {
	kind runKind
	text strings.Builder
}

type streamState struct {
	emit       func(llm.StreamEvent)
	structured bool
	runs       []*run
	calls      []llm.ToolCall
	content    strings.Builder // all content, for structured output
	next       int             // next stream block index
	open       int             // index of the open block, -1 for none
	openRun    *run
}

func (s *streamState) close() {
	if s.open >= 0 {
		s.emit(llm.StreamEvent{Type: llm.ContentBlockStop, Index: s.open})
		s.open, s.openRun = -1, nil
	}
}

func (s *streamState) start() int {
	i := s.next
	s.next++
	s.open = i
	s.emit(llm.StreamEvent{Type: llm.ContentBlockStart, Index: i})
	return i
}

// append adds text to the open run of kind k, opening one if needed.
func (s *streamState) append(k runKind, text string, typ llm.StreamEventType) {
	if s.openRun == nil || s.openRun.kind != k {
		s.close()
		s.start()
		s.openRun = &run{kind: k}
		s.runs = append(s.runs, s.openRun)
	}
	s.openRun.text.WriteString(text)
	s.emit(llm.StreamEvent{Type: typ, Index: s.open, Delta: llm.EventDelta{Text: text}})
}

func (s *streamState) message(m *replyMessage) {
	if m.Thinking != "" {
		s.append(runReasoning, m.Thinking, llm.ReasoningDelta)
	}
	if m.Content != "" {
		typ := llm.TextDelta
		if s.structured {
			typ = llm.ObjectDelta
		}
		s.content.WriteString(m.Content)
		s.append(runText, m.Content, typ)
	}
	for _, tc := range m.ToolCalls {
		call, args := toolCall(tc)
		s.calls = append(s.calls, call)
		s.close()
		i := s.start()
		s.emit(llm.StreamEvent{Type: llm.ToolCallDelta, Index: i, Delta: llm.EventDelta{
			ToolCallID: call.ToolCallID, ToolName: call.ToolName, ArgumentsJSON: args,
		}})
		s.close()
	}
}

func (s *streamState) blocks() []llm.ContentBlock {
	var out []llm.ContentBlock
	for _, r := range s.runs {
		if r.kind == runReasoning {
			out = append(out, llm.ReasoningBlock{Text: r.text.String()})
		} else {
			out = append(out, llm.TextBlock{Text: r.text.String()})
		}
	}
	return out
}

// streamError is the *llm.Error for an {"error": …} reply or stream line.
func streamError(msg string) *llm.Error {
	code := classify(msg)
	if code == "" {
		code = llm.ProviderError
	}
	if msg == "" {
		msg = "Ollama reported an error without a message"
	}
	return llm.NewError(code, name, msg, nil)
}

// parseError reads Ollama's error body, {"error": "…"}, and refines the
// status-derived code from its message.
func parseError(status int, body []byte) (string, llm.ErrorCode) {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return "", ""
	}
	return e.Error, classify(e.Error)
}

// classify derives an error code from Ollama's error text; "" when the
// text says nothing more specific than its status.
func classify(msg string) llm.ErrorCode {
	m := strings.ToLower(msg)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(m, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("context length", "context window", "context size", "exceeds the context", "prompt is too long", "too many tokens"):
		return llm.ContextLengthExceeded
	case has("model") && has("not found"):
		return llm.ModelNotFound
	case has("unauthorized", "invalid api key", "authentication"):
		return llm.AuthenticationFailed
	case has("usage limit", "quota", "insufficient credit", "billing"):
		return llm.QuotaExceeded
	case has("rate limit", "too many requests"):
		return llm.RateLimited
	case has("content policy", "content filter", "moderation"):
		return llm.ContentFiltered
	}
	return ""
}
