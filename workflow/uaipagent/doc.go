// Package uaipagent bridges UAIP workflows (package workflow; UAIP 0.1 in
// the concierge-hq/uaip repository) to agents (package agent): a
// Toolset offers a session's current stage — its tasks, the allowed
// transitions and the state input — as the tools of an agent, resolved
// before every step, so one agent run walks the workflow while its tools
// change with the stage:
//
//	ts, err := uaipagent.NewToolset(ctx, workflow.NewClient(url, nil), "store")
//	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model},
//		Toolsets: []agent.Toolset{ts}})
//	res, err := a.Generate(ctx, llm.Text("Buy espresso beans."), nil)
//
// Each tool declares the governance tier of its task (UAICP 0.3 §5.3, in
// the UAICP/uaicp repository) and its rollback, so an agent governed by
// govern.Governor.Middleware gates the calls by the server's declarations
// in one run, verified once at its end; RollbackHandler executes the
// recorded rollbacks.
//
// The package sits above both sides (docs/architecture.md): workflow
// imports no agent, govern or llm; this package imports them all.
package uaipagent
