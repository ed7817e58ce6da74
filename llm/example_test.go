package llm_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// A model that calls a tool, then answers. The scripted model stands in for
// a provider such as anthropic.Model("claude-sonnet-4-5", nil).
func ExampleLLM() {
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "call_1", ToolName: "add", Arguments: map[string]any{"a": 2, "b": 3}}}},
		scripted.Step{Text: "2 + 3 = 5"},
	)
	type addArgs struct{ A, B float64 }
	add := llm.NewTool("add", "Adds two numbers.",
		llm.MustSchema(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		func(_ context.Context, args addArgs) (any, error) { return args.A + args.B, nil })

	calc, err := llm.LLM(&llm.LLMOptions{Model: model.Ref(), System: "Use the tools.", Tools: []llm.Tool{add}})
	if err != nil {
		panic(err)
	}
	turn, err := calc.Generate(context.Background(), nil, llm.Text("What is 2 + 3?"))
	if err != nil {
		panic(err)
	}
	fmt.Println(turn.Text())
	fmt.Println("cycles:", turn.Cycles)
	fmt.Println("tool result:", turn.ToolExecutions[0].Result)
	// Output:
	// 2 + 3 = 5
	// cycles: 2
	// tool result: 5
}

// Streaming prints text as it arrives; Turn returns what Generate would.
func ExampleLLMInstance_Stream() {
	model := scripted.New(scripted.Step{Text: "Hello, streaming world."})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: model.Ref()})
	s := inst.Stream(context.Background(), nil, llm.Text("Greet me"))
	for ev, err := range s.Events() {
		if err != nil {
			panic(err)
		}
		if ev.Type == llm.TextDelta {
			fmt.Print(ev.Delta.Text)
		}
	}
	turn, _ := s.Turn()
	fmt.Println()
	fmt.Println(turn.Usage.OutputTokens, "output tokens")
	// Output:
	// Hello, streaming world.
	// 3 output tokens
}

// Structured output: the parsed object is in Turn.Data.
func ExampleLLMOptions_structure() {
	model := scripted.New(scripted.Step{Data: map[string]any{"name": "Ada", "age": 36}})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: model.Ref(),
		Structure: llm.MustSchema(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}}`)})
	turn, _ := inst.Generate(context.Background(), nil, llm.Text("Ada Lovelace was 36."))
	fmt.Println(turn.Data)
	// Output: map[age:36 name:Ada]
}
