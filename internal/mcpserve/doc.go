// Package mcpserve serves agentry's workflows and agents to Model Context
// Protocol hosts: it implements the server side of MCP, specification
// revision 2025-11-25 (modelcontextprotocol.io/specification/2025-11-25),
// over Streamable HTTP and stdio, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// A UAIP-0.1 workflow (package workflow; UAIP 0.1 in the concierge-hq/uaip
// repository) is served as one MCP server per MCP session: the session is
// one UAIP session of the workflow, its tools are the current stage's tasks
// plus stage_transition and state_input, a transition changes them
// (notifications/tools/list_changed), and what UAIP refuses is a tool
// result with isError, so the model can recover. The session's stage and
// state are the resource workflow://{name}/session. Workflows mounts them
// at /mcp/workflows/{name}; ServeStdio serves one over stdio.
//
// The agents a runs.Service runs are served as tools of one MCP server
// (Agents, at /mcp/agents): a call is a governed run, reported by progress
// notifications while it executes; a run that pauses for a human's
// approval is a result saying so, with the approval ids.
//
// docs/spec-notes/mcp.md records the decisions: the stateless revision
// 2026-07-28 is refused, the MCP transport session lives in the replica
// that opened it while the UAIP session lives in the shared store.
package mcpserve
