package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/agenttest"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// pathMiddleware appends its name to Metadata["path"] of every event it
// passes on; with rerun, its After runs the agent once more ("again").
type pathMiddleware struct {
	agenttest.MiddlewareFuncs
	rerun  bool
	reruns atomic.Int32
}

func (m *pathMiddleware) WrapStream(_ context.Context, _ *agent.MiddlewareContext, emit func(agent.Event)) func(agent.Event) {
	return func(ev agent.Event) {
		path, _ := ev.Metadata["path"].([]string)
		ev.Metadata = map[string]any{"path": append(slices.Clone(path), m.MiddlewareName)}
		emit(ev)
	}
}

func (m *pathMiddleware) After(ctx context.Context, mc *agent.MiddlewareContext, r *agent.Result) (*agent.Result, error) {
	if !m.rerun || m.reruns.Add(1) > 1 {
		return r, nil
	}
	return mc.Rerun(ctx, llm.Text("again"), r.State)
}

// A StreamWrapper sees a streamed run's events before the consumer (the
// first middleware's wrapper nearest to it), and a run that middleware
// sends back to work with MiddlewareContext.Rerun streams to the same
// consumer, each event through every wrapper once — also when a Before
// replaced the MiddlewareContext.
func TestStreamWrapperAndRerun(t *testing.T) {
	outer := &pathMiddleware{MiddlewareFuncs: agenttest.MiddlewareFuncs{MiddlewareName: "outer",
		BeforeFunc: func(_ context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
			return &agent.MiddlewareContext{Agent: mc.Agent, Input: mc.Input, State: mc.State, Streaming: mc.Streaming, Metadata: mc.Metadata}, nil
		}}}
	inner := &pathMiddleware{MiddlewareFuncs: agenttest.MiddlewareFuncs{MiddlewareName: "inner"}, rerun: true}
	m := scripted.NewT(t, scripted.Step{Text: "first", Chunks: []string{"fir", "st"}}, scripted.Step{Text: "second"})
	a := newAgent(t, m, agent.Options{Middleware: []agent.Middleware{outer, inner}})
	s := a.Stream(context.Background(), llm.Text("go"), nil)
	var texts []string
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"inner", "outer"}, ev.Metadata["path"]); diff != "" {
			t.Fatalf("%+v went through (-want +got):\n%s", ev, diff)
		}
		if ev.Source == agent.SourceUPP && ev.UPP.Type == llm.TextDelta {
			texts = append(texts, ev.UPP.Delta.Text)
		}
	}
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fir", "st", "second"}, texts); diff != "" {
		t.Errorf("text deltas (-want +got):\n%s", diff)
	}
	if res.Turn.Text() != "second" {
		t.Errorf("result %q", res.Turn.Text())
	}

	// Not streamed, Rerun is Generate.
	inner.reruns.Store(0)
	m = scripted.NewT(t, scripted.Step{Text: "first"}, scripted.Step{Text: "second"})
	a = newAgent(t, m, agent.Options{Middleware: []agent.Middleware{outer, inner}})
	if res, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil || res.Turn.Text() != "second" {
		t.Errorf("Generate: %v, %v", res, err)
	}
}

// Unverified and Metadata travel in an event's JSON form.
func TestUAP_11_2_EventJSONCarriesTheMarking(t *testing.T) {
	evs := []agent.Event{
		{Source: agent.SourceUPP, UPP: &llm.StreamEvent{Type: llm.TextDelta, Delta: llm.EventDelta{Text: "hi"}},
			Unverified: true, Metadata: map[string]any{"uaicp.request_id": "r", "n": float64(1)}},
		{Source: agent.SourceUAP, UAP: &agent.UAPEvent{Type: agent.EventStepEnd, Step: 1, AgentID: "a", Data: map[string]any{}}},
	}
	want := []string{
		`{"source":"upp","upp":{"type":"text_delta","index":0,"delta":{"text":"hi"}},"unverified":true,"metadata":{"n":1,"uaicp.request_id":"r"}}`,
		`{"source":"uap","uap":{"type":"step_end","step":1,"agentId":"a","data":{}}}`,
	}
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want[i] {
			t.Errorf("event %d:\n got %s\nwant %s", i, b, want[i])
		}
		var back agent.Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ev, back); diff != "" {
			t.Errorf("event %d round trip (-want +got):\n%s", i, diff)
		}
	}
}
