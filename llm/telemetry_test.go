package llm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

func spanAttrs(s sdktrace.ReadOnlySpan, keys ...string) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes() {
		for _, k := range keys {
			if string(kv.Key) == k {
				out[k] = kv.Value.AsInterface()
			}
		}
	}
	return out
}

// TestTelemetry_GenAISpans: a Generate with one tool round makes two
// "chat {model}" client spans and one "execute_tool {tool}" span, with
// the GenAI attributes; a failing tool marks its span with error.type;
// no message content is recorded unless
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is "true".
func TestTelemetry_GenAISpans(t *testing.T) {
	for _, capture := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		if capture {
			t.Setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
		}
		m := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "c1", ToolName: "fail", Arguments: map[string]any{"x": 1.0}}},
			Usage: llm.TokenUsage{InputTokens: 7, OutputTokens: 3}}, scripted.Step{Text: "done"})
		inst, err := llm.LLM(&llm.LLMOptions{Model: m.Ref(), TracerProvider: tp, Params: map[string]any{"temperature": 0.5, "max_tokens": 100},
			Tools: []llm.Tool{{Name: "fail", Description: "always fails", Run: func(context.Context, map[string]any) (any, error) { return nil, errors.New("boom") }}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inst.Generate(context.Background(), nil, llm.Text("hi")); err != nil {
			t.Fatal(err)
		}
		var names []string
		spans := rec.Ended()
		for _, s := range spans {
			names = append(names, s.Name())
		}
		if diff := cmp.Diff([]string{"chat scripted", "execute_tool fail", "chat scripted"}, names); diff != "" {
			t.Fatalf("capture %v: spans (-want +got):\n%s", capture, diff)
		}
		chat := spans[0]
		want := map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted", "gen_ai.request.model": "scripted",
			"gen_ai.usage.input_tokens": int64(7), "gen_ai.usage.output_tokens": int64(3), "gen_ai.request.temperature": 0.5, "gen_ai.request.max_tokens": int64(100)}
		if diff := cmp.Diff(want, spanAttrs(chat, "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
			"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.request.temperature", "gen_ai.request.max_tokens")); diff != "" {
			t.Errorf("chat attributes (-want +got):\n%s", diff)
		}
		tool := spans[1]
		want = map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fail", "gen_ai.tool.call.id": "c1",
			"gen_ai.tool.type": "function", "error.type": "tool_error"}
		if diff := cmp.Diff(want, spanAttrs(tool, "gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type", "error.type")); diff != "" {
			t.Errorf("execute_tool attributes (-want +got):\n%s", diff)
		}
		if tool.Status().Code != codes.Error || tool.Parent().SpanID() == chat.SpanContext().SpanID() {
			t.Errorf("execute_tool: status %v, parent %v (the chat span is %v: a tool is not the chat's child)", tool.Status(), tool.Parent().SpanID(), chat.SpanContext().SpanID())
		}
		content := spanAttrs(chat, "gen_ai.input.messages", "gen_ai.output.messages")
		args := spanAttrs(tool, "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
		if capture {
			want := map[string]any{"gen_ai.input.messages": `[{"parts":[{"content":"hi","type":"text"}],"role":"user"}]`,
				"gen_ai.output.messages": `[{"finish_reason":"tool_use","parts":[{"arguments":{"x":1},"id":"c1","name":"fail","type":"tool_call"}],"role":"assistant"}]`}
			if diff := cmp.Diff(want, content); diff != "" {
				t.Errorf("captured content (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]any{"gen_ai.tool.call.arguments": `{"x":1}`, "gen_ai.tool.call.result": "boom"}, args); diff != "" {
				t.Errorf("captured tool content (-want +got):\n%s", diff)
			}
		} else if len(content) > 0 || len(args) > 0 {
			t.Errorf("content recorded without opting in: %v %v", content, args)
		}
	}
}
