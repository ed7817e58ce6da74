// Package agentfile reads agent files — one agent per YAML or JSON file:
// its model, instructions, strategy, limits and tools, each tool with a
// UAICP risk tier — and adds the agents they define to a server.Config,
// where they run under governance like any agent of the server.
//
//	defs, err := agentfile.LoadDir("agents")       // every problem, with file and line
//	cfg := &server.Config{Store: st}
//	err = agentfile.Build(cfg, defs, &agentfile.Options{Builtins: tools})
//	srv, err := server.New(ctx, cfg)                // POST /v1/runs {"agent": "support", …}
//
// The format is documented key by key in docs/agents.md, and
// docs/agent.schema.json is its JSON Schema for editors. Loading is
// strict: unknown keys, wrong types, unknown tool kinds or providers, two
// tools with one name, a write_high_risk tool without a rollback, a
// sub-agent cycle — each is an error naming the file and the line, and
// nothing is half-loaded.
//
// The tool kinds: builtin (a tool the program provides, by name), webhook
// (an HTTP endpoint called as the YAML workflows' webhooks are, with an
// optional compensating call as its UAICP rollback_action), mcp (an MCP
// server's tools, stdio or Streamable HTTP, through the official Go SDK),
// workflow (a UAIP workflow walked in a session per run, its stage's
// tasks as the tools), agent (another agent of the directory as a
// sub-agent, each call a governed child run) and uamp (a remote agent
// asked over UAMP).
package agentfile
