package agentfile_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/store"
)

// An agent file defines an agent with a builtin tool; the server runs it
// under governance.
func Example() {
	ctx := context.Background()
	def, err := agentfile.Load(strings.NewReader(`
description: Greets people
model: scripted:demo
tools:
  - builtin: greet
`), "greeter.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	greet := govern.Declare(llm.Tool{Name: "greet", Description: "Greets someone.", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, args map[string]any) (any, error) { return "hello", nil }},
		govern.Declaration{Tier: govern.ReadOnly})

	st, _ := store.Open(ctx, "memory:")
	defer st.Close()
	cfg := &server.Config{Store: st}
	if err := agentfile.Build(cfg, []*agentfile.Definition{def}, &agentfile.Options{Builtins: map[string]llm.Tool{"greet": greet}}); err != nil {
		fmt.Println(err)
		return
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown(ctx)
	run, _ := srv.Runs().Start(ctx, &runs.StartParams{Agent: def.Name, Input: "What is 6 * 7?"})
	run, _ = srv.Runs().Wait(ctx, run.RequestID)
	fmt.Println(def.Name, run.Status)
	// Output:
	// greeter delivered
}

// Every problem of a file is reported with its line.
func ExampleLoad_errors() {
	_, err := agentfile.Load(strings.NewReader(`model: scripted:demo
toolz: []
tools:
  - shell: rm -rf /
`), "agents/bad.yaml")
	fmt.Println(err)
	// Output:
	// agents/bad.yaml:2: /toolz: unknown key
	// agents/bad.yaml:4: /tools/0/shell: unknown tool kind (want builtin, webhook, mcp, workflow, agent or uamp)
}

// The agent of examples/agents/calculator.yaml, built in code with the
// public API instead of a file: the same model, instructions, step limit
// and read-only tool, governed the same way.
func Example_inCode() {
	ctx := context.Background()
	calculate := govern.Declare(llm.NewTool("calculate", "Evaluates an arithmetic expression.",
		llm.Schema{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}, "required": []any{"expression"}},
		func(ctx context.Context, in struct {
			Expression string `json:"expression"`
		}) (any, error) {
			if in.Expression != "6*7" { // a real calculator here
				return nil, fmt.Errorf("cannot evaluate %q", in.Expression)
			}
			return "42", nil
		}), govern.Declaration{Tier: govern.ReadOnly}) // tools: [{builtin: calculate}]
	// model: any provider's model reference (llm/openai, llm/anthropic…);
	// scripted here, so that the example runs offline.
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "calculate", Arguments: map[string]any{"expression": "6*7"}}}},
		scripted.Step{Text: "6*7 = 42."})
	calculator := server.Agent{
		Name:        "calculator",
		Description: "Does arithmetic with the calculate tool",
		Options: agent.Options{
			LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{calculate},
				System: "Use the calculate tool for arithmetic."}, // instructions
			Execution: execution.Loop(&execution.LoopOptions{MaxIterations: 8}), // limits: {max_steps: 8}
		},
	}
	st, _ := store.Open(ctx, "memory:")
	defer st.Close()
	srv, err := server.New(ctx, &server.Config{Store: st, Agents: []server.Agent{calculator}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown(ctx)
	run, _ := srv.Runs().Start(ctx, &runs.StartParams{Agent: "calculator", Input: "What is 6*7?"})
	run, _ = srv.Runs().Wait(ctx, run.RequestID)
	fmt.Println(run.Status, run.Output)
	// Output:
	// delivered 6*7 = 42.
}
