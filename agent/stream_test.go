package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// uppView is what the tests compare of a UPP event: everything but the
// tool executions' timestamps and results.
type uppView struct {
	Type                                      llm.StreamEventType
	Index                                     int
	Text, ToolCallID, ToolName, ArgumentsJSON string
}

func viewOf(ev *llm.StreamEvent) uppView {
	return uppView{ev.Type, ev.Index, ev.Delta.Text, ev.Delta.ToolCallID, ev.Delta.ToolName, ev.Delta.ArgumentsJSON}
}

// manyChunks is a reply streamed in n text deltas.
func manyChunks(n int) scripted.Step {
	var s scripted.Step
	for i := range n {
		c := fmt.Sprintf("c%d ", i)
		s.Chunks = append(s.Chunks, c)
		s.Text += c
	}
	return s
}

// The UPP events of a streamed run (copied into arrays shared by several
// events, the first sized by the agent's previous run) are the events the
// llm stream yields for the same script, each at an address of its own,
// and none changes after the consumer received it — also when the
// consumer keeps them all, and from run to run of one agent.
func TestUAP_11_2_StreamedUPPEventsStayAsReceived(t *testing.T) {
	steps := func() []scripted.Step {
		return []scripted.Step{toolStep("1"), toolStep("2"), manyChunks(3), toolStep("3"), manyChunks(150)}
	}
	// What the llm stream yields for the same script: the agent's two
	// runs (three steps, then two) as two llm tool loops.
	m := scripted.NewT(t, steps()...)
	inst, err := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{echo()}})
	if err != nil {
		t.Fatal(err)
	}
	var want [2][]uppView
	var history []llm.Message
	for run, in := range []string{"go", "again"} {
		s := inst.Stream(context.Background(), history, llm.Text(in))
		for ev, err := range s.Events() {
			if err != nil {
				t.Fatal(err)
			}
			want[run] = append(want[run], viewOf(&ev))
		}
		turn, err := s.Turn()
		if err != nil {
			t.Fatal(err)
		}
		history = append(history, turn.Messages...)
	}

	a := newAgent(t, scripted.NewT(t, steps()...), agent.Options{})
	var state *agent.State
	seen := map[*llm.StreamEvent]bool{}
	for run, in := range []string{"go", "again"} {
		s := a.Stream(context.Background(), llm.Text(in), state)
		var kept []*llm.StreamEvent
		var got []uppView
		var uapKept []*agent.UAPEvent
		var uapGot []agent.UAPEvent
		for ev, err := range s.Events() {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Source == agent.SourceUAP {
				if slices.Contains(uapKept, ev.UAP) {
					t.Fatalf("run %d: UAP event %d shares its address with an earlier event", run, len(uapKept))
				}
				uapKept = append(uapKept, ev.UAP)
				uapGot = append(uapGot, *ev.UAP)
				continue
			}
			if seen[ev.UPP] {
				t.Fatalf("run %d: event %d shares its address with an earlier event", run, len(kept))
			}
			seen[ev.UPP] = true
			kept = append(kept, ev.UPP)
			got = append(got, viewOf(ev.UPP))
		}
		res, err := s.Result()
		if err != nil {
			t.Fatal(err)
		}
		state = res.State
		if diff := cmp.Diff(want[run], got); diff != "" {
			t.Errorf("run %d: UPP events (-llm stream +agent stream):\n%s", run, diff)
		}
		var after []uppView
		for _, ev := range kept {
			after = append(after, viewOf(ev))
		}
		if diff := cmp.Diff(got, after); diff != "" {
			t.Errorf("run %d: events changed after they were received (-received +at the end):\n%s", run, diff)
		}
		var uapAfter []agent.UAPEvent
		for _, ev := range uapKept {
			uapAfter = append(uapAfter, *ev)
		}
		if diff := cmp.Diff(uapGot, uapAfter); diff != "" {
			t.Errorf("run %d: UAP events changed after they were received (-received +at the end):\n%s", run, diff)
		}
		if want := []int{4 + 4 + 2, 4 + 2}[run]; len(uapGot) != want { // step_start, action, observation, step_end; step_start, step_end
			t.Errorf("run %d: %d UAP events, want %d", run, len(uapGot), want)
		}
	}
}

// concurrentCalls is a strategy that makes two model calls at once, as the
// plan strategy does for independent steps.
type concurrentCalls struct{}

func (concurrentCalls) Name() string { return "concurrent" }

func (concurrentCalls) Execute(ctx context.Context, ec *agent.ExecutionContext) (*agent.Result, error) {
	state := ec.Begin()
	state, step := ec.StartStep(ctx, state, nil)
	var wg sync.WaitGroup
	turns := make([]*llm.Turn, 2)
	errs := make([]error, 2)
	for i := range turns {
		wg.Go(func() {
			turns[i], errs[i] = ec.Call(ctx, step, state, ec.LLM, state.Messages())
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		state = state.WithMessages(turns[i].Messages...)
	}
	state, _, err := ec.EndStep(ctx, step, nil, state, nil)
	if err != nil {
		return nil, err
	}
	return ec.Finish(ctx, state), nil
}

// Two calls of one streamed run that overlap (each waits in its tool for
// the other) each keep their own UPP events: both calls' events arrive,
// intact and at addresses of their own.
func TestUAP_11_2_ConcurrentCallsKeepTheirUPPEvents(t *testing.T) {
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	meet := llm.Tool{Name: "meet", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			arrived.Done()
			select {
			case <-both:
			case <-time.After(10 * time.Second): // a safety net: the calls never overlapped
				return nil, errors.New("the other call never came")
			}
			return args["v"], nil
		}}
	call := func(id string) scripted.Step {
		return scripted.Step{Text: "calling " + id, ToolCalls: []llm.ToolCall{{ToolCallID: id, ToolName: "meet", Arguments: map[string]any{"v": id}}}}
	}
	a := newAgent(t, scripted.NewT(t, call("a"), call("b")), agent.Options{Execution: concurrentCalls{},
		LLMOptions: llm.LLMOptions{Tools: []llm.Tool{meet}}})
	s := a.Stream(context.Background(), llm.Text("go"), nil)
	seen := map[*llm.StreamEvent]bool{}
	var kept []*llm.StreamEvent
	var got []uppView
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Source == agent.SourceUPP {
			if seen[ev.UPP] {
				t.Fatalf("event %d shares its address with an earlier event", len(kept))
			}
			seen[ev.UPP] = true
			kept = append(kept, ev.UPP)
			got = append(got, viewOf(ev.UPP))
		}
	}
	if _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	var after []uppView
	count := map[string]int{}
	for _, ev := range kept {
		after = append(after, viewOf(ev))
		if ev.Type == llm.ToolExecutionEnd {
			count[ev.Delta.ToolCallID]++
		}
	}
	if diff := cmp.Diff(got, after); diff != "" {
		t.Errorf("events changed after they were received (-received +at the end):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1}, count); diff != "" {
		t.Errorf("tool_execution_end events per call (-want +got):\n%s", diff)
	}
}
