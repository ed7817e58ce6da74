package agent

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/llm"
)

// Toolset supplies tools that are resolved before each step: a workflow's
// current stage, the actions a UI offers now, an MCP server's list. An
// agent with Options.Toolsets resolves its tools at the start of every
// step — Options.Tools, then each Toolset's in order — so that what one
// step's tool calls change (a stage transition, a new screen) changes the
// next step's tools, within one run and without rebuilding the agent.
//
// Tools is called with the state the step starts from. One agent may run
// concurrently, so Tools must be safe for concurrent use. An error fails
// the step's model call, and so the run; so does a tool name that is not
// unique across Options.Tools and every Toolset.
type Toolset interface {
	Tools(ctx context.Context, s *State) ([]llm.Tool, error)
}

// Tools returns the tools the agent offers in a step that starts from
// state s: Options.Tools followed by each Toolset's tools, as declared
// (before any ToolWrapper middleware). It fails when a Toolset fails or
// when two tools share a name. Without Toolsets it returns Options.Tools.
func (a *Agent) Tools(ctx context.Context, s *State) ([]llm.Tool, error) {
	dynamic, err := a.resolve(ctx, s)
	if err != nil {
		return nil, err
	}
	return append(append(make([]llm.Tool, 0, len(a.opts.Tools)+len(dynamic)), a.opts.Tools...), dynamic...), nil
}

// resolve returns the tools of every Toolset for a step from s, checking
// that no name is used twice.
func (a *Agent) resolve(ctx context.Context, s *State) ([]llm.Tool, error) {
	if len(a.opts.Toolsets) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(a.opts.Tools))
	for _, t := range a.opts.Tools {
		seen[t.Name] = true
	}
	var dynamic []llm.Tool
	for i, ts := range a.opts.Toolsets {
		tools, err := ts.Tools(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("agent: toolset %d: %w", i, err)
		}
		for _, t := range tools {
			if seen[t.Name] {
				return nil, fmt.Errorf("agent: toolset %d offers tool %q, whose name another tool of the agent has", i, t.Name)
			}
			seen[t.Name] = true
		}
		dynamic = append(dynamic, tools...)
	}
	return dynamic, nil
}

// stepLLM returns the UPP instance a step from s calls the model with: the
// agent's own when it has no Toolsets; otherwise one bound to the static
// tools and the tools resolved for s, each wrapped by the ToolWrapper
// middleware, with the tool ordering (Sequential, DependsOn) computed over
// all of them.
func (a *Agent) stepLLM(ctx context.Context, s *State) (*llm.LLMInstance, error) {
	if len(a.opts.Toolsets) == 0 {
		return a.llm, nil
	}
	dynamic, err := a.resolve(ctx, s)
	if err != nil {
		return nil, err
	}
	lo := a.llm.Options() // the static tools, already wrapped
	tools := make([]llm.Tool, 0, len(lo.Tools)+len(dynamic))
	tools = append(tools, lo.Tools...)
	for _, t := range dynamic {
		tools = append(tools, a.wrapTool(t))
	}
	schedule, err := scheduler(tools)
	if err != nil {
		return nil, err
	}
	ts := *lo.ToolStrategy
	ts.Schedule = a.userSchedule
	if schedule != nil {
		ts.Schedule = schedule
	}
	lo.Tools, lo.ToolStrategy = tools, &ts
	return llm.LLM(&lo)
}

// wrapTool applies the ToolWrapper middleware to t, in slice order.
func (a *Agent) wrapTool(t llm.Tool) llm.Tool {
	for _, m := range a.opts.Middleware {
		if w, ok := m.(toolWrapper); ok {
			t = w.WrapTool(t)
		}
	}
	return t
}
