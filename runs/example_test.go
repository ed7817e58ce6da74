package runs_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
)

// A governed run of an agent: start it, follow its durable events, and
// read its result. The governor here keeps its journal in memory; a
// server gives it a durable one (store.Open), and then a run survives a
// restart.
func Example() {
	ctx := context.Background()
	forecast := govern.Declare(llm.Tool{Name: "forecast", Description: "Tomorrow's weather in a city.",
		Parameters: llm.Schema{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		Run:        func(ctx context.Context, args map[string]any) (any, error) { return "sunny", nil },
	}, govern.Declaration{Tier: govern.ReadOnly})
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "forecast", Arguments: map[string]any{"city": "Lyon"}}}},
		scripted.Step{Text: "Sunny in Lyon tomorrow."},
	)

	var svc *runs.Service
	g, err := govern.New(ctx, &govern.Options{OnDecision: func(req govern.ApprovalRequest) { svc.OnDecision(req) }})
	if err != nil {
		fmt.Println(err)
		return
	}
	weather, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{forecast}},
		Middleware: []agent.Middleware{g.Middleware(&govern.AgentOptions{Name: "weather"})},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, err = runs.New(ctx, &runs.Options{Governor: g, Agents: map[string]*agent.Agent{"weather": weather}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer svc.Close()

	run, err := svc.Start(ctx, &runs.StartParams{Agent: "weather", Input: "Weather in Lyon tomorrow?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range svc.Events(ctx, run.RequestID, 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Type {
		case runs.EventPhase:
			fmt.Println(ev.Type, ev.From, "→", ev.Phase)
		case runs.EventToolCall:
			fmt.Println(ev.Type, ev.Tool, ev.Tier)
		case runs.EventToolResult:
			fmt.Println(ev.Type, ev.Tool)
		case runs.EventRunStarted, runs.EventEnded:
			fmt.Println(ev.Type)
		}
	}
	run, _ = svc.Get(ctx, run.RequestID)
	fmt.Println(run.Status, run.Output)
	// Output:
	// run_started
	// phase intake → plan
	// phase plan → execute
	// tool_call forecast read_only
	// tool_result forecast
	// phase execute → verify
	// phase verify → deliver
	// ended
	// delivered Sunny in Lyon tomorrow.
}
