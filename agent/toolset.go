package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"

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
//
// A Toolset whose tools have not changed may return the very slice it
// returned before (the same backing array and length): when every
// Toolset does, the agent reuses what it built from them for the last
// step instead of building it again. So a slice once returned must never
// be changed: return a new one for new tools.
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
	sets, err := a.resolveSets(ctx, s)
	if err != nil {
		return nil, err
	}
	if err := a.checkNames(sets); err != nil {
		return nil, err
	}
	var dynamic []llm.Tool
	for _, tools := range sets {
		dynamic = append(dynamic, tools...)
	}
	return dynamic, nil
}

// resolveSets returns each Toolset's tools for a step from s.
func (a *Agent) resolveSets(ctx context.Context, s *State) ([][]llm.Tool, error) {
	sets := make([][]llm.Tool, len(a.opts.Toolsets))
	for i, ts := range a.opts.Toolsets {
		tools, err := ts.Tools(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("agent: toolset %d: %w", i, err)
		}
		sets[i] = tools
	}
	return sets, nil
}

// checkNames fails when a name is used twice across Options.Tools and
// the toolsets' tools.
func (a *Agent) checkNames(sets [][]llm.Tool) error {
	seen := make(map[string]bool, len(a.opts.Tools))
	for _, t := range a.opts.Tools {
		seen[t.Name] = true
	}
	for i, tools := range sets {
		for _, t := range tools {
			if seen[t.Name] {
				return fmt.Errorf("agent: toolset %d offers tool %q, whose name another tool of the agent has", i, t.Name)
			}
			seen[t.Name] = true
		}
	}
	return nil
}

// stepCache remembers the UPP instance built for the last step's tools,
// by the identity of the slices the toolsets returned (see Toolset).
type stepCache struct {
	mu   sync.Mutex
	keys []sliceKey
	inst *llm.LLMInstance
}

type sliceKey struct {
	first *llm.Tool
	n     int
}

func keysOf(sets [][]llm.Tool) []sliceKey {
	keys := make([]sliceKey, len(sets))
	for i, tools := range sets {
		if len(tools) > 0 {
			keys[i] = sliceKey{first: &tools[0], n: len(tools)}
		}
	}
	return keys
}

// stepLLM returns the UPP instance a step from s calls the model with: the
// agent's own when it has no Toolsets; otherwise one bound to the static
// tools and the tools resolved for s, each wrapped by the ToolWrapper
// middleware, with the tool ordering (Sequential, DependsOn) computed over
// all of them — the last step's, when every toolset returned the same
// slice as then.
func (a *Agent) stepLLM(ctx context.Context, s *State) (*llm.LLMInstance, error) {
	if len(a.opts.Toolsets) == 0 {
		return a.llm, nil
	}
	sets, err := a.resolveSets(ctx, s)
	if err != nil {
		return nil, err
	}
	keys := keysOf(sets)
	a.steps.mu.Lock()
	if a.steps.inst != nil && slices.Equal(keys, a.steps.keys) {
		inst := a.steps.inst
		a.steps.mu.Unlock()
		return inst, nil
	}
	a.steps.mu.Unlock()
	if err := a.checkNames(sets); err != nil {
		return nil, err
	}
	lo := a.llm.Options() // the static tools, already wrapped
	tools := slices.Clone(lo.Tools)
	for _, set := range sets {
		for _, t := range set {
			tools = append(tools, a.wrapTool(t))
		}
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
	inst, err := llm.LLM(&lo)
	if err != nil {
		return nil, err
	}
	a.steps.mu.Lock()
	a.steps.keys, a.steps.inst = keys, inst
	a.steps.mu.Unlock()
	return inst, nil
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
