package agent

import (
	"context"

	"github.com/agentry-dev/agentry/llm"
)

// Middleware wraps agent execution (UAP-1.1 §9). Before runs in slice
// order before the strategy, After in reverse order on its result, and
// OnError in reverse order on a failure: the first that returns a result
// recovers the run. Implementations must be safe for concurrent runs.
//
// A middleware may also implement StepHook to act between steps,
// toolWrapper to wrap the agent's tools, and StreamWrapper to see a
// streamed run's events before its consumer does. The agent/middleware
// package has Logging, Budget, ContextWindow and ToolArgumentRepair.
type Middleware interface {
	Name() string
	// Before may return a replacement context (a changed input or state);
	// nil keeps mc.
	Before(ctx context.Context, mc *MiddlewareContext) (*MiddlewareContext, error)
	// After may replace the result.
	After(ctx context.Context, mc *MiddlewareContext, result *Result) (*Result, error)
	// OnError may recover from err by returning a result; nil passes the
	// error on.
	OnError(ctx context.Context, mc *MiddlewareContext, err error) (*Result, error)
}

// MiddlewareContext is what middleware sees of a run.
type MiddlewareContext struct {
	Agent *Agent
	// Input is the new input; nil when a run is resumed.
	Input llm.Message
	// State is the state the run starts from.
	State *State
	// Streaming reports whether the run is a Stream.
	Streaming bool
	// Metadata is shared by the middleware of one run.
	Metadata map[string]any

	emit func(Event) // the stream's consumer, before any StreamWrapper; nil when not streaming
}

// Rerun runs the agent again within this run, for middleware that sends
// the run back to work (a repair, a retry): from state with input, through
// every middleware, like Generate. When this run is streamed, the new run
// is streamed to this run's consumer — its events, each through the
// middleware's StreamWrappers once, join this run's stream.
func (mc *MiddlewareContext) Rerun(ctx context.Context, input llm.Input, state *State) (*Result, error) {
	return mc.Agent.run(ctx, input, state, mc.emit)
}

// streamWrapper is an optional interface of Middleware: WrapStream returns
// the function a streamed run's events go through instead of emit — it
// passes them on to emit, changed (Event.Unverified, Event.Metadata), or
// holds them back and passes them on later, while the run lasts. It is
// called once per streamed run, after every Before; the wrapper of the
// first middleware in the slice is the nearest to the consumer. The
// function is called from the run's goroutines concurrently (tool calls,
// plan steps); emit serializes them and may block while the consumer is
// behind.
type streamWrapper interface {
	WrapStream(ctx context.Context, mc *MiddlewareContext, emit func(Event)) func(Event)
}

// stepHook is an optional interface of Middleware: OnStep is called after
// every step of every strategy, in slice order, one call at a time within
// a run (so per-run data in MiddlewareContext.Metadata needs no lock). It may return a replacement state (e.g. a pruned context) that the
// strategy continues from, and an error that ends the run.
type stepHook interface {
	OnStep(ctx context.Context, mc *MiddlewareContext, step StepInfo) (*State, error)
}

// StepInfo describes a finished step.
type StepInfo struct {
	Step  int
	Turn  *llm.Turn // the step's model call(s)
	State *State    // the state reached
}

// toolWrapper is an optional interface of Middleware: WrapTool returns the
// tool to use in place of t (typically with Run wrapped). It is applied
// once per tool of Options.Tools when the agent is created, and to the
// tools of Options.Toolsets each time they are resolved (every step).
type toolWrapper interface {
	WrapTool(t llm.Tool) llm.Tool
}
