package uaipagent_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/uaipagent"
)

// An agent walks a two-stage workflow served over UAIP in one run: the
// toolset is resolved before every step, so after the transition the
// model is offered the next stage's task. The scripted model stands in
// for a provider's.
func ExampleNewToolset() {
	type order struct {
		Item string `json:"item"`
	}
	w := &workflow.Workflow{Name: "shop", InitialStage: "browse",
		Stages: map[string]*workflow.Stage{
			"browse": {Tasks: map[string]*workflow.Task{"find": workflow.NewTask("find", "Find an item.",
				func(_ context.Context, o order, _ *workflow.TaskState) (any, error) {
					return o.Item + " is in stock", nil
				})}},
			"buy": {Tasks: map[string]*workflow.Task{"pay": workflow.NewTask("pay", "Pay for an item.",
				func(_ context.Context, o order, _ *workflow.TaskState) (any, error) { return "paid for " + o.Item, nil })}},
		},
		Transitions: map[string][]string{"browse": {"buy"}},
	}
	engine := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := engine.Register(w); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(engine, nil))
	defer srv.Close()

	ctx := context.Background()
	ts, err := uaipagent.NewToolset(ctx, workflow.NewClient(srv.URL, nil), "shop")
	if err != nil {
		panic(err)
	}
	step := func(tool string, args map[string]any) scripted.Step {
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: tool, ToolName: tool, Arguments: args}}}
	}
	model := scripted.New(
		step("find", map[string]any{"item": "tea"}),
		step(uaipagent.ToolTransition, map[string]any{"stage": "buy"}),
		step("pay", map[string]any{"item": "tea"}),
		scripted.Step{Text: "Bought tea."},
	)
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}, Toolsets: []agent.Toolset{ts}})
	if err != nil {
		panic(err)
	}
	res, err := a.Generate(ctx, llm.Text("Buy tea."), nil)
	if err != nil {
		panic(err)
	}
	for _, r := range model.Requests() {
		var names []string
		for _, t := range r.Tools {
			names = append(names, t.Name)
		}
		fmt.Println(names)
	}
	fmt.Println(res.Turn.Text(), "stage:", ts.Stage())
	// Output:
	// [find uaip_stage_transition uaip_state_input]
	// [find uaip_stage_transition uaip_state_input]
	// [pay uaip_state_input]
	// [pay uaip_state_input]
	// Bought tea. stage: buy
}
