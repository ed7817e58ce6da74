package execution

import (
	"context"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/turns"
	"github.com/agentry-dev/agentry/llm"
)

// DefaultReasoningPrompt is ReAct's default reasoning prompt.
const DefaultReasoningPrompt = "Think step by step about what you need to do next. Consider the current state, what tools are available, and what action would be most helpful. Reason only; do not answer yet."

// DefaultActionPrompt is ReAct's default action prompt.
const DefaultActionPrompt = "Based on your reasoning, take the appropriate action. Use tools if needed, or provide a final answer."

// ReActOptions configures ReAct.
type ReActOptions struct {
	// MaxSteps caps the reason-act-observe cycles; 0 (or llm.Infinity)
	// means no limit.
	MaxSteps int
	// ReasoningPrompt asks for the reasoning; empty uses
	// DefaultReasoningPrompt.
	ReasoningPrompt string
	// ActionPrompt asks for the action after the reasoning; empty uses
	// DefaultActionPrompt.
	ActionPrompt string
}

// ReAct returns the reason-act-observe strategy (UAP-1.1 §5.3). Each step:
//
//  1. Reason: the model is asked ReasoningPrompt; its reply text (or, when
//     it has none, its reasoning blocks) is the step's reasoning, kept in
//     State.Reasoning and reported to OnReason and as a reasoning event.
//  2. Act: the model is asked ActionPrompt and its tool calls run. A
//     reasoning reply that already calls tools is the action: no second
//     call is made.
//  3. Observe: the tool results go back into the history as observations
//     (OnObserve, observation event).
//
// The run ends when an action requests no tools (the final answer), when
// the stop condition holds, or after MaxSteps steps. Prompts and replies
// stay in the state's history: UAP keeps no hidden conversation (§14.2).
// Tools stay declared during reasoning, because providers reject a history
// with tool calls when no tools are declared.
func ReAct(options *ReActOptions) agent.ExecutionStrategy {
	var opts ReActOptions
	if options != nil {
		opts = *options
	}
	if opts.ReasoningPrompt == "" {
		opts.ReasoningPrompt = DefaultReasoningPrompt
	}
	if opts.ActionPrompt == "" {
		opts.ActionPrompt = DefaultActionPrompt
	}
	return react{opts}
}

type react struct{ opts ReActOptions }

func (react) Name() string { return "react" }

func (r react) Execute(ctx context.Context, ec *agent.ExecutionContext) (*agent.Result, error) {
	state := ec.Begin()
	for steps := 0; ; {
		var step int
		state, step = ec.StartStep(ctx, state, map[string]any{"phase": "reasoning"})

		reason, err := ec.Call(ctx, step, state, ec.LLM, state.Messages(), llm.Text(r.opts.ReasoningPrompt))
		if err != nil {
			return nil, err
		}
		state = state.WithMessages(reason.Messages...)
		reasoning := reason.Response.Text()
		if reasoning == "" {
			reasoning = reason.Response.Reasoning()
		}
		state = state.WithReasoning(reasoning)
		if ec.Hooks.OnReason != nil {
			ec.Hooks.OnReason(ctx, step, reasoning)
		}
		ec.Emit(agent.EventReasoning, step, map[string]any{"reasoning": reasoning})

		act := reason
		stepTurn := reason
		if !reason.Response.HasToolCalls() {
			if act, err = ec.Call(ctx, step, state, ec.LLM, state.Messages(), llm.Text(r.opts.ActionPrompt)); err != nil {
				return nil, err
			}
			state = state.WithMessages(act.Messages...)
			stepTurn = turns.Merge(nil, reason, act)
		}
		var stop bool
		state, stop, err = ec.EndStep(ctx, step, stepTurn, state, map[string]any{"phase": "complete"})
		if err != nil {
			return nil, err
		}
		steps++
		if stop || !act.Response.HasToolCalls() || (r.opts.MaxSteps > 0 && r.opts.MaxSteps != llm.Infinity && steps >= r.opts.MaxSteps) {
			break
		}
	}
	return ec.Finish(ctx, state), nil
}
