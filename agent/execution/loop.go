package execution

import (
	"context"

	"github.com/agentry-dev/agentry/agent"
)

// LoopOptions configures Loop.
type LoopOptions struct {
	// MaxIterations caps the tool rounds of a run; 0 (or llm.Infinity)
	// means no limit. When the cap is reached the run ends normally with
	// the state reached.
	MaxIterations int
}

// Loop returns the loop strategy (UAP-1.1 §5.2), the agent's default: each
// step is one model call and the round of tools it requests; the run ends
// when a reply requests no tools, when the stop condition holds, or at
// MaxIterations rounds.
func Loop(opts *LoopOptions) agent.ExecutionStrategy {
	if opts == nil {
		return loop{}
	}
	return loop{*opts}
}

type loop struct{ opts LoopOptions }

func (loop) Name() string { return "loop" }

func (l loop) Execute(ctx context.Context, ec *agent.ExecutionContext) (*agent.Result, error) {
	return ec.RunLoop(ctx, l.opts.MaxIterations)
}
