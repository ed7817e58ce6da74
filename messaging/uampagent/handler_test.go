package uampagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/uampagent"
)

// lookupTool answers every question with 42.
func lookupTool() llm.Tool {
	return llm.Tool{Name: "lookup", Description: "looks a question up", Parameters: llm.Schema{"type": "object"},
		Run: func(_ context.Context, a map[string]any) (any, error) { return fmt.Sprint("42 for ", a["q"]), nil }}
}

func newTestAgent(t *testing.T, m *scripted.Model, tools ...llm.Tool) *agent.Agent {
	t.Helper()
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref(), Tools: tools}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// collectAll reads a reply to the end: its deltas, and the error that ended
// it (nil after done).
func collectAll(t *testing.T, r *messaging.Reply) ([]*envelope.Delta, error) {
	t.Helper()
	var ds []*envelope.Delta
	for d, err := range r.Deltas() {
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// eventName is "uap:<type>" or "upp:<type>".
func eventName(ev agent.Event) string {
	if ev.UAP != nil {
		return "uap:" + string(ev.UAP.Type)
	}
	if ev.UPP != nil {
		return "upp:" + string(ev.UPP.Type)
	}
	return "?"
}

func TestUAMP_Agent_AskStreamsRun(t *testing.T) {
	m := scripted.New()
	env := newTestEnv(t, uampagent.NewHandler(newTestAgent(t, m, lookupTool()), nil))
	for _, b := range bindings() {
		t.Run(b.name, func(t *testing.T) {
			m.Push(
				scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "c1", ToolName: "lookup", Arguments: map[string]any{"q": "answer"}}}},
				scripted.Step{Text: "The answer is 42."},
			)
			c := env.client(t, b.b)
			reply, err := c.Ask(context.Background(), ask("What is the answer?"))
			if err != nil {
				t.Fatal(err)
			}
			ds, err := collectAll(t, reply)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			var events []string
			for i, d := range ds {
				if d.Seq != int64(i) {
					t.Fatalf("delta %d has seq %d", i, d.Seq)
				}
				switch d.Type {
				case envelope.DeltaChunk:
					var p struct{ Content string }
					json.Unmarshal(d.Payload, &p)
					text.WriteString(p.Content)
				case envelope.DeltaProgress:
					var p struct{ Event agent.Event }
					if err := json.Unmarshal(d.Payload, &p); err != nil {
						t.Fatalf("progress %s: %v", d.Payload, err)
					}
					ev := p.Event
					events = append(events, eventName(ev))
					if ev.UPP != nil && (ev.UPP.Type == llm.MessageStart || ev.UPP.Type == llm.ToolCallDelta) {
						t.Errorf("framing event forwarded: %s", d.Payload)
					}
				}
			}
			if text.String() != "The answer is 42." {
				t.Errorf("chunks %q", text.String())
			}
			last := ds[len(ds)-1]
			var done uampagent.Done
			if last.Type != envelope.DeltaDone || json.Unmarshal(last.Payload, &done) != nil || done.Content != "The answer is 42." || done.Usage.TotalTokens == 0 {
				t.Errorf("final delta %s %s", last.Type, last.Payload)
			}
			joined := strings.Join(events, " ")
			for _, want := range []string{"uap:step_start", "uap:action", "upp:tool_execution_start", "upp:tool_execution_end", "uap:observation", "uap:step_end"} {
				if !strings.Contains(joined, want) {
					t.Errorf("no %s among the progress events: %s", want, joined)
				}
			}
		})
	}
}

// blockingModel blocks every call until its context ends, announcing the
// call on started and the cancellation on cancelled.
func blockingModel() (m *scripted.Model, started, cancelled chan struct{}) {
	started, cancelled = make(chan struct{}, 8), make(chan struct{}, 8)
	m = scripted.NewFunc(func(ctx context.Context, _ *llm.Request) (scripted.Step, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return scripted.Step{}, ctx.Err()
	})
	return m, started, cancelled
}

func TestUAMP_Agent_CancelAbortsRun(t *testing.T) {
	m, started, cancelled := blockingModel()
	env := newTestEnv(t, uampagent.NewHandler(newTestAgent(t, m), nil))
	for _, b := range bindings() {
		t.Run(b.name, func(t *testing.T) {
			c := env.client(t, b.b)
			reply, err := c.Ask(context.Background(), ask("think forever"))
			if err != nil {
				t.Fatal(err)
			}
			var last *envelope.Delta
			for d, err := range reply.Deltas() {
				if err != nil {
					t.Fatal(err)
				}
				last = d
				if d.Seq == 0 { // step_start: the model is being called
					wait(t, started, "the model call")
					if err := reply.Cancel(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if last == nil || last.Type != envelope.DeltaCancel {
				t.Fatalf("final delta %+v, want cancel", last)
			}
			wait(t, cancelled, "the run's cancellation")
		})
	}
}

func TestUAMP_Agent_Errors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		step  scripted.Step
		body  envelope.Body
		code  envelope.Code
		retry bool
	}{
		{"model failure", scripted.Step{Err: llm.NewError(llm.InvalidResponse, "scripted", "secret provider detail", nil)}, envelope.Body{}, envelope.CodeInternal, false},
		{"provider error (retryable)", scripted.Step{Err: errors.New("secret provider detail")}, envelope.Body{}, envelope.CodeBusy, true},
		{"rate limited", scripted.Step{Err: llm.NewError(llm.RateLimited, "scripted", "slow down", nil)}, envelope.Body{}, envelope.CodeBusy, true},
		{"binary body", scripted.Step{}, envelope.Body{Type: "application/octet-stream", Content: "AAAA"}, envelope.CodeBadRequest, false},
		{"empty body", scripted.Step{}, envelope.Body{Type: "text/plain", Content: " "}, envelope.CodeBadRequest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, uampagent.NewHandler(newTestAgent(t, scripted.New(tc.step)), nil))
			req := ask("hello")
			if tc.body.Type != "" {
				req.Body = tc.body
			}
			reply, err := env.client(t, false).Ask(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = collectAll(t, reply)
			e := (*envelope.Error)(nil)
			if !errors.As(err, &e) || e.Code != tc.code || e.Retry != tc.retry {
				t.Fatalf("got %v, want code %s retry %v", err, tc.code, tc.retry)
			}
			if strings.Contains(e.Message, "secret") {
				t.Errorf("internal text leaked: %q", e.Message)
			}
		})
	}
}
