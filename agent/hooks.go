package agent

import (
	"context"

	"github.com/agentry-dev/agentry/llm"
)

// StrategyHooks is AgentStrategy (UAP-1.1 §10): lifecycle hooks called by
// every execution strategy, on both the Generate and the Stream path. Every
// field is optional. Hooks run on the run's goroutine, one at a time.
type StrategyHooks struct {
	// StopCondition is evaluated after each step with the state reached;
	// true ends the run normally. It is the primary termination control,
	// since UAP imposes no limits by default.
	StopCondition func(ctx context.Context, state *State) bool
	// OnStepStart is called when a step begins.
	OnStepStart func(ctx context.Context, step int, state *State)
	// OnReason is called with the reasoning of a ReAct step.
	OnReason func(ctx context.Context, step int, reasoning string)
	// OnAct is called with the tool calls a step's model reply requested.
	OnAct func(ctx context.Context, step int, calls []llm.ToolCall)
	// OnObserve is called with the tool executions of a step.
	OnObserve func(ctx context.Context, step int, executions []llm.ToolExecution)
	// OnStepEnd is called when a step completes, with the step's turn and
	// the state reached.
	OnStepEnd func(ctx context.Context, step int, result *Result)
	// OnComplete is called once when the run completes.
	OnComplete func(ctx context.Context, result *Result)
	// OnError is called once when the run fails, with the last state.
	OnError func(ctx context.Context, err error, state *State)
}
