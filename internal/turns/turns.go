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
	nm, nx, nc, cycles := 1, 0, 0, false
	for _, x := range turns {
		if x != nil {
			nm, nx = nm+len(x.Messages), nx+len(x.ToolExecutions)
			nc += len(x.Usage.Cycles)
			cycles = cycles || x.Usage.Cycles != nil
		}
	}
	t.Messages = make([]llm.Message, 0, nm)
	if nx > 0 {
		t.ToolExecutions = make([]llm.ToolExecution, 0, nx)
	}
	if cycles {
		// TokenUsage.Add would allocate the breakdown once per turn.
		t.Usage.Cycles = make([]llm.CycleUsage, 0, nc)
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
		t.Usage = addUsage(t.Usage, x.Usage)
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

// addUsage is u.Add(v) appending v's cycles to u's, whose capacity Merge
// sized for all of them.
func addUsage(u, v llm.TokenUsage) llm.TokenUsage {
	cycles := append(u.Cycles, v.Cycles...)
	u.Cycles, v.Cycles = nil, nil
	out := u.Add(v)
	out.Cycles = cycles
	return out
}
