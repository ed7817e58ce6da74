package agent_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// An agent with a tool, run twice on the same conversation. The scripted
// model stands in for a provider such as anthropic.Model(...).
func ExampleNew() {
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "c1", ToolName: "lookup", Arguments: map[string]any{"city": "Oslo"}}}},
		scripted.Step{Text: "It is 4 °C in Oslo."},
		scripted.Step{Text: "You asked about Oslo."},
	)
	lookup := llm.Tool{Name: "lookup", Description: "Temperature of a city.",
		Parameters: llm.MustSchema(`{"type":"object","properties":{"city":{"type":"string"}}}`),
		Run:        func(context.Context, map[string]any) (any, error) { return "4 °C", nil }}

	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{lookup}}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r1, _ := a.Ask(ctx, llm.Text("How cold is Oslo?"), agent.Initial())
	r2, _ := a.Ask(ctx, llm.Text("Which city did I ask about?"), r1.State)
	fmt.Println(r1.Turn.Text())
	fmt.Println(r2.Turn.Text())
	fmt.Println("messages:", r2.State.Len(), "steps:", r2.State.Step())
	// Output:
	// It is 4 °C in Oslo.
	// You asked about Oslo.
	// messages: 6 steps: 3
}

// A sub-agent is a tool with an explicit schema that runs another agent;
// its trace is kept in the parent's state.
func ExampleSubagentTool() {
	helper, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.New(scripted.Step{Text: "Go 1.23 added range-over-func."}).Ref()}})
	research, _ := agent.SubagentTool(helper, &agent.SubagentOptions{
		Name: "research", Description: "Answers a research question.",
		Parameters: llm.MustSchema(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
	})
	lead := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "r1", ToolName: "research", Arguments: map[string]any{"query": "When did Go get iterators?"}}}},
		scripted.Step{Text: "Go got iterators in 1.23."},
	)
	a, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: lead.Ref(), Tools: []llm.Tool{research}}})
	res, err := a.Generate(context.Background(), llm.Text("When did Go get iterators?"), nil)
	if err != nil {
		panic(err)
	}
	tr := res.State.SubagentTraces()[0]
	fmt.Println(res.Turn.Text())
	fmt.Println(tr.SubagentType, tr.Success, tr.Result)
	// Output:
	// Go got iterators in 1.23.
	// research true Go 1.23 added range-over-func.
}

// A run interrupted after a step is resumed from its checkpoint.
func ExampleAgent_Resume() {
	store := newMemStore() // a real program uses checkpoint.File or sqlstore
	first := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "c1", ToolName: "echo", Arguments: map[string]any{"v": "saved"}}}})
	a, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: first.Ref(), Tools: []llm.Tool{echo()}}, Checkpoints: store})
	_, err := a.Generate(context.Background(), llm.Text("go"), nil) // the model "fails" after step 1
	fmt.Println("interrupted:", err != nil)
	a.FlushCheckpoints(context.Background())

	second := scripted.New(scripted.Step{Text: "finished after resume"})
	b, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: second.Ref(), Tools: []llm.Tool{echo()}}, Checkpoints: store})
	res, err := b.Resume(context.Background(), a.SessionID())
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Turn.Text(), "at step", res.State.Step())
	// Output:
	// interrupted: true
	// finished after resume at step 2
}

// stagedTools is a Toolset whose tools follow a stage, as a workflow's do:
// in "browse" the tool "checkout" moves to "pay", whose tool is "pay".
type stagedTools struct{ stage string }

func (s *stagedTools) Tools(context.Context, *agent.State) ([]llm.Tool, error) {
	move := func(name, to string) llm.Tool {
		return llm.Tool{Name: name, Description: name, Parameters: llm.MustSchema(`{"type":"object"}`),
			Run: func(context.Context, map[string]any) (any, error) { s.stage = to; return "now in " + to, nil }}
	}
	if s.stage == "browse" {
		return []llm.Tool{move("checkout", "pay")}, nil
	}
	return []llm.Tool{move("pay", "done")}, nil
}

// An agent whose tools change with the stage its own tool calls reach: the
// Toolset is resolved before every step of the one run.
func ExampleToolset() {
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "checkout", Arguments: map[string]any{}}}},
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "2", ToolName: "pay", Arguments: map[string]any{}}}},
		scripted.Step{Text: "Paid."},
	)
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()},
		Toolsets: []agent.Toolset{&stagedTools{stage: "browse"}}})
	if err != nil {
		panic(err)
	}
	res, err := a.Generate(context.Background(), llm.Text("Check out and pay."), nil)
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
	fmt.Println(res.Turn.Text(), "steps:", res.State.Step())
	// Output:
	// [checkout]
	// [pay]
	// [pay]
	// Paid. steps: 3
}
