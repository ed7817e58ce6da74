package agent

import (
	"context"

	"github.com/agentry-dev/agentry/llm"
)

// Rebuild describes an agent whose tools change while it runs (the tasks
// of a workflow's current stage, the actions an app currently offers):
// see GenerateRebuilt.
type Rebuild struct {
	// Tools returns the current tools. It is called before each build and
	// must take the current tools as seen: Changed reports false until
	// they change again.
	Tools func() []llm.Tool
	// Changed reports, without side effects, whether the tools changed
	// since Tools was last called.
	Changed func() bool
	// Context, if set, wraps the context of the whole run once; final
	// reports, at the end of each agent call, whether that call is the
	// last one. govern.Segments fits here: a governed agent then keeps one
	// run across the rebuilt agents, verified when the last one ends.
	Context func(ctx context.Context, final func() bool) context.Context
}

// GenerateRebuilt runs the agent built from opts with rb.Tools() as its
// tools (replacing opts.Tools) and, whenever a step changed the tools,
// ends that run, builds the agent anew with the new tools and continues
// from the state reached (no new input), until a run ends without a
// change. opts.Strategy's stop condition is kept and checked too: once it
// holds, the run ends there. The result's Turn merges the turns of every
// run; its State is the last one.
func GenerateRebuilt(ctx context.Context, opts Options, input llm.Input, state *State, rb Rebuild) (*Result, error) {
	userStop := opts.Strategy.StopCondition
	stopped := false
	opts.Strategy.StopCondition = func(ctx context.Context, s *State) bool {
		if userStop != nil && userStop(ctx, s) {
			stopped = true
			return true
		}
		return rb.Changed()
	}
	if rb.Context != nil {
		ctx = rb.Context(ctx, func() bool { return stopped || !rb.Changed() })
	}
	var turns []*llm.Turn
	var first llm.Message
	for {
		opts.Tools = rb.Tools()
		a, err := New(opts)
		if err != nil {
			return nil, err
		}
		res, err := a.Generate(ctx, input, state)
		if err != nil {
			return nil, err
		}
		if first == nil && len(res.Turn.Messages) > 0 && input != nil {
			first = res.Turn.Messages[0]
		}
		turns = append(turns, res.Turn)
		state, input = res.State, nil
		if stopped || !rb.Changed() {
			return &Result{Turn: MergeTurns(first, turns...), State: state}, nil
		}
	}
}
