package execution_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

func ExampleLoop() {
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "echo", Arguments: map[string]any{"v": "ping"}}}},
		scripted.Step{Text: "The tool said ping."},
	)
	a, _ := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{echo()}},
		Execution:  execution.Loop(&execution.LoopOptions{MaxIterations: 5}),
	})
	res, _ := a.Generate(context.Background(), llm.Text("Call echo with ping."), nil)
	fmt.Println(res.Turn.Text(), "— steps:", res.State.Step())
	// Output: The tool said ping. — steps: 2
}

func ExampleReAct() {
	model := scripted.New(
		scripted.Step{Text: "I need the echo tool."},
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "echo", Arguments: map[string]any{"v": "42"}}}},
		scripted.Step{Text: "I have the value."},
		scripted.Step{Text: "The value is 42."},
	)
	a, _ := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{echo()}},
		Execution:  execution.ReAct(&execution.ReActOptions{}),
	})
	res, _ := a.Generate(context.Background(), llm.Text("What value does echo return for 42?"), nil)
	fmt.Println(res.Turn.Text())
	fmt.Println(res.State.Reasoning())
	// Output:
	// The value is 42.
	// [I need the echo tool. I have the value.]
}

func ExamplePlan() {
	model := scripted.New(
		scripted.Step{Data: map[string]any{"steps": []any{
			map[string]any{"id": "gather", "description": "gather the facts", "dependsOn": []any{}},
			map[string]any{"id": "write", "description": "write the summary", "dependsOn": []any{"gather"}},
		}}},
		scripted.Step{Text: "Facts gathered."},
		scripted.Step{Text: "Summary written."},
		scripted.Step{Text: "Here is the summary."},
	)
	strategy, err := execution.Plan(nil) // fails only on an invalid PlanSchema
	if err != nil {
		panic(err)
	}
	a, _ := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: model.Ref()},
		Execution:  strategy,
	})
	res, err := a.Generate(context.Background(), llm.Text("Summarise the incident."), nil)
	if err != nil {
		panic(err)
	}
	for _, s := range res.State.Plan() {
		fmt.Println(s.ID, s.Status)
	}
	fmt.Println(res.Turn.Text())
	// Output:
	// gather completed
	// write completed
	// Here is the summary.
}
