package agent_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/agenttest"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

func echo() llm.Tool {
	return llm.Tool{Name: "echo", Description: "echoes v", Parameters: llm.Schema{"type": "object"},
		Run: func(_ context.Context, a map[string]any) (any, error) { return fmt.Sprint(a["v"]), nil }}
}

func toolStep(id string) scripted.Step {
	return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: id, ToolName: "echo", Arguments: map[string]any{"v": id}}}}
}

func newAgent(t *testing.T, m *scripted.Model, opts agent.Options) *agent.Agent {
	t.Helper()
	opts.Model = m.Ref()
	if opts.Tools == nil {
		opts.Tools = []llm.Tool{echo()}
	}
	a, err := agent.New(&opts)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	return a
}

func types(s *agent.State) []string {
	var out []string
	for _, m := range s.AllMessages() {
		out = append(out, string(m.Type())+":"+m.Text())
	}
	return out
}

// memStore is a minimal in-memory CheckpointStore for these tests.
type memStore struct {
	mu     sync.Mutex
	states map[string][]byte
	saves  map[string]int
	fail   error
}

func newMemStore() *memStore { return &memStore{states: map[string][]byte{}, saves: map[string]int{}} }

func (m *memStore) Save(_ context.Context, id string, s *agent.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	b, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	m.states[id] = b
	m.saves[id]++
	return nil
}

func (m *memStore) Load(_ context.Context, id string) (*agent.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.states[id]
	if !ok {
		return nil, agent.ErrNoCheckpoint
	}
	return agent.FromJSON(b)
}

func (m *memStore) LoadMetadata(ctx context.Context, id string) (*agent.CheckpointMetadata, error) {
	s, err := m.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	md := agent.NewCheckpointMetadata(id, s)
	return &md, nil
}

func (m *memStore) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	delete(m.states, id)
	m.mu.Unlock()
	return nil
}

func (m *memStore) List(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.states {
		out = append(out, k)
	}
	return out, nil
}

func TestUAP_4_4_GenerateReturnsTurnAndNewState(t *testing.T) {
	m := scripted.NewT(t, toolStep("1"), scripted.Step{Text: "done"})
	a := newAgent(t, m, agent.Options{})
	start := agent.Initial().WithMetadata("user", "kept")
	res, err := a.Generate(context.Background(), llm.Text("go"), start)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:go", "assistant:", "tool_result:1", "assistant:done"}
	if diff := cmp.Diff(want, types(res.State)); diff != "" {
		t.Errorf("state messages (-want +got):\n%s", diff)
	}
	if res.State.Step() != 2 || res.Turn.Cycles != 2 || res.Turn.Text() != "done" || len(res.Turn.Messages) != 4 {
		t.Errorf("step %d, cycles %d, text %q, %d turn messages", res.State.Step(), res.Turn.Cycles, res.Turn.Text(), len(res.Turn.Messages))
	}
	if v, _ := res.State.Value("user"); v != "kept" {
		t.Error("metadata lost")
	}
	if v, _ := res.State.Value(agent.MetadataAgentID); v != a.ID() {
		t.Errorf("agentId metadata = %v", v)
	}
	if start.Len() != 0 || start.Step() != 0 {
		t.Error("the input state was changed")
	}
}

func TestUAP_4_6_AskKeepsHistoryWithoutDuplicates(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Text: "first answer"}, scripted.Step{Text: "second answer"})
	a := newAgent(t, m, agent.Options{})
	r1, err := a.Ask(context.Background(), llm.Text("q1"), agent.Initial())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.Ask(context.Background(), llm.Text("q2"), r1.State)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:q1", "assistant:first answer", "user:q2", "assistant:second answer"}
	if diff := cmp.Diff(want, types(r2.State)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if got := len(m.Requests()[1].Messages); got != 3 {
		t.Errorf("second call sent %d messages, want 3 (history + input, once)", got)
	}
}

func TestUAP_4_7_QueryIsStateless(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Text: "a1"}, scripted.Step{Text: "a2"})
	a := newAgent(t, m, agent.Options{})
	for _, q := range []string{"q1", "q2"} {
		turn, err := a.Query(context.Background(), llm.Text(q))
		if err != nil {
			t.Fatal(err)
		}
		if len(turn.Messages) != 2 {
			t.Errorf("query turn has %d messages", len(turn.Messages))
		}
	}
	if got := len(m.Requests()[1].Messages); got != 1 {
		t.Errorf("second query sent %d messages, want only its input", got)
	}
}

func TestUAP_2_4_InfiniteDefaults(t *testing.T) {
	const rounds = 30 // beyond UPP's default of 10
	steps := make([]scripted.Step, 0, rounds+1)
	for i := range rounds {
		steps = append(steps, toolStep(fmt.Sprint("c", i)))
	}
	m := scripted.NewT(t, append(steps, scripted.Step{Text: "finished"})...)
	res, err := newAgent(t, m, agent.Options{}).Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatalf("default agent stopped early: %v", err)
	}
	if res.State.Step() != rounds+1 || len(res.Turn.ToolExecutions) != rounds {
		t.Errorf("step %d, executions %d", res.State.Step(), len(res.Turn.ToolExecutions))
	}
}

func TestUAP_10_3_ExplicitToolStrategyLimitApplies(t *testing.T) {
	var hooked int
	var ran int
	tool := echo()
	run := tool.Run
	tool.Run = func(ctx context.Context, a map[string]any) (any, error) { ran++; return run(ctx, a) }
	m := scripted.NewT(t, toolStep("1"), toolStep("2"), toolStep("3"))
	a := newAgent(t, m, agent.Options{LLMOptions: llm.LLMOptions{Tools: []llm.Tool{tool},
		ToolStrategy: &llm.ToolUseStrategy{MaxIterations: 2, OnMaxIterations: func(_ context.Context, n int) { hooked = n }}}})
	_, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if !errors.Is(err, llm.InvalidRequest) || hooked != 2 {
		t.Errorf("err %v, OnMaxIterations(%d)", err, hooked)
	}
	if ran != 2 {
		t.Errorf("%d tool runs, want 2: the third round must not run", ran)
	}
}

func TestUAP_4_2_LLMOptionsPassThrough(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Data: map[string]any{"ok": true}})
	schema := llm.Schema{"type": "object"}
	a := newAgent(t, m, agent.Options{LLMOptions: llm.LLMOptions{
		System: "be brief", Params: map[string]any{"temperature": 0.1}, Structure: schema,
		Config: llm.ProviderConfig{Headers: map[string]string{"X-Trace": "1"}},
	}})
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req := m.Requests()[0]
	if req.System != "be brief" || req.Params["temperature"] != 0.1 || req.Structure == nil || req.Config.Headers["X-Trace"] != "1" || len(req.Tools) != 1 {
		t.Errorf("request = %+v", req)
	}
	if diff := cmp.Diff(map[string]any{"ok": true}, res.Turn.Data); diff != "" {
		t.Errorf("Data (-want +got):\n%s", diff)
	}
}

func TestUAP_1_4_UsesUPPTypesDirectly(t *testing.T) {
	if f, _ := reflect.TypeOf(agent.Options{}).FieldByName("LLMOptions"); !f.Anonymous || f.Type != reflect.TypeOf(llm.LLMOptions{}) {
		t.Error("Options does not embed llm.LLMOptions")
	}
	if f, _ := reflect.TypeOf(agent.Result{}).FieldByName("Turn"); f.Type != reflect.TypeOf(&llm.Turn{}) {
		t.Error("Result.Turn is not *llm.Turn")
	}
	if f, _ := reflect.TypeOf(agent.Event{}).FieldByName("UPP"); f.Type != reflect.TypeOf(&llm.StreamEvent{}) {
		t.Error("Event.UPP is not *llm.StreamEvent")
	}
	// No re-export: the agent packages declare no alias of an llm type.
	for _, dir := range []string{".", "execution"} {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			ast.Inspect(p, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSpec); ok && ts.Assign.IsValid() {
					t.Errorf("%s: type alias %s re-exports a type", dir, ts.Name)
				}
				return true
			})
		}
	}
}

func TestUAP_3_4_IDsAreUUIDv4(t *testing.T) {
	store := newMemStore()
	m := scripted.NewT(t, scripted.Step{Text: "ok"})
	a := newAgent(t, m, agent.Options{Checkpoints: store})
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	md := agent.NewCheckpointMetadata(a.SessionID(), res.State)
	for name, id := range map[string]string{"agent": a.ID(), "state": res.State.ID(), "session": a.SessionID(), "checkpoint": md.CheckpointID} {
		if !ids.Valid(id) {
			t.Errorf("%s id %q is not a UUIDv4", name, id)
		}
	}
}

func TestUAP_6_2_StateIsImmutable(t *testing.T) {
	parent := agent.Initial().WithMessage(llm.NewUserMessage(llm.Text("a"))).WithMetadata("k", "v").
		WithReasoning("r1").WithPlan([]agent.PlanStep{{ID: "s1", Description: "d", DependsOn: []string{}, Status: agent.PlanPending}})
	before, _ := parent.MarshalJSON()
	ops := map[string]func(*agent.State) *agent.State{
		"WithMessage":       func(s *agent.State) *agent.State { return s.WithMessage(llm.NewUserMessage(llm.Text("b"))) },
		"WithMessages":      func(s *agent.State) *agent.State { return s.WithMessages(llm.NewUserMessage(llm.Text("b"))) },
		"WithContext":       func(s *agent.State) *agent.State { return s.WithContext(nil) },
		"WithStep":          func(s *agent.State) *agent.State { return s.WithStep(9) },
		"WithMetadata":      func(s *agent.State) *agent.State { return s.WithMetadata("k", "changed") },
		"WithReasoning":     func(s *agent.State) *agent.State { return s.WithReasoning("r2") },
		"WithPlan":          func(s *agent.State) *agent.State { return s.WithPlan(nil) },
		"WithSubagentTrace": func(s *agent.State) *agent.State { return s.WithSubagentTrace(agent.SubagentTrace{SubagentID: "x"}) },
	}
	seen := map[string]bool{parent.ID(): true}
	for name, op := range ops {
		child := op(parent)
		if seen[child.ID()] || !ids.Valid(child.ID()) {
			t.Errorf("%s: id %q not new", name, child.ID())
		}
		seen[child.ID()] = true
		// Appending to a sibling must not write into a shared array.
		op(parent).WithMessage(llm.NewUserMessage(llm.Text("sibling")))
		// Mutating what the accessors return must not reach the state.
		if msgs := child.Messages(); len(msgs) > 0 {
			msgs[0] = llm.NewUserMessage(llm.Text("mutated"))
		}
		child.Metadata()["k"] = "mutated"
		if p := child.Plan(); len(p) > 0 {
			p[0].Status = agent.PlanFailed
			p[0].DependsOn = append(p[0].DependsOn, "x")
		}
		if r := child.Reasoning(); len(r) > 0 {
			r[0] = "mutated"
		}
		after, _ := parent.MarshalJSON()
		if string(after) != string(before) {
			t.Errorf("%s changed the parent", name)
		}
	}
	var nilState *agent.State
	if nilState.Len() != 0 || nilState.WithStep(1).Step() != 1 {
		t.Error("a nil state does not behave as empty")
	}
}

func TestUAP_14_2_DoesNotMutateStateInternally(t *testing.T) {
	m := scripted.NewT(t, toolStep("1"), scripted.Step{Text: "done"})
	a := newAgent(t, m, agent.Options{})
	s := agent.Initial().WithMessage(llm.NewUserMessage(llm.Text("earlier")))
	before, _ := s.MarshalJSON()
	if _, err := a.Generate(context.Background(), llm.Text("go"), s); err != nil {
		t.Fatal(err)
	}
	after, _ := s.MarshalJSON()
	if string(before) != string(after) {
		t.Error("Generate changed the state it was given")
	}
}

func TestUAP_10_HooksOrderAndStopCondition(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		var log []string
		rec := func(s string) { log = append(log, s) }
		m := scripted.NewT(t, toolStep("1"), toolStep("2"))
		a := newAgent(t, m, agent.Options{Strategy: agent.StrategyHooks{
			OnStepStart: func(_ context.Context, step int, _ *agent.State) { rec(fmt.Sprint("start", step)) },
			OnAct:       func(_ context.Context, step int, c []llm.ToolCall) { rec(fmt.Sprint("act", step, len(c))) },
			OnObserve:   func(_ context.Context, step int, x []llm.ToolExecution) { rec(fmt.Sprint("observe", step, len(x))) },
			OnStepEnd:   func(_ context.Context, step int, r *agent.Result) { rec(fmt.Sprint("end", step, r.State.Step())) },
			OnComplete:  func(_ context.Context, r *agent.Result) { rec(fmt.Sprint("complete", r.State.Step())) },
			StopCondition: func(_ context.Context, s *agent.State) bool {
				rec(fmt.Sprint("stop?", s.Step()))
				return s.Step() >= 2
			},
		}})
		res, err := run(a, streaming, llm.Text("go"), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"start1", "act1 1", "observe1 1", "end1 1", "stop?1", "start2", "act2 1", "observe2 1", "end2 2", "stop?2", "complete2"}
		if diff := cmp.Diff(want, log); diff != "" {
			t.Errorf("streaming=%v hooks (-want +got):\n%s", streaming, diff)
		}
		if res.State.Step() != 2 {
			t.Errorf("stopped at step %d", res.State.Step())
		}
	}
}

// run is Generate or, with streaming, Stream drained through Result.
func run(a *agent.Agent, streaming bool, in llm.Input, s *agent.State) (*agent.Result, error) {
	if !streaming {
		return a.Generate(context.Background(), in, s)
	}
	st := a.Stream(context.Background(), in, s)
	for _, err := range st.Events() {
		if err != nil {
			break
		}
	}
	return st.Result()
}

func TestUAP_10_OnErrorOnBothPaths(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		var got error
		var last *agent.State
		m := scripted.NewT(t, toolStep("1"), scripted.Step{Err: llm.NewError(llm.RateLimited, "scripted", "slow down", nil)})
		a := newAgent(t, m, agent.Options{Strategy: agent.StrategyHooks{
			OnError: func(_ context.Context, err error, s *agent.State) { got, last = err, s },
		}})
		_, err := run(a, streaming, llm.Text("go"), nil)
		if !errors.Is(err, llm.RateLimited) || !errors.Is(got, llm.RateLimited) {
			t.Errorf("streaming=%v: err %v, OnError saw %v", streaming, err, got)
		}
		if last == nil || last.Step() != 2 || last.Len() != 3 {
			t.Errorf("streaming=%v: OnError state %v", streaming, types(last))
		}
	}
}

func TestUAP_9_2_MiddlewareOrderAndRecovery(t *testing.T) {
	var log []string
	mw := func(name string) agent.Middleware {
		return agenttest.MiddlewareFuncs{MiddlewareName: name,
			BeforeFunc: func(_ context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
				log = append(log, name+".before")
				return nil, nil
			},
			AfterFunc: func(_ context.Context, _ *agent.MiddlewareContext, r *agent.Result) (*agent.Result, error) {
				log = append(log, name+".after")
				return r, nil
			},
			OnErrorFunc: func(_ context.Context, _ *agent.MiddlewareContext, err error) (*agent.Result, error) {
				log = append(log, name+".onError")
				return nil, nil
			},
		}
	}
	m := scripted.NewT(t, scripted.Step{Text: "ok"})
	a := newAgent(t, m, agent.Options{Middleware: []agent.Middleware{mw("first"), mw("second"), mw("third")}})
	if _, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"first.before", "second.before", "third.before", "third.after", "second.after", "first.after"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	// onError: the first (in reverse order) that returns a result recovers.
	recovered := &agent.Result{State: agent.Initial().WithMetadata("recovered", true), Turn: &llm.Turn{}}
	log = nil
	rescue := agenttest.MiddlewareFuncs{MiddlewareName: "rescue",
		OnErrorFunc: func(_ context.Context, _ *agent.MiddlewareContext, err error) (*agent.Result, error) {
			log = append(log, "rescue.onError")
			return recovered, nil
		}}
	m2 := scripted.NewT(t, scripted.Step{Err: errors.New("provider down")})
	a2 := newAgent(t, m2, agent.Options{Middleware: []agent.Middleware{rescue, mw("inner")}})
	for _, streaming := range []bool{false, true} {
		if !streaming {
			res, err := a2.Generate(context.Background(), llm.Text("go"), nil)
			if err != nil || res != recovered {
				t.Errorf("not recovered: %v", err)
			}
		}
	}
	if diff := cmp.Diff([]string{"inner.before", "inner.onError", "rescue.onError"}, log); diff != "" {
		t.Errorf("error order (-want +got):\n%s", diff)
	}

	// before may replace the input and the state.
	m3 := scripted.NewT(t, scripted.Step{Text: "ok"})
	swap := agenttest.MiddlewareFuncs{MiddlewareName: "swap", BeforeFunc: func(_ context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
		c := *mc
		c.Input = llm.NewUserMessage(llm.Text("rewritten"))
		return &c, nil
	}}
	res, err := newAgent(t, m3, agent.Options{Middleware: []agent.Middleware{swap}}).Generate(context.Background(), llm.Text("original"), nil)
	if err != nil || types(res.State)[0] != "user:rewritten" {
		t.Errorf("before did not replace the input: %v %v", err, types(res.State))
	}
}

func TestUAP_11_StreamEventsAndResultEqualGenerate(t *testing.T) {
	steps := func() []scripted.Step { return []scripted.Step{toolStep("1"), toolStep("2"), {Text: "done"}} }
	gen, err := newAgent(t, scripted.NewT(t, steps()...), agent.Options{}).Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, scripted.NewT(t, steps()...), agent.Options{})
	s := a.Stream(context.Background(), llm.Text("go"), nil)
	var uap []string
	upp := 0
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Source {
		case agent.SourceUAP:
			uap = append(uap, fmt.Sprint(ev.UAP.Type, ev.UAP.Step))
			if ev.UAP.AgentID != a.ID() || ev.UPP != nil {
				t.Errorf("bad uap event %+v", ev)
			}
		case agent.SourceUPP:
			upp++
			if ev.UAP != nil || ev.UPP == nil {
				t.Errorf("bad upp event %+v", ev)
			}
		}
	}
	str, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"step_start1", "action1", "observation1", "step_end1", "step_start2", "action2", "observation2", "step_end2", "step_start3", "step_end3"}
	if diff := cmp.Diff(want, uap); diff != "" {
		t.Errorf("uap events (-want +got):\n%s", diff)
	}
	if upp == 0 {
		t.Error("no upp events")
	}
	if diff := cmp.Diff(shape(gen), shape(str)); diff != "" {
		t.Errorf("stream result differs from generate (-generate +stream):\n%s", diff)
	}
}

// shape is a result without ids, timestamps and durations.
func shape(r *agent.Result) map[string]any {
	return map[string]any{"messages": types(r.State), "step": r.State.Step(), "reasoning": r.State.Reasoning(),
		"plan": r.State.Plan(), "turn": len(r.Turn.Messages), "cycles": r.Turn.Cycles, "usage": r.Turn.Usage, "text": r.Turn.Text()}
}

func TestUAP_11_1_Abort(t *testing.T) {
	started := make(chan struct{})
	block := llm.Tool{Name: "block", Run: func(ctx context.Context, _ map[string]any) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	m := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "block"}}})
	a := newAgent(t, m, agent.Options{LLMOptions: llm.LLMOptions{Tools: []llm.Tool{block}}})
	s := a.Stream(context.Background(), llm.Text("go"), nil)
	go func() { <-started; s.Abort() }()
	if _, err := s.Result(); !errors.Is(err, llm.Cancelled) {
		t.Errorf("err = %v, want CANCELLED", err)
	}
}

func TestUAP_12_3_CheckpointAfterEveryStep(t *testing.T) {
	store := newMemStore()
	m := scripted.NewT(t, toolStep("1"), toolStep("2"), scripted.Step{Text: "done"})
	var ends int
	a := newAgent(t, m, agent.Options{Checkpoints: store, Strategy: agent.StrategyHooks{
		OnStepEnd: func(context.Context, int, *agent.Result) { ends++ },
	}})
	if !ids.Valid(a.SessionID()) {
		t.Fatalf("session id %q not generated", a.SessionID())
	}
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.FlushCheckpoints(context.Background()); err != nil {
		t.Fatal(err)
	}
	saved, failed := a.CheckpointStats()
	if saved < 1 || failed != 0 || ends != 3 {
		t.Errorf("saved %d failed %d, %d steps", saved, failed, ends)
	}
	got, err := store.Load(context.Background(), a.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	if got.Step() != 3 || got.Len() != res.State.Len() {
		t.Errorf("last checkpoint at step %d with %d messages", got.Step(), got.Len())
	}
	if v, _ := res.State.Value(agent.MetadataSessionID); v != a.SessionID() {
		t.Errorf("sessionId metadata = %v", v)
	}
}

func TestUAP_12_3_FailedSavesDoNotFailTheRun(t *testing.T) {
	store := newMemStore()
	store.fail = errors.New("disk full")
	m := scripted.NewT(t, toolStep("1"), scripted.Step{Text: "done"})
	a := newAgent(t, m, agent.Options{Checkpoints: store, SessionID: "fixed-session", Logger: slog.New(slog.DiscardHandler)})
	if _, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil {
		t.Fatalf("run failed because of the store: %v", err)
	}
	a.FlushCheckpoints(context.Background())
	if _, failed := a.CheckpointStats(); failed == 0 {
		t.Error("failures not counted")
	}
	if a.SessionID() != "fixed-session" {
		t.Error("given session id replaced")
	}
}

func TestResumeContinuesTheRun(t *testing.T) {
	store := newMemStore()
	m1 := scripted.New(toolStep("1"), toolStep("2"))
	a1 := newAgent(t, m1, agent.Options{Checkpoints: store})
	_, err := a1.Generate(context.Background(), llm.Text("go"), nil)
	if err == nil || !errors.Is(err, llm.InvalidRequest) { // the script ran out: the process "crashed"
		t.Fatalf("err = %v", err)
	}
	a1.FlushCheckpoints(context.Background())
	m2 := scripted.NewT(t, scripted.Step{Text: "resumed"})
	a2 := newAgent(t, m2, agent.Options{Checkpoints: store})
	res, err := a2.Resume(context.Background(), a1.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:go", "assistant:", "tool_result:1", "assistant:", "tool_result:2", "assistant:resumed"}
	if diff := cmp.Diff(want, types(res.State)); diff != "" {
		t.Errorf("resumed history (-want +got):\n%s", diff)
	}
	if res.State.Step() != 3 {
		t.Errorf("step %d, want numbering to continue at 3", res.State.Step())
	}
	if _, err := a2.Resume(context.Background(), a1.SessionID()); !errors.Is(err, agent.ErrNothingToResume) {
		t.Errorf("second resume: %v", err)
	}
	if _, err := a2.Resume(context.Background(), "no-such-session"); !errors.Is(err, agent.ErrNoCheckpoint) {
		t.Errorf("unknown session: %v", err)
	}
}

func TestUAP_8_3_SequentialAndDependsOn(t *testing.T) {
	var mu sync.Mutex
	var order []string
	mk := func(name string, before, after func()) llm.Tool {
		return llm.Tool{Name: name, Run: func(context.Context, map[string]any) (any, error) {
			if before != nil {
				before()
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if after != nil {
				after()
			}
			return name, nil
		}}
	}
	// fetch runs once "other" of its round ran: the order within a round
	// is decided by the dependencies and this, never by timing.
	otherRan := make(chan struct{}, 2)
	tools := []llm.Tool{
		mk("fetch", func() { <-otherRan }, nil),
		agent.DependsOn(mk("parse", nil, nil), "fetch"),
		mk("other", nil, func() { otherRan <- struct{}{} }),
		agent.Sequential(mk("commit", nil, nil)),
	}
	calls := func(names ...string) scripted.Step {
		var c []llm.ToolCall
		for i, n := range names {
			c = append(c, llm.ToolCall{ToolCallID: fmt.Sprint(i), ToolName: n, Arguments: map[string]any{}})
		}
		return scripted.Step{ToolCalls: c}
	}
	m := scripted.NewT(t, calls("parse", "fetch", "other"), calls("other", "commit", "fetch"), scripted.Step{Text: "ok"})
	if _, err := newAgent(t, m, agent.Options{LLMOptions: llm.LLMOptions{Tools: tools}}).Generate(context.Background(), llm.Text("go"), nil); err != nil {
		t.Fatal(err)
	}
	// Round 1: parse waits for fetch; other runs freely. Round 2: commit
	// waits for other, and fetch waits for commit.
	want := []string{"other", "fetch", "parse", "other", "commit", "fetch"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	cyclic := []llm.Tool{agent.DependsOn(mk("a", nil, nil), "b"), agent.DependsOn(mk("b", nil, nil), "a")}
	if _, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.New().Ref(), Tools: cyclic}}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cyclic dependsOn accepted: %v", err)
	}
}

type countingStrategy struct{ calls int }

func (c *countingStrategy) Name() string { return "single-call" }
func (c *countingStrategy) Execute(ctx context.Context, ec *agent.ExecutionContext) (*agent.Result, error) {
	c.calls++
	state := ec.Begin()
	state, step := ec.StartStep(ctx, state, nil)
	turn, err := ec.Call(ctx, step, state, ec.LLM, state.Messages())
	if err != nil {
		return nil, err
	}
	state, _, err = ec.EndStep(ctx, step, turn, state.WithMessages(turn.Messages...), nil)
	if err != nil {
		return nil, err
	}
	return ec.Finish(ctx, state), nil
}

func TestUAP_5_5_CustomStrategy(t *testing.T) {
	cs := &countingStrategy{}
	m := scripted.NewT(t, toolStep("1"))
	res, err := newAgent(t, m, agent.Options{Execution: cs}).Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs.calls != 1 || res.State.Step() != 1 || res.State.Len() != 3 {
		t.Errorf("calls %d, step %d, %v", cs.calls, res.State.Step(), types(res.State))
	}
}

func TestNoInputNoHistoryIsAnError(t *testing.T) {
	_, err := newAgent(t, scripted.New(), agent.Options{}).Generate(context.Background(), nil, nil)
	if !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("err = %v", err)
	}
}
