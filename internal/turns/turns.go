// Package turns combines the llm.Turns of consecutive model calls, for the
// execution strategies of agent and agent/execution and for govern.
package turns

import (
	"slices"

	"github.com/agentry-dev/agentry/llm"
)

// Merge combines the turns of consecutive model calls into one: the
// messages in order (preceded by input when not nil, which is not repeated
// when a turn starts with it), tool executions and usage of all, the last
// response and the last structured data.
func Merge(input llm.Message, turns ...*llm.Turn) *llm.Turn {
	t := &llm.Turn{}
	nm, nx := 1, 0
	for _, x := range turns {
		if x != nil {
			nm, nx = nm+len(x.Messages), nx+len(x.ToolExecutions)
		}
	}
	t.Messages = make([]llm.Message, 0, nm)
	if nx > 0 {
		t.ToolExecutions = make([]llm.ToolExecution, 0, nx)
	}
	if input != nil {
		t.Messages = append(t.Messages, input)
	}
	for _, x := range turns {
		if x == nil {
			continue
		}
		msgs := x.Messages
		if len(t.Messages) > 0 && len(msgs) > 0 && msgs[0] == t.Messages[len(t.Messages)-1] {
			msgs = msgs[1:]
		}
		t.Messages = append(t.Messages, msgs...)
		t.ToolExecutions = append(t.ToolExecutions, x.ToolExecutions...)
		t.Cycles += x.Cycles
		t.Usage = t.Usage.Add(x.Usage)
		if x.Response != nil {
			t.Response = x.Response
		}
		if x.Data != nil {
			t.Data = x.Data
		}
	}
	t.Messages = slices.Clip(t.Messages)
	return t
}
