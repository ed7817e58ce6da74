// Package uiapagent bridges UIAP apps (package uicontrol; UIAP Core 0.1
// at uiap.dev) to agents (package agent): a Toolset offers the actions of
// an app's current capability document as the tools of an agent,
// resolved before every step, so one agent run drives the app while its
// tools follow capabilities.changed (docs/spec-notes/uiap.md, "Actions as
// tools"):
//
//	ua, err := uicontrol.Connect(ctx, transport, &uicontrol.AgentOptions{…})
//	ts, err := uiapagent.NewToolset(ctx, ua, nil)
//	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model},
//		Toolsets: []agent.Toolset{ts}})
//	res, err := a.Generate(ctx, llm.Text("Buy two bags of espresso beans."), nil)
//
// Each tool declares the governance tier its action's risk maps to
// (TierOf; UAICP 0.3 §5.3 in the UAICP/uaicp repository), so an agent
// governed by govern.Governor.Middleware gates the app's actions in one
// run.
//
// The package sits above both sides (docs/architecture.md): uicontrol
// imports no agent, govern or llm; this package imports them all.
package uiapagent
