package llm

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
)

// Input is what Generate and Stream accept as new input (UPP's
// InferenceInput): a Message, which is sent as is, or a ContentBlock, which
// becomes a UserMessage. Use Text for a plain prompt.
type Input interface {
	isInput()
}

// MessageType discriminates messages (UPP-1.3 §6.1).
type MessageType string

// The UPP message types.
const (
	TypeUser       MessageType = "user"
	TypeAssistant  MessageType = "assistant"
	TypeToolResult MessageType = "tool_result"
)

// Metadata is provider-namespaced message metadata: each provider keeps its
// vendor data under its own name (metadata["anthropic"] …). Keys the package
// does not know are kept on every round trip.
type Metadata map[string]any

// Provider returns the map stored under provider, or nil.
func (m Metadata) Provider(provider string) map[string]any {
	v, _ := m[provider].(map[string]any)
	return v
}

// MessageInfo holds the fields every message has.
type MessageInfo struct {
	ID        string    // UUIDv4
	Timestamp time.Time // creation time, UTC, millisecond precision
	Metadata  Metadata  // provider-namespaced; nil when empty
}

// Info returns the common fields.
func (i MessageInfo) Info() MessageInfo { return i }

// Message is one message of a conversation: *UserMessage, *AssistantMessage
// or *ToolResultMessage. Messages are values shared between threads, turns
// and agent states; treat them as immutable once created.
type Message interface {
	Input
	Type() MessageType
	Info() MessageInfo
	// Text returns the text blocks joined by a blank line; for a tool
	// result message, the results as text.
	Text() string
	// Blocks returns the content blocks (none for a tool result message).
	Blocks() []ContentBlock
	isMessage()
}

// UserMessage is input from the user (UPP-1.3 §6.2). Content holds text,
// image, document, audio, video and binary blocks.
type UserMessage struct {
	MessageInfo
	Content []ContentBlock
}

// AssistantMessage is a model reply (UPP-1.3 §6.3). Content holds text,
// reasoning, image, audio and video blocks.
type AssistantMessage struct {
	MessageInfo
	Content   []ContentBlock
	ToolCalls []ToolCall
}

// ToolResultMessage carries tool results back to the model (UPP-1.3 §6.4).
type ToolResultMessage struct {
	MessageInfo
	Results []ToolResult
}

func newInfo() MessageInfo { return MessageInfo{ID: ids.New(), Timestamp: ids.Now()} }

// NewUserMessage returns a user message with a new ID and the current time.
func NewUserMessage(content ...ContentBlock) *UserMessage {
	return &UserMessage{MessageInfo: newInfo(), Content: content}
}

// NewAssistantMessage returns an assistant message with a new ID and the
// current time.
func NewAssistantMessage(content []ContentBlock, toolCalls []ToolCall) *AssistantMessage {
	return &AssistantMessage{MessageInfo: newInfo(), Content: content, ToolCalls: toolCalls}
}

// NewToolResultMessage returns a tool result message with a new ID and the
// current time.
func NewToolResultMessage(results []ToolResult) *ToolResultMessage {
	return &ToolResultMessage{MessageInfo: newInfo(), Results: results}
}

// Type reports TypeUser.
func (*UserMessage) Type() MessageType { return TypeUser }

// Type reports TypeAssistant.
func (*AssistantMessage) Type() MessageType { return TypeAssistant }

// Type reports TypeToolResult.
func (*ToolResultMessage) Type() MessageType { return TypeToolResult }

func (*UserMessage) isMessage()       {}
func (*AssistantMessage) isMessage()  {}
func (*ToolResultMessage) isMessage() {}
func (*UserMessage) isInput()         {}
func (*AssistantMessage) isInput()    {}
func (*ToolResultMessage) isInput()   {}

// Blocks returns the message's Content.
func (m *UserMessage) Blocks() []ContentBlock { return m.Content }

// Blocks returns the message's Content (not its tool calls).
func (m *AssistantMessage) Blocks() []ContentBlock { return m.Content }

// Blocks returns nil: a tool result message has no content blocks.
func (m *ToolResultMessage) Blocks() []ContentBlock {
	return nil
}

// Text returns the text blocks of Content joined by a blank line.
func (m *UserMessage) Text() string { return joinText(m.Content) }

// Text returns the text blocks of Content joined by a blank line.
func (m *AssistantMessage) Text() string { return joinText(m.Content) }

// Text returns each result as text (strings as they are, anything else as
// JSON) joined by a blank line.
func (m *ToolResultMessage) Text() string {
	parts := make([]string, len(m.Results))
	for i, r := range m.Results {
		parts[i] = ResultText(r.Result)
	}
	return strings.Join(parts, "\n\n")
}

// HasToolCalls reports whether the message requests tool execution.
func (m *AssistantMessage) HasToolCalls() bool { return len(m.ToolCalls) > 0 }

// Reasoning returns the reasoning blocks' text joined by a blank line.
func (m *AssistantMessage) Reasoning() string {
	var parts []string
	for _, b := range m.Content {
		if r, ok := b.(ReasoningBlock); ok {
			parts = append(parts, r.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

func joinText(blocks []ContentBlock) string {
	n := 0
	var one string
	var parts []string
	for _, b := range blocks {
		if t, ok := b.(TextBlock); ok {
			if n == 0 {
				one = t.Text
			} else {
				if n == 1 {
					parts = append(parts, one)
				}
				parts = append(parts, t.Text)
			}
			n++
		}
	}
	if n <= 1 {
		return one
	}
	return strings.Join(parts, "\n\n")
}

// BlocksOf returns the blocks of m that have type T, for example the images
// of a message:
//
//	images := llm.BlocksOf[llm.ImageBlock](msg)
func BlocksOf[T ContentBlock](m Message) []T {
	var out []T
	for _, b := range m.Blocks() {
		if t, ok := b.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// ResultText renders a tool result as the text a model sees: a string as it
// is, anything else as JSON.
func ResultText(v any) string {
	switch r := v.(type) {
	case string:
		return r
	case nil:
		return "null"
	case json.RawMessage:
		return string(r)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
