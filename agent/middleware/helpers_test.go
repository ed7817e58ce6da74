package middleware_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// newAgent creates an agent on model with tools and middleware.
func newAgent(t *testing.T, model llm.ModelReference, tools []llm.Tool, mws ...agent.Middleware) *agent.Agent {
	t.Helper()
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model, Tools: tools}, Middleware: mws})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// echo returns its "v" argument.
var echo = llm.Tool{
	Name:        "echo",
	Description: "Echoes v.",
	Parameters:  llm.MustSchema(`{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`),
	Run:         func(_ context.Context, a map[string]any) (any, error) { return a["v"], nil },
}

// call is a tool call of the scripted model.
func call(id, tool string, args map[string]any) llm.ToolCall {
	return llm.ToolCall{ToolCallID: id, ToolName: tool, Arguments: args}
}

// toolStep is a scripted reply calling echo once, with the given usage.
func toolStep(id string, in, out int) scripted.Step {
	return scripted.Step{ToolCalls: []llm.ToolCall{call(id, "echo", map[string]any{"v": id})},
		Usage: llm.TokenUsage{InputTokens: in, OutputTokens: out}}
}

// textStep is a final scripted reply with the given usage.
func textStep(text string, in, out int) scripted.Step {
	return scripted.Step{Text: text, Usage: llm.TokenUsage{InputTokens: in, OutputTokens: out}}
}

// record is a log record as the recorder keeps it: attribute values
// normalized (ints as int, errors as their text).
type record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]any
}

// recorder is a slog.Handler keeping every record.
type recorder struct {
	mu   sync.Mutex
	recs []record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]any{}
	rec.Attrs(func(a slog.Attr) bool {
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindInt64:
			attrs[a.Key] = int(v.Int64())
		case slog.KindAny:
			if err, ok := v.Any().(error); ok {
				attrs[a.Key] = err.Error()
			} else {
				attrs[a.Key] = v.Any()
			}
		default:
			attrs[a.Key] = v.Any()
		}
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, record{rec.Level, rec.Message, attrs})
	r.mu.Unlock()
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { panic("recorder: WithAttrs not expected") }
func (r *recorder) WithGroup(string) slog.Handler      { panic("recorder: WithGroup not expected") }

func (r *recorder) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record(nil), r.recs...)
}

// checkConversation reports what would make a provider reject msgs as a
// conversation: a tool result not answering the assistant message right
// before it, or an assistant's tool calls not all answered by the tool
// result message right after it (unless it is the last message).
func checkConversation(msgs []llm.Message) error {
	for i, m := range msgs {
		switch m := m.(type) {
		case *llm.ToolResultMessage:
			var prev *llm.AssistantMessage
			if i > 0 {
				prev, _ = msgs[i-1].(*llm.AssistantMessage)
			}
			if prev == nil {
				return fmt.Errorf("message %d: tool result without the assistant message calling it", i)
			}
			for _, r := range m.Results {
				if !hasCall(prev, r.ToolCallID) {
					return fmt.Errorf("message %d: result for unknown call %q", i, r.ToolCallID)
				}
			}
		case *llm.AssistantMessage:
			if !m.HasToolCalls() || i == len(msgs)-1 {
				continue
			}
			next, ok := msgs[i+1].(*llm.ToolResultMessage)
			if !ok {
				return fmt.Errorf("message %d: tool calls without results", i)
			}
			for _, c := range m.ToolCalls {
				if !hasResult(next, c.ToolCallID) {
					return fmt.Errorf("message %d: call %q has no result", i, c.ToolCallID)
				}
			}
		}
	}
	return nil
}

func hasCall(m *llm.AssistantMessage, id string) bool {
	for _, c := range m.ToolCalls {
		if c.ToolCallID == id {
			return true
		}
	}
	return false
}

func hasResult(m *llm.ToolResultMessage, id string) bool {
	for _, r := range m.Results {
		if r.ToolCallID == id {
			return true
		}
	}
	return false
}
