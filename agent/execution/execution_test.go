package execution_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
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

// mustPlan is execution.Plan for options known to be valid.
func mustPlan(opts *execution.PlanOptions) agent.ExecutionStrategy {
	p, err := execution.Plan(opts)
	if err != nil {
		panic(err)
	}
	return p
}

func newAgent(t *testing.T, ref llm.ModelReference, strategy agent.ExecutionStrategy, opts agent.Options) *agent.Agent {
	t.Helper()
	opts.Model, opts.Execution = ref, strategy
	if opts.Tools == nil {
		opts.Tools = []llm.Tool{echo()}
	}
	a, err := agent.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func run(a *agent.Agent, streaming bool, in llm.Input) (*agent.Result, []agent.Event, error) {
	if !streaming {
		r, err := a.Generate(context.Background(), in, nil)
		return r, nil, err
	}
	s := a.Stream(context.Background(), in, nil)
	var evs []agent.Event
	for ev, err := range s.Events() {
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	r, err := s.Result()
	return r, evs, err
}

func texts(s *agent.State) []string {
	var out []string
	for _, m := range s.AllMessages() {
		out = append(out, string(m.Type())+":"+m.Text())
	}
	return out
}

func uapTypes(evs []agent.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Source == agent.SourceUAP {
			out = append(out, string(e.UAP.Type))
		}
	}
	return out
}

func TestUAP_5_2_LoopMaxIterationsEndsTheRunNormally(t *testing.T) {
	m := scripted.NewT(t, toolStep("1"), toolStep("2"))
	res, _, err := run(newAgent(t, m.Ref(), execution.Loop(&execution.LoopOptions{MaxIterations: 2}), agent.Options{}), false, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Step() != 2 || len(res.Turn.ToolExecutions) != 2 {
		t.Errorf("step %d, executions %d", res.State.Step(), len(res.Turn.ToolExecutions))
	}
}

func TestUAP_5_3_ReActReasonActObserve(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		m := scripted.NewT(t,
			scripted.Step{Text: "I should echo the word."},
			toolStep("w1"),
			scripted.Step{Text: "I have what I need."},
			scripted.Step{Text: "The answer is w1."},
		)
		var reasons []string
		a := newAgent(t, m.Ref(), execution.ReAct(&execution.ReActOptions{ReasoningPrompt: "THINK", ActionPrompt: "ACT"}),
			agent.Options{Strategy: agent.StrategyHooks{OnReason: func(_ context.Context, _ int, r string) { reasons = append(reasons, r) }}})
		res, evs, err := run(a, streaming, llm.Text("task"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"user:task", "user:THINK", "assistant:I should echo the word.", "user:ACT", "assistant:", "tool_result:w1",
			"user:THINK", "assistant:I have what I need.", "user:ACT", "assistant:The answer is w1."}
		if diff := cmp.Diff(want, texts(res.State)); diff != "" {
			t.Errorf("streaming=%v history (-want +got):\n%s", streaming, diff)
		}
		if diff := cmp.Diff([]string{"I should echo the word.", "I have what I need."}, res.State.Reasoning()); diff != "" {
			t.Errorf("State.Reasoning (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(res.State.Reasoning(), reasons); diff != "" {
			t.Errorf("OnReason (-want +got):\n%s", diff)
		}
		if res.State.Step() != 2 || res.Turn.Text() != "The answer is w1." {
			t.Errorf("step %d, text %q", res.State.Step(), res.Turn.Text())
		}
		if streaming {
			want := []string{"step_start", "reasoning", "action", "observation", "step_end", "step_start", "reasoning", "step_end"}
			if diff := cmp.Diff(want, uapTypes(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		}
	}
}

func TestUAP_5_3_ReActReasoningThatActsSkipsTheActionCall(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Text: "Echo it now.", ToolCalls: []llm.ToolCall{{ToolCallID: "x", ToolName: "echo", Arguments: map[string]any{"v": "x"}}}},
		scripted.Step{Text: "Done."}, scripted.Step{Text: "Final."})
	res, _, err := run(newAgent(t, m.Ref(), execution.ReAct(&execution.ReActOptions{MaxSteps: 5}), agent.Options{}), false, llm.Text("task"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Requests()) != 3 || res.Turn.Text() != "Final." {
		t.Errorf("%d calls, text %q", len(m.Requests()), res.Turn.Text())
	}
}

// planModel is a function model for plan tests: it answers the planning
// prompt with plans[0] (then plans[1] on replanning), executes step prompts
// (calling the step's tool when the description says "call <tool>"), and
// answers the final prompt.
type planModel struct {
	mu       sync.Mutex
	plans    []any
	executed []string
	prompts  []string
}

func (p *planModel) reply(_ context.Context, req *llm.Request) (scripted.Step, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	text := last.Text()
	if _, ok := last.(*llm.UserMessage); ok {
		p.prompts = append(p.prompts, text)
	}
	switch {
	case last.Type() == llm.TypeToolResult:
		return scripted.Step{Text: "step done with " + last.Text()}, nil
	case strings.Contains(text, "Create an execution plan"):
		if len(p.plans) == 0 {
			return scripted.Step{Text: "no more plans"}, nil
		}
		plan := p.plans[0]
		p.plans = p.plans[1:]
		if s, ok := plan.(string); ok {
			return scripted.Step{Text: s}, nil
		}
		return scripted.Step{Data: plan}, nil
	case strings.HasPrefix(text, "Execute step"):
		id := strings.Split(text, `"`)[1]
		p.executed = append(p.executed, id)
		if i := strings.Index(text, "call "); i >= 0 {
			tool := strings.Fields(text[i+5:])[0]
			return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "t-" + id, ToolName: tool, Arguments: map[string]any{"v": id}}}}, nil
		}
		return scripted.Step{Text: "did " + id}, nil
	case strings.HasPrefix(text, "All steps of the plan are complete"):
		return scripted.Step{Text: "final answer"}, nil
	}
	return scripted.Step{Text: "?"}, nil
}

func planOf(steps ...[3]string) map[string]any {
	var out []any
	for _, s := range steps {
		deps := []any{}
		if s[2] != "" {
			for _, d := range strings.Split(s[2], ",") {
				deps = append(deps, d)
			}
		}
		step := map[string]any{"id": s[0], "description": s[1], "dependsOn": deps}
		if tool, ok := strings.CutPrefix(s[1], "call "); ok {
			step["tool"] = strings.Fields(tool)[0]
		}
		out = append(out, step)
	}
	return map[string]any{"steps": out}
}

func TestUAP_5_4_PlanRunsStepsInDependencyOrder(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		pm := &planModel{plans: []any{planOf(
			[3]string{"fetch", "call echo for the data", ""},
			[3]string{"analyse", "analyse the data", "fetch"},
			[3]string{"notify", "tell the team", ""},
			[3]string{"report", "write the report", "analyse,notify"},
		)}}
		m := scripted.NewFunc(pm.reply)
		var created []agent.PlanStep
		a := newAgent(t, m.Ref(), mustPlan(&execution.PlanOptions{MaxConcurrency: 1}), agent.Options{})
		res, evs, err := run(a, streaming, llm.Text("do the thing"))
		if err != nil {
			t.Fatal(err)
		}
		// MaxConcurrency 1: the first ready step in plan order each time.
		if diff := cmp.Diff([]string{"fetch", "analyse", "notify", "report"}, pm.executed); diff != "" {
			t.Errorf("streaming=%v execution order (-want +got):\n%s", streaming, diff)
		}
		for _, s := range res.State.Plan() {
			if s.Status != agent.PlanCompleted {
				t.Errorf("step %s is %s", s.ID, s.Status)
			}
		}
		if res.Turn.Text() != "final answer" || res.State.Step() != 6 { // plan + 4 steps + answer
			t.Errorf("text %q, step %d", res.Turn.Text(), res.State.Step())
		}
		if streaming {
			for _, e := range evs {
				if e.Source == agent.SourceUAP && e.UAP.Type == agent.EventPlanCreated {
					created = e.UAP.Data["plan"].([]agent.PlanStep)
				}
			}
			for _, s := range created { // plan steps are never changed in place
				if s.Status != agent.PlanPending {
					t.Errorf("the plan_created plan was mutated: %s is %s", s.ID, s.Status)
				}
			}
			got := uapTypes(evs)
			if got[0] != "step_start" || got[1] != "plan_created" || slices.Index(got, "plan_step_start") < 0 || slices.Index(got, "plan_step_end") < 0 {
				t.Errorf("events %v", got)
			}
		}
	}
}

func TestUAP_5_4_IndependentStepsRunConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(3)
	barrier := llm.Tool{Name: "barrier", Run: func(ctx context.Context, _ map[string]any) (any, error) {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return "together", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	pm := &planModel{plans: []any{planOf(
		[3]string{"a", "call barrier", ""}, [3]string{"b", "call barrier", ""}, [3]string{"c", "call barrier", ""},
	)}}
	a := newAgent(t, scripted.NewFunc(pm.reply).Ref(), mustPlan(&execution.PlanOptions{}), agent.Options{LLMOptions: llm.LLMOptions{Tools: []llm.Tool{barrier}}})
	res, _, err := run(a, false, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	// Steps' messages join the state in plan order whatever finished first.
	var results []string
	for _, m := range res.State.AllMessages() {
		if m.Type() == llm.TypeToolResult {
			results = append(results, m.(*llm.ToolResultMessage).Results[0].ToolCallID)
		}
	}
	if diff := cmp.Diff([]string{"t-a", "t-b", "t-c"}, results); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
}

func TestUAP_5_4_ReplanAfterAFailedStep(t *testing.T) {
	flaky := llm.Tool{Name: "flaky", Run: func(context.Context, map[string]any) (any, error) { return nil, errors.New("service unavailable") }}
	pm := &planModel{plans: []any{
		planOf([3]string{"one", "first part", ""}, [3]string{"two", "call flaky to publish", "one"}),
		planOf([3]string{"two-b", "publish another way", ""}),
	}}
	a := newAgent(t, scripted.NewFunc(pm.reply).Ref(), mustPlan(&execution.PlanOptions{}), agent.Options{LLMOptions: llm.LLMOptions{Tools: []llm.Tool{echo(), flaky}}})
	res, _, err := run(a, false, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.State.Plan() {
		got = append(got, s.ID+":"+string(s.Status))
	}
	if diff := cmp.Diff([]string{"one:completed", "two-b:completed"}, got); diff != "" {
		t.Errorf("final plan (-want +got):\n%s", diff)
	}
	var replanPrompt string
	for _, p := range pm.prompts {
		if strings.Contains(p, "could not be completed") {
			replanPrompt = p
		}
	}
	if !strings.Contains(replanPrompt, `Step "two" failed`) || !strings.Contains(replanPrompt, "service unavailable") || !strings.Contains(replanPrompt, "one [completed]") {
		t.Errorf("replan prompt lacks the failure and the plan:\n%s", replanPrompt)
	}
	if diff := cmp.Diff([]string{"one", "two", "two-b"}, pm.executed); diff != "" {
		t.Errorf("executed (-want +got):\n%s", diff)
	}
}

func TestUAP_5_4_NoReplanFailsWithTheStep(t *testing.T) {
	flaky := llm.Tool{Name: "flaky", Run: func(context.Context, map[string]any) (any, error) { return nil, errors.New("boom") }}
	pm := &planModel{plans: []any{planOf([3]string{"x", "call flaky", ""})}}
	a := newAgent(t, scripted.NewFunc(pm.reply).Ref(), mustPlan(&execution.PlanOptions{NoReplan: true}), agent.Options{LLMOptions: llm.LLMOptions{Tools: []llm.Tool{flaky}}})
	_, _, err := run(a, false, llm.Text("go"))
	var sf *execution.StepFailedError
	if !errors.As(err, &sf) || sf.Step.ID != "x" || !strings.Contains(err.Error(), "boom") {
		t.Errorf("err = %v", err)
	}
}

func TestUAP_5_4_PlanFromTextWhenNoStructuredOutput(t *testing.T) {
	pm := &planModel{plans: []any{`Here is the plan: {"steps":[{"id":"only","description":"do it","dependsOn":[]}]} — good luck.`}}
	m := scripted.NewFunc(pm.reply)
	m.Caps.StructuredOutput = false
	res, _, err := run(newAgent(t, m.Ref(), mustPlan(&execution.PlanOptions{}), agent.Options{}), false, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.State.Plan(); len(p) != 1 || p[0].ID != "only" || p[0].Status != agent.PlanCompleted {
		t.Errorf("plan %+v", p)
	}
	if m.Requests()[0].Structure != nil {
		t.Error("structure sent to a provider without structured output")
	}
}

func TestUAP_5_4_InvalidPlansAreRejected(t *testing.T) {
	for name, plan := range map[string]any{
		"not a plan":      "I would rather not.",
		"schema":          map[string]any{"steps": []any{map[string]any{"id": "a"}}},
		"dangling dep":    planOf([3]string{"a", "x", "zzz"}),
		"cycle":           planOf([3]string{"a", "x", "b"}, [3]string{"b", "y", "a"}),
		"duplicate id":    planOf([3]string{"a", "x", ""}, [3]string{"a", "y", ""}),
		"no steps at all": map[string]any{"steps": []any{}},
	} {
		pm := &planModel{plans: []any{plan}}
		_, _, err := run(newAgent(t, scripted.NewFunc(pm.reply).Ref(), mustPlan(&execution.PlanOptions{}), agent.Options{}), false, llm.Text("go"))
		var pe *execution.PlanError
		if !errors.As(err, &pe) {
			t.Errorf("%s: err = %v, want *PlanError", name, err)
		}
	}
	if _, err := execution.Plan(&execution.PlanOptions{PlanSchema: llm.Schema{"type": 12}}); err == nil {
		t.Error("an invalid plan schema was accepted")
	}
}

func TestUAP_5_4_MaxPlanStepsDropsDependents(t *testing.T) {
	pm := &planModel{plans: []any{planOf([3]string{"a", "x", ""}, [3]string{"b", "y", "c"}, [3]string{"c", "z", ""}, [3]string{"d", "w", ""})}}
	// wait: b depends on c, which is after it; with MaxPlanSteps 2 only a and b are candidates and b's dependency is dropped.
	res, _, err := run(newAgent(t, scripted.NewFunc(pm.reply).Ref(), mustPlan(&execution.PlanOptions{MaxPlanSteps: 2}), agent.Options{}), false, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range res.State.Plan() {
		ids = append(ids, s.ID)
	}
	if diff := cmp.Diff([]string{"a"}, ids); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// Every message the model saw is in the state: no hidden history (§14.2),
// and the stream's result equals Generate's (§11.3), for every strategy;
// the last checkpoint is the final state.
func TestUAP_14_2_EveryStrategyKeepsHistoryExplicitStreamsEquallyAndCheckpoints(t *testing.T) {
	type build func() (llm.ModelReference, agent.ExecutionStrategy, func() int)
	strategies := map[string]build{
		"loop": func() (llm.ModelReference, agent.ExecutionStrategy, func() int) {
			m := scripted.New(toolStep("1"), toolStep("2"), scripted.Step{Text: "done"})
			return m.Ref(), execution.Loop(&execution.LoopOptions{}), func() int { return len(m.Requests()) }
		},
		"react": func() (llm.ModelReference, agent.ExecutionStrategy, func() int) {
			m := scripted.New(scripted.Step{Text: "think"}, toolStep("1"), scripted.Step{Text: "think more"}, scripted.Step{Text: "done"})
			return m.Ref(), execution.ReAct(&execution.ReActOptions{}), func() int { return len(m.Requests()) }
		},
		"plan": func() (llm.ModelReference, agent.ExecutionStrategy, func() int) {
			pm := &planModel{plans: []any{planOf([3]string{"a", "call echo", ""}, [3]string{"b", "b", "a"})}}
			m := scripted.NewFunc(pm.reply)
			return m.Ref(), mustPlan(&execution.PlanOptions{}), func() int { return len(m.Requests()) }
		},
	}
	for name, b := range strategies {
		t.Run(name, func(t *testing.T) {
			var results []*agent.Result
			for _, streaming := range []bool{false, true} {
				ref, strategy, _ := b()
				store := &lastStore{}
				var sent []llm.Message
				var mu sync.Mutex
				spy := llm.Middleware{Name: "spy", OnRequest: func(_ context.Context, mc *llm.MiddlewareContext) error {
					mu.Lock()
					sent = append(sent, mc.Request.Messages...)
					mu.Unlock()
					return nil
				}}
				a := newAgent(t, ref, strategy, agent.Options{Checkpoints: store, LLMOptions: llm.LLMOptions{Middleware: []llm.Middleware{spy}}})
				res, _, err := run(a, streaming, llm.Text("task"))
				if err != nil {
					t.Fatal(err)
				}
				in := map[llm.Message]bool{}
				for _, m := range res.State.AllMessages() {
					in[m] = true
				}
				for _, m := range sent {
					if !in[m] {
						t.Errorf("streaming=%v: the model saw %s %q, which is not in the state", streaming, m.Type(), m.Text())
					}
				}
				a.FlushCheckpoints(context.Background())
				if store.last == nil || store.last.Step() != res.State.Step() || store.saves == 0 {
					t.Errorf("streaming=%v: last checkpoint %v, final step %d", streaming, store.last, res.State.Step())
				}
				results = append(results, res)
			}
			g, s := results[0], results[1]
			if diff := cmp.Diff(texts(g.State), texts(s.State)); diff != "" {
				t.Errorf("stream state differs (-generate +stream):\n%s", diff)
			}
			if g.State.Step() != s.State.Step() || g.Turn.Cycles != s.Turn.Cycles || g.Turn.Text() != s.Turn.Text() ||
				!cmp.Equal(g.State.Reasoning(), s.State.Reasoning()) || !cmp.Equal(g.State.Plan(), s.State.Plan()) || !cmp.Equal(g.Turn.Usage, s.Turn.Usage) {
				t.Errorf("stream result differs from generate")
			}
		})
	}
}

type lastStore struct {
	mu    sync.Mutex
	last  *agent.State
	saves int
}

func (s *lastStore) Save(_ context.Context, _ string, st *agent.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.saves = st, s.saves+1
	return nil
}
func (s *lastStore) Load(context.Context, string) (*agent.State, error) {
	return nil, agent.ErrNoCheckpoint
}
func (s *lastStore) LoadMetadata(context.Context, string) (*agent.CheckpointMetadata, error) {
	return nil, agent.ErrNoCheckpoint
}
func (s *lastStore) Delete(context.Context, string) error   { return nil }
func (s *lastStore) List(context.Context) ([]string, error) { return nil, nil }
