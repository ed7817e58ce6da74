package agent

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/agentry-dev/agentry/llm"
)

// metadataKey is where tool ordering lives in llm.Tool.Metadata.
const metadataKey = "uap"

// Sequential returns t marked sequential (UAP-1.1 §8.3): within a round of
// tool calls, a call of t starts after the calls before it have finished,
// and the calls after it start after it has finished.
func Sequential(t llm.Tool) llm.Tool {
	return withOrder(t, "sequential", true)
}

// DependsOn returns t marked to run after the named tools (UAP-1.1 §8.3):
// within a round, a call of t starts after every call of those tools has
// finished. Cycles between tools are rejected by New.
func DependsOn(t llm.Tool, tools ...string) llm.Tool {
	return withOrder(t, "dependsOn", append([]string(nil), tools...))
}

func withOrder(t llm.Tool, key string, v any) llm.Tool {
	md := maps.Clone(t.Metadata)
	if md == nil {
		md = map[string]any{}
	}
	uap, _ := md[metadataKey].(map[string]any)
	uap = maps.Clone(uap)
	if uap == nil {
		uap = map[string]any{}
	}
	uap[key] = v
	md[metadataKey] = uap
	t.Metadata = md
	return t
}

// toolOrder reads a tool's ordering from its metadata.
func toolOrder(t *llm.Tool) (sequential bool, deps []string) {
	uap, _ := t.Metadata[metadataKey].(map[string]any)
	sequential, _ = uap["sequential"].(bool)
	switch d := uap["dependsOn"].(type) {
	case []string:
		deps = d
	case []any:
		for _, x := range d {
			if s, ok := x.(string); ok {
				deps = append(deps, s)
			}
		}
	}
	return sequential, deps
}

// scheduler computes llm.ToolUseStrategy.Schedule from the tools' ordering
// metadata; nil when no tool has any.
func scheduler(tools []llm.Tool) (func([]llm.ToolCall) [][]int, error) {
	seq := map[string]bool{}
	deps := map[string][]string{}
	ordered := false
	for i := range tools {
		s, d := toolOrder(&tools[i])
		if s || len(d) > 0 {
			ordered = true
		}
		seq[tools[i].Name], deps[tools[i].Name] = s, d
	}
	if !ordered {
		return nil, nil
	}
	if cycle := findCycle(deps); cycle != nil {
		return nil, fmt.Errorf("agent: tools depend on each other in a cycle: %v", cycle)
	}
	return func(calls []llm.ToolCall) [][]int {
		preds := make([][]int, len(calls))
		for i, c := range calls {
			if seq[c.ToolName] {
				for j := range i {
					preds[i] = append(preds[i], j)
				}
				for k := i + 1; k < len(calls); k++ {
					preds[k] = append(preds[k], i)
				}
			}
			for _, d := range deps[c.ToolName] {
				for j, o := range calls {
					if j != i && o.ToolName == d {
						preds[i] = append(preds[i], j)
					}
				}
			}
		}
		return preds // the llm core falls back to call order if this is cyclic
	}, nil
}

func findCycle(deps map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		color[n] = grey
		path = append(path, n)
		for _, d := range deps[n] {
			switch color[d] {
			case grey:
				return append(append([]string(nil), path...), d)
			case white:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		color[n] = black
		return nil
	}
	for n := range deps {
		if color[n] == white {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

// ToolContext is what a tool run by an agent learns about the run, through
// ToolContextFrom(ctx). Sub-agent tools use it to forward events into the
// parent's stream and to record their traces in the parent's state.
type ToolContext struct {
	AgentID   string
	SessionID string
	// Step is the step the call belongs to; State the state at its start.
	Step  int
	State *State
	// Metadata is the run's MiddlewareContext.Metadata: what the run's
	// middleware shares with the tools they wrap (a governed run, say).
	// Tools read it; they must not write it (calls run concurrently).
	Metadata map[string]any

	emit            func(Event) // nil when the run is not streamed
	roundsExhausted bool        // the tool-round limit is reached: run no more tools
	mu              sync.Mutex
	traces          []SubagentTrace
}

type toolContextKey struct{}

// toolCtx is the context a step's tools run in: what
// context.WithValue(ctx, toolContextKey{}, &tc) would make, with the
// ToolContext in the same allocation.
type toolCtx struct {
	context.Context
	tc ToolContext
}

func (c *toolCtx) Value(key any) any {
	if key == (toolContextKey{}) {
		return &c.tc
	}
	return c.Context.Value(key)
}

// ToolContextFrom returns the ToolContext of the agent run executing the
// tool; ok is false outside an agent run.
func ToolContextFrom(ctx context.Context) (*ToolContext, bool) {
	tc, ok := ctx.Value(toolContextKey{}).(*ToolContext)
	return tc, ok
}

// Streaming reports whether the run is streamed, so that Emit reaches a
// consumer.
func (tc *ToolContext) Streaming() bool { return tc.emit != nil }

// Emit sends a UAP event into the run's stream (nothing when not
// streaming).
func (tc *ToolContext) Emit(typ EventType, data map[string]any) {
	if tc.emit != nil {
		tc.emit(Event{Source: SourceUAP, UAP: &UAPEvent{Type: typ, Step: tc.Step, AgentID: tc.AgentID, Data: data}})
	}
}

// RecordTrace adds a sub-agent trace to the state the step ends with
// (UAP-1.1 §8.5). Safe for concurrent use.
func (tc *ToolContext) RecordTrace(t SubagentTrace) {
	tc.mu.Lock()
	tc.traces = append(tc.traces, t)
	tc.mu.Unlock()
}

func (tc *ToolContext) takeTraces() []SubagentTrace {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	t := tc.traces
	tc.traces = nil
	return t
}
