package llm_test

import (
	"context"
	"testing"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// BenchmarkToolLoopCycle measures the tool loop's own overhead per cycle:
// one provider call returning one tool call, the tool run, and the tool
// result appended — with a scripted model and a no-op tool, so the figure
// is the loop itself. b.N cycles run in one Generate call.
func BenchmarkToolLoopCycle(b *testing.B) {
	call := llm.ToolCall{ToolCallID: "c", ToolName: "noop", Arguments: map[string]any{"x": 1.0}}
	toolStep := scripted.Step{ToolCalls: []llm.ToolCall{call}, Usage: llm.TokenUsage{InputTokens: 1, OutputTokens: 1}}
	final := scripted.Step{Text: "done", Usage: llm.TokenUsage{InputTokens: 1, OutputTokens: 1}}
	n := 0
	m := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) {
		n++
		if n > b.N {
			return final, nil
		}
		return toolStep, nil
	})
	noop := llm.Tool{Name: "noop", Run: func(context.Context, map[string]any) (any, error) { return "ok", nil }}
	inst, err := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{noop},
		ToolStrategy: &llm.ToolUseStrategy{MaxIterations: llm.Infinity}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	turn, err := inst.Generate(context.Background(), nil, llm.Text("go"))
	if err != nil {
		b.Fatal(err)
	}
	if turn.Cycles != b.N+1 {
		b.Fatalf("cycles %d, want %d", turn.Cycles, b.N+1)
	}
}

// BenchmarkToolLoopCycleParallelCalls is a cycle with four calls, which
// run concurrently.
func BenchmarkToolLoopCycleParallelCalls(b *testing.B) {
	calls := []llm.ToolCall{
		{ToolCallID: "a", ToolName: "noop"}, {ToolCallID: "b", ToolName: "noop"},
		{ToolCallID: "c", ToolName: "noop"}, {ToolCallID: "d", ToolName: "noop"},
	}
	n := 0
	m := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) {
		n++
		if n > b.N {
			return scripted.Step{Text: "done", Usage: llm.TokenUsage{InputTokens: 1}}, nil
		}
		return scripted.Step{ToolCalls: calls, Usage: llm.TokenUsage{InputTokens: 1}}, nil
	})
	noop := llm.Tool{Name: "noop", Run: func(context.Context, map[string]any) (any, error) { return "ok", nil }}
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{noop},
		ToolStrategy: &llm.ToolUseStrategy{MaxIterations: llm.Infinity}})
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := inst.Generate(context.Background(), nil, llm.Text("go")); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStreamTextEvents measures event delivery through StreamResult.
func BenchmarkStreamTextEvents(b *testing.B) {
	chunks := make([]string, 1000)
	for i := range chunks {
		chunks[i] = "tok "
	}
	m := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) {
		return scripted.Step{Text: "x", Chunks: chunks, Usage: llm.TokenUsage{InputTokens: 1}}, nil
	})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref()})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N/1000 + 1 {
		for _, err := range inst.Stream(context.Background(), nil, llm.Text("go")).Events() {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkBaselineDirectCycle does by hand what one loop cycle must do at
// least — call the model, run the tool, wrap the result in a message — and
// is the baseline BenchmarkToolLoopCycle is compared with.
func BenchmarkBaselineDirectCycle(b *testing.B) {
	call := llm.ToolCall{ToolCallID: "c", ToolName: "noop", Arguments: map[string]any{"x": 1.0}}
	m := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) {
		return scripted.Step{ToolCalls: []llm.ToolCall{call}, Usage: llm.TokenUsage{InputTokens: 1, OutputTokens: 1}}, nil
	})
	ref := m.Ref()
	h, err := ref.Provider.(llm.LLMProvider).LLMHandler(ref)
	if err != nil {
		b.Fatal(err)
	}
	run := func(context.Context, map[string]any) (any, error) { return "ok", nil }
	ctx := context.Background()
	msgs := []llm.Message{llm.NewUserMessage(llm.Text("go"))}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := h.Complete(ctx, &llm.Request{Messages: msgs})
		if err != nil {
			b.Fatal(err)
		}
		c := resp.Message.ToolCalls[0]
		r, _ := run(ctx, c.Arguments)
		msgs = append(msgs, resp.Message, llm.NewToolResultMessage([]llm.ToolResult{{ToolCallID: c.ToolCallID, Result: r}}))
	}
}
