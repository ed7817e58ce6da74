// Package uampagent bridges UAMP 1.0 messaging (packages envelope and
// messaging; uamp.dev) to agents (package agent, UAP-1.1 in the
// ProviderProtocol agents repository), in both directions:
//
//   - NewHandler serves an agent.Agent over UAMP: each ask runs the agent
//     and streams its events back as deltas (chunks for its text,
//     progress for the rest, done with its reply);
//   - NewTool makes a remote UAMP agent a tool of a local agent, a
//     sub-agent over the wire (UAP-1.1 §8), whose deltas reach the
//     parent's stream as subagent events.
//
// For example:
//
//	srv := messaging.NewServer(uampagent.NewHandler(a, nil), &messaging.Options{…})
//	research, err := uampagent.NewTool(client, "did:web:research.example", uampagent.ToolOptions{
//		Name: "research", Description: "Researches a question.", Parameters: schema})
//
// The package sits above both sides (docs/architecture.md): envelope and
// messaging import no agent, govern or llm; this package imports them.
package uampagent
