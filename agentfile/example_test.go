package agentfile_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
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
