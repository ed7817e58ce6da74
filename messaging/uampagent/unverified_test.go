package uampagent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/agenttest"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/messaging/uampagent"
	"github.com/google/go-cmp/cmp"
)

// unverifying marks every text delta of a streamed run unverified, as a
// governed run does with its answer before verification.
type unverifying struct{ agenttest.MiddlewareFuncs }

func (unverifying) WrapStream(_ context.Context, _ *agent.MiddlewareContext, emit func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		if ev.UPP != nil && ev.UPP.Type == llm.TextDelta {
			ev.Unverified = true
		}
		emit(ev)
	}
}

// An agent's text deltas marked unverified (agent.Event.Unverified) stay
// marked on the wire — chunk {"content", "unverified": true} — and, read
// back by a NewTool tool, in the parent's stream; unmarked ones are
// plain {"content"} chunks.
func TestUAMP_Agent_UnverifiedChunksStayMarked(t *testing.T) {
	for _, marked := range []bool{true, false} {
		opts := agent.Options{}
		if marked {
			opts.Middleware = []agent.Middleware{unverifying{agenttest.MiddlewareFuncs{MiddlewareName: "unverifying"}}}
		}
		m := scripted.New()
		opts.LLMOptions = llm.LLMOptions{Model: m.Ref()}
		a, err := agent.New(&opts)
		if err != nil {
			t.Fatal(err)
		}
		env := newTestEnv(t, uampagent.NewHandler(a, nil))
		for _, b := range bindings() {
			t.Run(b.name+map[bool]string{true: "/marked", false: "/plain"}[marked], func(t *testing.T) {
				m.Push(scripted.Step{Text: "The answer is 42.", Chunks: []string{"The answer ", "is 42."}})
				reply, err := env.client(t, b.b).Ask(context.Background(), ask("What is the answer?"))
				if err != nil {
					t.Fatal(err)
				}
				ds, err := collectAll(t, reply)
				if err != nil {
					t.Fatal(err)
				}
				var chunks []map[string]any
				for _, d := range ds {
					if d.Type == envelope.DeltaChunk {
						var p map[string]any
						if err := json.Unmarshal(d.Payload, &p); err != nil {
							t.Fatal(err)
						}
						chunks = append(chunks, p)
					}
				}
				want := []map[string]any{{"content": "The answer "}, {"content": "is 42."}}
				if marked {
					for _, c := range want {
						c["unverified"] = true
					}
				}
				if diff := cmp.Diff(want, chunks); diff != "" {
					t.Errorf("chunk payloads (-want +got):\n%s", diff)
				}

				// A remote agent tool keeps the marking in the parent's stream.
				m.Push(scripted.Step{Text: "found it", Chunks: []string{"found ", "it"}})
				remote, err := uampagent.NewTool(env.client(t, b.b), serverDID, &uampagent.ToolOptions{Name: "research", Description: "d", Parameters: researchSchema})
				if err != nil {
					t.Fatal(err)
				}
				_, evs := streamRun(t, parentOf(t, remote))
				var inner []string
				for _, e := range evs {
					if e.UAP == nil || e.UAP.Type != agent.EventSubagentEvent {
						continue
					}
					if ev := e.UAP.Data["event"].(agent.Event); ev.UPP != nil && ev.UPP.Type == llm.TextDelta {
						if ev.Unverified != marked {
							t.Errorf("forwarded delta %q: unverified %v", ev.UPP.Delta.Text, ev.Unverified)
						}
						inner = append(inner, ev.UPP.Delta.Text)
					}
				}
				if strings.Join(inner, "") != "found it" {
					t.Errorf("forwarded deltas %q", inner)
				}
			})
		}
	}
}
