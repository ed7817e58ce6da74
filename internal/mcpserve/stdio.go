package mcpserve

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/workflow"
)

// Stdio says what ServeStdio serves: the workflow named Workflow of
// Engine when Workflow is set, else the agents of Runs that Agents lists.
type Stdio struct {
	Engine   *workflow.Engine
	Workflow string
	Runs     *runs.Service
	Agents   func() []Agent
}

// ServeStdio serves one MCP session over t — mcp.StdioTransport when a
// host launched this process — until the peer closes it or ctx ends. A
// workflow's UAIP session begins at initialize and ends when ServeStdio
// returns. Options' HTTP settings do not apply.
func ServeStdio(ctx context.Context, t mcp.Transport, s *Stdio, opts *Options) error {
	o := opts.withDefaults()
	if s.Workflow == "" {
		if s.Runs == nil || s.Agents == nil {
			return errors.New("mcp stdio: no workflow and no agents to serve")
		}
		return newAgentsServer(s.Runs, s.Agents, &o).server.Run(ctx, t)
	}
	wf, ok := s.Engine.Workflow(s.Workflow)
	if !ok {
		return errors.New("mcp stdio: no workflow named " + s.Workflow)
	}
	h := &workflowsHandler{engine: s.Engine, opts: o, sessions: map[string]*wfSession{}}
	ws := newWFSession(h, wf)
	defer ws.end()
	return ws.server.Run(ctx, t)
}
