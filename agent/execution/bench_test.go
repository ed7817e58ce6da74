package execution_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// Each benchmark op is one run of benchSteps steps on the scripted model;
// the reported ns/step is ns/op divided by the steps. BenchmarkBareGenerate
// is the baseline: llm.Generate over the same script (benchSteps tool
// rounds in UPP's own loop, no agent).

const benchSteps = 20

var noop = llm.Tool{Name: "noop", Run: func(context.Context, map[string]any) (any, error) { return "ok", nil }}

// toolThenText replies with a tool call until the conversation holds n
// tool results, then with text.
func toolThenText(n int) scripted.Func {
	return func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		results := 0
		for _, m := range req.Messages {
			if m.Type() == llm.TypeToolResult {
				results++
			}
		}
		if results >= n {
			return scripted.Step{Text: "done", Usage: llm.TokenUsage{InputTokens: 1, OutputTokens: 1}}, nil
		}
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: fmt.Sprint("c", results), ToolName: "noop", Arguments: map[string]any{"x": 1.0}}},
			Usage: llm.TokenUsage{InputTokens: 1, OutputTokens: 1}}, nil
	}
}

func perStep(b *testing.B, steps int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
}

func BenchmarkBareGenerate(b *testing.B) {
	m := scripted.NewFunc(toolThenText(benchSteps))
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{noop}, ToolStrategy: &llm.ToolUseStrategy{MaxIterations: llm.Infinity}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inst.Generate(context.Background(), nil, llm.Text("go")); err != nil {
			b.Fatal(err)
		}
	}
	perStep(b, benchSteps+1)
}

func benchAgent(b *testing.B, fn scripted.Func, strategy agent.ExecutionStrategy, steps int) {
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.NewFunc(fn).Ref(), Tools: []llm.Tool{noop}}, Execution: strategy})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil {
			b.Fatal(err)
		}
	}
	perStep(b, steps)
}

func BenchmarkLoopStep(b *testing.B) {
	benchAgent(b, toolThenText(benchSteps), execution.Loop(&execution.LoopOptions{}), benchSteps+1)
}

// staticToolset offers the same tools at every step.
type staticToolset []llm.Tool

func (ts staticToolset) Tools(context.Context, *agent.State) ([]llm.Tool, error) { return ts, nil }

// BenchmarkLoopStepToolset is BenchmarkLoopStep with the tool offered by
// a Toolset: the cost of resolving the tools at every step.
func BenchmarkLoopStepToolset(b *testing.B) {
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.NewFunc(toolThenText(benchSteps)).Ref()},
		Toolsets: []agent.Toolset{staticToolset{noop}}, Execution: execution.Loop(&execution.LoopOptions{})})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil {
			b.Fatal(err)
		}
	}
	perStep(b, benchSteps+1)
}

func BenchmarkReActStep(b *testing.B) {
	// Per step: a reasoning reply, then a tool call (two model calls).
	n := 0
	fn := func(ctx context.Context, req *llm.Request) (scripted.Step, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Text() == execution.DefaultReasoningPrompt {
			return scripted.Step{Text: "thinking", Usage: llm.TokenUsage{InputTokens: 1}}, nil
		}
		n++
		return toolThenText(benchSteps)(ctx, req)
	}
	benchAgent(b, fn, execution.ReAct(&execution.ReActOptions{}), benchSteps+1)
}

func BenchmarkPlanStep(b *testing.B) {
	steps := make([]any, benchSteps)
	for i := range steps {
		deps := []any{}
		if i > 0 {
			deps = append(deps, fmt.Sprint("s", i-1))
		}
		steps[i] = map[string]any{"id": fmt.Sprint("s", i), "description": "step", "dependsOn": deps}
	}
	plan := map[string]any{"steps": steps}
	fn := func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		if strings.Contains(req.Messages[len(req.Messages)-1].Text(), "Create an execution plan") {
			return scripted.Step{Data: plan, Usage: llm.TokenUsage{InputTokens: 1}}, nil
		}
		return scripted.Step{Text: "done", Usage: llm.TokenUsage{InputTokens: 1}}, nil
	}
	benchAgent(b, fn, mustPlan(&execution.PlanOptions{}), benchSteps+2)
}
