package peers

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/bench/peers/scenario"
	"github.com/agentry-dev/agentry/llm"
)

// The streaming pair: the same turn, streamed, with the final answer in
// answerChunks text deltas, all read by the caller. It measures what
// agentry's agent layer adds to a streaming run over its own streaming
// tool loop (issue 17: at most 1.3×), so it is measured against
// agentry-llm-stream rather than against the floor.

// answerChunks is how many text_delta events carry the final answer.
const answerChunks = 20

var answerDeltas = splitInto(scenario.Answer, answerChunks)

// splitInto cuts s into n pieces of about equal length in runes.
func splitInto(s string, n int) []string {
	r := []rune(s)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

// Stream is Complete, streamed as a provider adapter streams: the tool
// calls as one tool_call_delta each, the answer as answerChunks deltas.
func (m agentryModel) Stream(ctx context.Context, req *llm.Request, emit func(llm.StreamEvent)) (*llm.Response, error) {
	resp, err := m.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	emit(llm.StreamEvent{Type: llm.MessageStart})
	if calls := resp.Message.ToolCalls; len(calls) > 0 {
		for i, c := range calls {
			emit(llm.StreamEvent{Type: llm.ContentBlockStart, Index: i})
			emit(llm.StreamEvent{Type: llm.ToolCallDelta, Index: i, Delta: llm.EventDelta{ToolCallID: c.ToolCallID, ToolName: c.ToolName, ArgumentsJSON: string(c.ArgumentsJSON)}})
			emit(llm.StreamEvent{Type: llm.ContentBlockStop, Index: i})
		}
	} else {
		emit(llm.StreamEvent{Type: llm.ContentBlockStart})
		for _, d := range answerDeltas {
			emit(llm.StreamEvent{Type: llm.TextDelta, Delta: llm.EventDelta{Text: d}})
		}
		emit(llm.StreamEvent{Type: llm.ContentBlockStop})
	}
	emit(llm.StreamEvent{Type: llm.MessageStop})
	return resp, nil
}

// deltas collects the text deltas a caller reads.
type deltas struct {
	b strings.Builder
	n int
}

func (d *deltas) add(ev *llm.StreamEvent) {
	if ev.Type == llm.TextDelta {
		d.b.WriteString(ev.Delta.Text)
		d.n++
	}
}

func (d *deltas) check(final string) error {
	if d.n != answerChunks || d.b.String() != final {
		return fmt.Errorf("read %d text deltas %q, want %d making %q", d.n, d.b.String(), answerChunks, final)
	}
	return nil
}

func newAgentryLLMStream(rec *scenario.Record) (scenario.Turn, error) {
	opts := agentryOptions(rec)
	inst, err := llm.LLM(&opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) {
		s := inst.Stream(ctx, nil, llm.Text(scenario.Question))
		var d deltas
		for ev, err := range s.Events() {
			if err != nil {
				return "", err
			}
			d.add(&ev)
		}
		turn, err := s.Turn()
		if err != nil {
			return "", err
		}
		return turn.Text(), d.check(turn.Text())
	}, nil
}

func newAgentryAgentStream(rec *scenario.Record) (scenario.Turn, error) {
	a, err := agent.New(&agent.Options{LLMOptions: agentryOptions(rec)})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) {
		s := a.Stream(ctx, llm.Text(scenario.Question), nil)
		var d deltas
		for ev, err := range s.Events() {
			if err != nil {
				return "", err
			}
			if ev.UPP != nil {
				d.add(ev.UPP)
			}
		}
		res, err := s.Result()
		if err != nil {
			return "", err
		}
		return res.Turn.Text(), d.check(res.Turn.Text())
	}, nil
}
