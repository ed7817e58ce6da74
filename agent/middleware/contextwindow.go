package middleware

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
)

// ContextWindowOptions configures ContextWindow. Each bound is off at zero;
// the zero value changes nothing.
type ContextWindowOptions struct {
	// KeepToolResults prunes old tool output: the results of all but the
	// last KeepToolResults tool result messages (one per tool round) are
	// replaced with a placeholder, "[tool output pruned: 1234 bytes]".
	// Results shorter than their placeholder are left alone.
	KeepToolResults int
	// MaxMessages is a sliding window: the history keeps its last
	// MaxMessages messages, plus the first user message (see
	// DropFirstUserMessage).
	MaxMessages int
	// MaxTokens bounds the history's estimated size: the window shrinks
	// from its start until the estimate fits (the first user message kept
	// and the last message with its tool call always stay, whatever their
	// size).
	MaxTokens int
	// Estimate estimates a message's tokens for MaxTokens; nil means
	// EstimateTokens.
	Estimate func(llm.Message) int
	// DropFirstUserMessage lets the window drop the first user message.
	// By default it is kept ahead of the window: it usually states the
	// task, and some providers want a conversation to start with a user
	// message.
	DropFirstUserMessage bool
}

// estimateTokens is the default token estimate of ContextWindow: a quarter
// of the message's text length in bytes, tool call names and arguments
// included, rounded up. Media blocks count nothing; pass an Estimate (or
// a tokenizer) when they matter.
func estimateTokens(m llm.Message) int {
	n := len(m.Text())
	if a, ok := m.(*llm.AssistantMessage); ok {
		for _, c := range a.ToolCalls {
			n += len(c.ToolName) + len(c.RawArguments)
			if c.Arguments != nil {
				if b, err := json.Marshal(c.Arguments); err == nil {
					n += len(b)
				}
			}
		}
	}
	return (n + 3) / 4
}

// ContextWindow returns middleware that keeps the history within bounds
// through State.WithContext (UAP-1.1 §6.3): it prunes old tool output and
// keeps a sliding window of recent messages, by count and by estimated
// tokens. It applies its bounds at the start of a run (to the history
// with the new input, which always stays) and after every step.
//
// The history stays valid for providers: a window never starts with a
// tool result message (it moves back to include the assistant message
// with the tool calls, so it may exceed MaxMessages by the rest of that
// round), and pruning replaces a result's content but keeps the result
// and its call id, so every call keeps its result and every result its
// call. A pruned message keeps its id. Without DropFirstUserMessage the
// kept first user message sits right before the window.
//
// The pruned history is the state's: Result.State, checkpoints and the
// following steps all see it, and what was dropped is gone from them
// (Result.Turn still holds every message of the run). A middleware
// listed before ContextWindow sees each step's state before it is pruned.
func ContextWindow(options *ContextWindowOptions) agent.Middleware {
	var opts ContextWindowOptions
	if options != nil {
		opts = *options
	}
	if opts.Estimate == nil {
		opts.Estimate = estimateTokens
	}
	return &contextWindow{opts: opts}
}

type contextWindow struct {
	opts ContextWindowOptions
}

func (w *contextWindow) Name() string { return "context-window" }

// Before bounds the starting history together with the new input, so that
// the first model call is within bounds.
func (w *contextWindow) Before(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
	msgs := mc.State.Messages()
	if mc.Input != nil {
		msgs = append(msgs, mc.Input)
	}
	out, changed := w.apply(msgs)
	if !changed {
		return nil, nil
	}
	if mc.Input != nil {
		out = out[:len(out)-1] // the input is always the last message kept
	}
	next := *mc
	next.State = mc.State.WithContext(out)
	return &next, nil
}

// OnStep bounds the history between steps.
func (w *contextWindow) OnStep(ctx context.Context, mc *agent.MiddlewareContext, step agent.StepInfo) (*agent.State, error) {
	out, changed := w.apply(step.State.Messages())
	if !changed {
		return nil, nil
	}
	return step.State.WithContext(out), nil
}

func (w *contextWindow) After(ctx context.Context, mc *agent.MiddlewareContext, res *agent.Result) (*agent.Result, error) {
	return res, nil
}

func (w *contextWindow) OnError(ctx context.Context, mc *agent.MiddlewareContext, err error) (*agent.Result, error) {
	return nil, nil
}

// apply bounds msgs; it returns msgs itself when nothing changed.
func (w *contextWindow) apply(msgs []llm.Message) ([]llm.Message, bool) {
	o := w.opts
	changed := false
	if o.KeepToolResults > 0 {
		msgs, changed = pruneToolResults(msgs, o.KeepToolResults)
	}
	first := -1 // the first user message, kept ahead of the window
	if !o.DropFirstUserMessage {
		first = slices.IndexFunc(msgs, func(m llm.Message) bool { return m.Type() == llm.TypeUser })
	}
	start := 0
	if o.MaxMessages > 0 && len(msgs) > o.MaxMessages {
		start = windowStart(msgs, len(msgs)-o.MaxMessages)
	}
	if o.MaxTokens > 0 {
		est := make([]int, len(msgs))
		total := 0
		for i, m := range msgs {
			est[i] = o.Estimate(m)
			if i >= start || i == first {
				total += est[i]
			}
		}
		for total > o.MaxTokens {
			next := start + 1
			for next < len(msgs) && msgs[next].Type() == llm.TypeToolResult {
				next++
			}
			if next >= len(msgs) {
				break // the last message and its calls stay
			}
			for i := start; i < next; i++ {
				if i != first {
					total -= est[i]
				}
			}
			start = next
		}
	}
	if start == 0 || (start == 1 && first == 0) {
		return msgs, changed
	}
	out := make([]llm.Message, 0, len(msgs)-start+1)
	if first >= 0 && first < start {
		out = append(out, msgs[first])
	}
	return append(out, msgs[start:]...), true
}

// windowStart moves a window's start back from i until it is not a tool
// result, so that no result is separated from its call.
func windowStart(msgs []llm.Message, i int) int {
	for i > 0 && msgs[i].Type() == llm.TypeToolResult {
		i--
	}
	return i
}

// pruneToolResults replaces the results of all but the last keep tool
// result messages with placeholders; msgs itself is not modified.
func pruneToolResults(msgs []llm.Message, keep int) ([]llm.Message, bool) {
	var out []llm.Message
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		tr, ok := msgs[i].(*llm.ToolResultMessage)
		if !ok {
			continue
		}
		if seen++; seen <= keep {
			continue
		}
		if p := prunedResults(tr); p != nil {
			if out == nil {
				out = slices.Clone(msgs)
			}
			out[i] = p
		}
	}
	if out == nil {
		return msgs, false
	}
	return out, true
}

const prunedPrefix = "[tool output pruned: "

// prunedResults returns tr with its long results replaced by
// placeholders, or nil when no result is worth pruning.
func prunedResults(tr *llm.ToolResultMessage) *llm.ToolResultMessage {
	var results []llm.ToolResult
	for i, r := range tr.Results {
		text := llm.ResultText(r.Result)
		placeholder := fmt.Sprintf("%s%d bytes]", prunedPrefix, len(text))
		if len(text) <= len(placeholder) || strings.HasPrefix(text, prunedPrefix) {
			continue
		}
		if results == nil {
			results = slices.Clone(tr.Results)
		}
		results[i].Result = placeholder
	}
	if results == nil {
		return nil
	}
	return &llm.ToolResultMessage{MessageInfo: tr.MessageInfo, Results: results}
}
