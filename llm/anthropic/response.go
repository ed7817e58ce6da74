package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
)

// apiMessage is a Messages API Message object.
type apiMessage struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []apiBlock `json:"content"`
	StopReason   *string    `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        apiUsage   `json:"usage"`
}

// apiBlock is one response content block; which fields are set depends on
// Type (text, thinking, redacted_thinking, tool_use; others are ignored).
type apiBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

// apiUsage is the usage object; fields are pointers because a stream's
// message_delta reports only what changed.
type apiUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// merge overlays the fields v reports.
func (u *apiUsage) merge(v *apiUsage) {
	if v == nil {
		return
	}
	if v.InputTokens != nil {
		u.InputTokens = v.InputTokens
	}
	if v.OutputTokens != nil {
		u.OutputTokens = v.OutputTokens
	}
	if v.CacheCreationInputTokens != nil {
		u.CacheCreationInputTokens = v.CacheCreationInputTokens
	}
	if v.CacheReadInputTokens != nil {
		u.CacheReadInputTokens = v.CacheReadInputTokens
	}
}

func deref(p *int) int {
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}

func (u apiUsage) tokens() llm.TokenUsage {
	t := llm.TokenUsage{
		InputTokens:      deref(u.InputTokens),
		OutputTokens:     deref(u.OutputTokens),
		CacheReadTokens:  deref(u.CacheReadInputTokens),
		CacheWriteTokens: deref(u.CacheCreationInputTokens),
	}
	t.TotalTokens = t.InputTokens + t.OutputTokens
	return t
}

func invalidResponse(msg string, cause error) *llm.Error {
	return llm.NewError(llm.InvalidResponse, name, msg, cause)
}

// decodeResponse decodes a Messages API response body.
func decodeResponse(data []byte) (*apiMessage, error) {
	var probe struct {
		Type  string    `json:"type"`
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, invalidResponse("malformed response JSON", err)
	}
	if probe.Type == "error" {
		return nil, eventError(probe.Error)
	}
	if probe.Type != "message" {
		return nil, invalidResponse("response is not a message (type "+quote(probe.Type)+")", nil)
	}
	var m apiMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, invalidResponse("malformed response JSON", err)
	}
	if m.Content == nil {
		return nil, invalidResponse("response message has no content list", nil)
	}
	return &m, nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// toolCall is a tool_use block's call: an input that is a JSON object
// gives Arguments, and is kept as ArgumentsJSON; an empty or null input is
// the empty object; anything else is kept as RawArguments.
func toolCall(id, name string, input []byte) llm.ToolCall {
	t := bytes.TrimSpace(input)
	if len(t) == 0 || string(t) == "null" {
		return llm.ToolCall{ToolCallID: id, ToolName: name, Arguments: map[string]any{}}
	}
	c := llm.NewToolCall(id, name, t)
	if c.Arguments == nil {
		c.RawArguments = string(input)
	}
	return c
}

// compactJSON returns raw without insignificant space, or raw itself when
// it is not valid JSON.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func newToolCallID() string { return "toolu_" + strings.ReplaceAll(ids.New(), "-", "") }

// toResponse converts a decoded message (from a response or an assembled
// stream) into the UPP response.
func toResponse(m *apiMessage, mode outputMode) (*llm.Response, error) {
	var (
		content   []llm.ContentBlock
		calls     []llm.ToolCall
		reasoning []any
		texts     []string
		data      any
		haveData  bool
	)
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
			if b.Text != "" {
				content = append(content, llm.TextBlock{Text: b.Text})
			}
		case "thinking":
			content = append(content, llm.ReasoningBlock{Text: b.Thinking})
			reasoning = append(reasoning, map[string]any{"type": "thinking", "signature": b.Signature})
		case "redacted_thinking":
			content = append(content, llm.ReasoningBlock{})
			reasoning = append(reasoning, map[string]any{"type": "redacted_thinking", "redacted": true, "data": b.Data})
		case "tool_use":
			if mode == outputTool && b.Name == jsonResponseTool {
				text := compactJSON(b.Input)
				if strings.TrimSpace(text) == "" {
					text = "{}"
				}
				content = append(content, llm.TextBlock{Text: text})
				if !haveData {
					var v any
					if json.Unmarshal([]byte(text), &v) == nil {
						data, haveData = v, true
					}
				}
				continue
			}
			if b.Name == "" {
				return nil, invalidResponse("tool_use block without a name", nil)
			}
			id := b.ID
			if id == "" {
				id = newToolCallID()
			}
			calls = append(calls, toolCall(id, b.Name, b.Input))
		}
		// Server-tool and other block types have no UPP form; they are
		// not part of the message.
	}
	if mode == outputNative {
		var v any
		if json.Unmarshal([]byte(strings.Join(texts, "")), &v) == nil {
			data, haveData = v, true
		}
	}

	md := map[string]any{"id": m.ID, "model": m.Model, "stop_reason": nil, "stop_sequence": nil}
	stop := ""
	if m.StopReason != nil {
		stop = *m.StopReason
		md["stop_reason"] = stop
	}
	if m.StopSequence != nil {
		md["stop_sequence"] = *m.StopSequence
	}
	if len(reasoning) > 0 {
		md["reasoning"] = reasoning
	}
	msg := llm.NewAssistantMessage(content, calls)
	msg.Metadata = llm.Metadata{name: md}
	resp := &llm.Response{Message: msg, Usage: m.Usage.tokens(), StopReason: stop}
	if haveData {
		resp.Data = data
	}
	return resp, nil
}
