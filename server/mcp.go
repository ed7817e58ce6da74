package server

import (
	"github.com/agentry-dev/agentry/internal/mcpserve"
)

// mountMCPWorkflows serves the workflows to MCP hosts at
// /mcp/workflows/{name}: each MCP session is a UAIP session of the
// engine, so UAIP sees it (GET /api/sessions/{id}) and replicas on one
// store share it.
func (s *Server) mountMCPWorkflows() {
	h := mcpserve.Workflows(s.engine, s.mcpOptions())
	s.core.handle("/mcp/workflows/{name}", h)
	s.core.onShutdownFunc(h.Close)
	s.closers = append(s.closers, h.Close)
}

// mountMCPAgents serves the agents to MCP hosts at /mcp/agents, each a
// tool whose call is a governed run of the run service.
func (s *Server) mountMCPAgents() {
	h := mcpserve.Agents(s.runs, s.mcpAgentList, s.mcpOptions())
	s.core.handle("/mcp/agents", h)
	s.core.onShutdownFunc(h.Close)
	s.closers = append(s.closers, h.Close)
}

func (s *Server) mcpOptions() *mcpserve.Options {
	return &mcpserve.Options{Token: s.cfg.Token, Origins: s.cfg.CORSOrigins, MaxBodyBytes: s.cfg.MaxBodyBytes, Logger: s.log}
}

// setMCPAgents records the agents /mcp/agents lists.
func (s *Server) setMCPAgents(agents []Agent) {
	list := make([]mcpserve.Agent, len(agents))
	for i, a := range agents {
		list[i] = mcpserve.Agent{Name: a.Name, Description: a.Description, Structured: a.Options.Structure != nil}
	}
	s.mcpAgents.Store(&list)
}

func (s *Server) mcpAgentList() []mcpserve.Agent {
	if l := s.mcpAgents.Load(); l != nil {
		return *l
	}
	return nil
}
