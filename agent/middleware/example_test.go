package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/middleware"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// weather is the tool of the examples.
var weather = llm.Tool{
	Name:        "weather",
	Description: "Current weather in a city.",
	Parameters:  llm.MustSchema(`{"type":"object","properties":{"city":{"type":"string","minLength":1}},"required":["city"]}`),
	Run: func(_ context.Context, args map[string]any) (any, error) {
		return fmt.Sprintf("Sunny in %v, 21°C.", args["city"]), nil
	},
}

// The scripted model stands in for a provider such as
// anthropic.Model("claude-sonnet-4-5", nil).
func weatherModel() *scripted.Model {
	return scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "weather", Arguments: map[string]any{"city": "Lyon"}}},
			Usage: llm.TokenUsage{InputTokens: 120, OutputTokens: 20}},
		scripted.Step{Text: "It is sunny in Lyon.", Usage: llm.TokenUsage{InputTokens: 160, OutputTokens: 10}},
	)
}

func ExampleLogging() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "agent_id" { // not reproducible
				return slog.Attr{}
			}
			return a
		},
	}))
	a, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: weatherModel().Ref(), Tools: []llm.Tool{weather}},
		Middleware: []agent.Middleware{middleware.Logging(&middleware.LoggingOptions{Logger: logger, NoTiming: true})},
	})
	if err != nil {
		panic(err)
	}
	if _, err := a.Generate(context.Background(), llm.Text("Weather in Lyon?"), nil); err != nil {
		panic(err)
	}
	// Output:
	// level=INFO msg="agent start" streaming=false history=0 step=0 input_type=user input_bytes=16 input_blocks=1
	// level=INFO msg="agent step" step=1 tool_calls=1 tools=[weather] tool_errors=0 input_tokens=120 output_tokens=20 history=3
	// level=INFO msg="agent step" step=2 tool_calls=0 tool_errors=0 input_tokens=160 output_tokens=10 history=4
	// level=INFO msg="agent end" steps=2 cycles=2 tool_calls=1 input_tokens=280 output_tokens=30 history=4
}

// A budget stops the run after the step that crosses it; the error's state
// resumes it, with a new budget.
func ExampleBudget() {
	a, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: weatherModel().Ref(), Tools: []llm.Tool{weather}},
		Middleware: []agent.Middleware{middleware.Budget(&middleware.BudgetOptions{
			MaxCost: 0.00065,
			Prices:  map[string]middleware.Price{"scripted:scripted": {Input: 3, Output: 15}},
		})},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_, err = a.Generate(ctx, llm.Text("Weather in Lyon?"), nil)
	var be *middleware.BudgetExceededError
	if errors.As(err, &be) {
		fmt.Println(err)
		fmt.Println("stopped after step", be.State.Step())
	}
	res, err := a.Generate(ctx, nil, be.State)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Turn.Text())
	// Output:
	// middleware: budget exceeded: cost used 0.00066, limit 0.00065
	// stopped after step 1
	// It is sunny in Lyon.
}

// Old tool output is pruned and the window slides, keeping the task.
func ExampleContextWindow() {
	var script []scripted.Step
	for _, city := range []string{"Lyon", "Nice", "Brest", "Lille"} {
		script = append(script, scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "report", Arguments: map[string]any{"city": city}}}})
	}
	script = append(script, scripted.Step{Text: "Done."})
	report := llm.Tool{Name: "report", Run: func(_ context.Context, args map[string]any) (any, error) {
		return fmt.Sprintf("%v: %s", args["city"], strings.Repeat("long report ", 10)), nil
	}}
	a, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: scripted.New(script...).Ref(), Tools: []llm.Tool{report}},
		Middleware: []agent.Middleware{middleware.ContextWindow(&middleware.ContextWindowOptions{
			MaxMessages:     4,
			KeepToolResults: 1,
		})},
	})
	if err != nil {
		panic(err)
	}
	res, err := a.Generate(context.Background(), llm.Text("Report on four cities."), nil)
	if err != nil {
		panic(err)
	}
	for _, m := range res.State.Messages() {
		text := m.Text()
		if a, ok := m.(*llm.AssistantMessage); ok && a.HasToolCalls() {
			text = fmt.Sprint(a.ToolCalls[0].Arguments)
		}
		fmt.Printf("%s: %.40s\n", m.Type(), text)
	}
	// Output:
	// user: Report on four cities.
	// assistant: map[city:Brest]
	// tool_result: [tool output pruned: 127 bytes]
	// assistant: map[city:Lille]
	// tool_result: Lille: long report long report long repo
	// assistant: Done.
}

// Invalid arguments never reach the tool: the model is told what is wrong,
// with the schema, and calls again.
func ExampleToolArgumentRepair() {
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "weather", Arguments: map[string]any{"town": "Lyon"}}}},
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "weather", Arguments: map[string]any{"city": "Lyon"}}}},
		scripted.Step{Text: "It is sunny in Lyon."},
	)
	a, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{weather}},
		Middleware: []agent.Middleware{middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{})},
	})
	if err != nil {
		panic(err)
	}
	res, err := a.Generate(context.Background(), llm.Text("Weather in Lyon?"), nil)
	if err != nil {
		panic(err)
	}
	for _, x := range res.Turn.ToolExecutions {
		fmt.Println(x.Result)
	}
	fmt.Println(res.Turn.Text())
	// Output:
	// Invalid arguments for tool 'weather': at the top level: missing property 'city'. Call the tool again with arguments matching this JSON Schema: {"properties":{"city":{"minLength":1,"type":"string"}},"required":["city"],"type":"object"}
	// Sunny in Lyon, 21°C.
	// It is sunny in Lyon.
}
