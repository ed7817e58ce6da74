package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/internal/agenttest"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// stages is a Toolset with two stages: in "a" the tool "go_b" moves to
// "b", whose tool is "finish". It records the step of every state it
// resolves tools for.
type stages struct {
	mu    sync.Mutex
	stage string
	steps []int
}

func (f *stages) Tools(_ context.Context, s *agent.State) ([]llm.Tool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.steps = append(f.steps, s.Step())
	tool := func(name string, run func()) llm.Tool {
		return llm.Tool{Name: name, Description: name, Parameters: llm.MustSchema(`{"type":"object"}`),
			Run: func(context.Context, map[string]any) (any, error) { run(); return "ok", nil }}
	}
	if f.stage == "a" {
		return []llm.Tool{tool("go_b", func() { f.mu.Lock(); f.stage = "b"; f.mu.Unlock() })}, nil
	}
	return []llm.Tool{tool("finish", func() {})}, nil
}

func callStep(id, tool string) scripted.Step {
	return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: id, ToolName: tool, Arguments: map[string]any{}}}}
}

func toolNames(r *llm.Request) []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

func toolsPerRequest(m *scripted.Model) [][]string {
	var out [][]string
	for _, r := range m.Requests() {
		out = append(out, toolNames(r))
	}
	return out
}

// TestUAP_Toolset_ResolvedPerStep: a tool call that changes a Toolset's
// tools changes the next step's, within one run — on the Generate and the
// Stream path — after the static tools; the Toolset sees the state each
// step starts from.
func TestUAP_Toolset_ResolvedPerStep(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			f := &stages{stage: "a"}
			m := scripted.NewT(t, callStep("1", "go_b"), callStep("2", "finish"), scripted.Step{Text: "done"})
			a := newAgent(t, m, agent.Options{Toolsets: []agent.Toolset{f}})
			var res *agent.Result
			var err error
			if streamed {
				s := a.Stream(context.Background(), llm.Text("go"), nil)
				for _, err := range s.Events() {
					if err != nil {
						break
					}
				}
				res, err = s.Result()
			} else {
				res, err = a.Generate(context.Background(), llm.Text("go"), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			m.AssertComplete(t)
			want := [][]string{{"echo", "go_b"}, {"echo", "finish"}, {"echo", "finish"}}
			if diff := cmp.Diff(want, toolsPerRequest(m)); diff != "" {
				t.Errorf("tools per request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int{1, 2, 3}, f.steps); diff != "" {
				t.Errorf("steps the toolset resolved for (-want +got):\n%s", diff)
			}
			if res.Turn.Text() != "done" || res.State.Step() != 3 || countUserText(res.State.Messages(), "go") != 1 {
				t.Errorf("result %q at step %d with the input %d times, want \"done\" at step 3, once",
					res.Turn.Text(), res.State.Step(), countUserText(res.State.Messages(), "go"))
			}
		})
	}
}

// TestUAP_Toolset_StopCondition: the stop condition ends the run after
// the step it holds for, even when the tools changed in that step.
func TestUAP_Toolset_StopCondition(t *testing.T) {
	m := scripted.NewT(t, callStep("1", "go_b"))
	a := newAgent(t, m, agent.Options{Toolsets: []agent.Toolset{&stages{stage: "a"}},
		Strategy: agent.StrategyHooks{StopCondition: func(context.Context, *agent.State) bool { return true }}})
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.AssertComplete(t)
	if res.State.Step() != 1 || len(m.Requests()) != 1 {
		t.Errorf("ran %d steps and %d requests, want 1 and 1", res.State.Step(), len(m.Requests()))
	}
}

type toolsetFunc func(context.Context, *agent.State) ([]llm.Tool, error)

func (f toolsetFunc) Tools(ctx context.Context, s *agent.State) ([]llm.Tool, error) { return f(ctx, s) }

func fixed(tools ...llm.Tool) agent.Toolset {
	return toolsetFunc(func(context.Context, *agent.State) ([]llm.Tool, error) { return tools, nil })
}

func named(name string) llm.Tool {
	t := echo()
	t.Name = name
	return t
}

// TestUAP_Toolset_Errors: a Toolset that fails, a name offered twice and
// an ordering cycle across static and resolved tools fail the run before
// the model is called, with the reason.
func TestUAP_Toolset_Errors(t *testing.T) {
	boom := errors.New("the stage is unreadable")
	for _, tc := range []struct {
		name     string
		toolsets []agent.Toolset
		want     string
	}{
		{"toolset fails", []agent.Toolset{toolsetFunc(func(context.Context, *agent.State) ([]llm.Tool, error) { return nil, boom })}, "the stage is unreadable"},
		{"same name as a static tool", []agent.Toolset{fixed(named("echo"))}, `"echo"`},
		{"same name in two toolsets", []agent.Toolset{fixed(named("x")), fixed(named("x"))}, `"x"`},
		{"ordering cycle", []agent.Toolset{fixed(agent.DependsOn(named("x"), "y"), agent.DependsOn(named("y"), "x"))}, "cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := scripted.NewT(t)
			a := newAgent(t, m, agent.Options{Toolsets: tc.toolsets})
			_, err := a.Generate(context.Background(), llm.Text("go"), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %s", err, tc.want)
			}
			if tc.name == "toolset fails" && !errors.Is(err, boom) {
				t.Errorf("err = %v does not wrap the toolset's error", err)
			}
			if n := len(m.Requests()); n != 0 {
				t.Errorf("the model was called %d times", n)
			}
			if _, err := a.Tools(context.Background(), nil); err == nil && tc.name != "ordering cycle" {
				t.Error("Agent.Tools resolved what the run refused")
			}
		})
	}
}

// marking is a ToolWrapper middleware that marks a tool's results and
// counts how many tools it wrapped.
type marking struct {
	agenttest.MiddlewareFuncs
	mu      sync.Mutex
	wrapped int
}

func (w *marking) WrapTool(t llm.Tool) llm.Tool {
	w.mu.Lock()
	w.wrapped++
	w.mu.Unlock()
	run := t.Run
	t.Run = func(ctx context.Context, args map[string]any) (any, error) {
		r, err := run(ctx, args)
		return fmt.Sprint("wrapped:", r), err
	}
	return t
}

// TestUAP_Toolset_ToolWrapper: the ToolWrapper middleware wraps the
// resolved tools at every step, and the static ones once.
func TestUAP_Toolset_ToolWrapper(t *testing.T) {
	w := &marking{MiddlewareFuncs: agenttest.MiddlewareFuncs{MiddlewareName: "marking"}}
	m := scripted.NewT(t, callStep("1", "go_b"), callStep("2", "finish"), scripted.Step{Text: "done"})
	a := newAgent(t, m, agent.Options{Toolsets: []agent.Toolset{&stages{stage: "a"}}, Middleware: []agent.Middleware{w}})
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, x := range res.Turn.ToolExecutions {
		results = append(results, llm.ResultText(x.Result))
	}
	if diff := cmp.Diff([]string{"wrapped:ok", "wrapped:ok"}, results); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
	if w.wrapped != 1+3 { // echo once, then one resolved tool at each of 3 steps
		t.Errorf("wrapped %d tools, want 4", w.wrapped)
	}
}

// TestUAP_Toolset_AgentTools: Agent.Tools is what a step from the state
// offers, as declared: the static tools, then each Toolset's.
func TestUAP_Toolset_AgentTools(t *testing.T) {
	a := newAgent(t, scripted.NewT(t), agent.Options{Toolsets: []agent.Toolset{fixed(named("x")), &stages{stage: "a"}}})
	tools, err := a.Tools(context.Background(), agent.Initial())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff([]string{"echo", "x", "go_b"}, names); diff != "" {
		t.Errorf("Agent.Tools (-want +got):\n%s", diff)
	}
}

// llmProbe is a strategy that runs the loop and records the instance each
// step's Call is made with.
type llmProbe struct {
	mu   sync.Mutex
	seen []*llm.LLMInstance
}

func (p *llmProbe) Name() string { return "probe" }

func (p *llmProbe) Execute(ctx context.Context, ec *agent.ExecutionContext) (*agent.Result, error) {
	state := ec.Begin()
	for {
		var step int
		state, step = ec.StartStep(ctx, state, nil)
		p.mu.Lock()
		p.seen = append(p.seen, ec.LLM)
		p.mu.Unlock()
		turn, err := ec.Call(ctx, step, state, ec.LLM, state.Messages())
		if err != nil {
			return nil, err
		}
		state = state.WithMessages(turn.Messages...)
		if state, _, err = ec.EndStep(ctx, step, turn, state, nil); err != nil {
			return nil, err
		}
		if !turn.Response.HasToolCalls() {
			return ec.Finish(ctx, state), nil
		}
	}
}

// TestUAP_Toolset_NoneResolvesOnce: an agent without Toolsets calls every
// step with the instance made when it was created; one with Toolsets
// gets one per step.
func TestUAP_Toolset_NoneResolvesOnce(t *testing.T) {
	for _, withToolset := range []bool{false, true} {
		p := &llmProbe{}
		opts := agent.Options{Execution: p}
		if withToolset {
			opts.Toolsets = []agent.Toolset{fixed(named("x"))}
		}
		a := newAgent(t, scripted.NewT(t, toolStep("1"), toolStep("2"), scripted.Step{Text: "done"}), opts)
		if _, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil {
			t.Fatal(err)
		}
		same := 0
		for _, inst := range p.seen {
			if inst == a.LLM() {
				same++
			}
		}
		if want := map[bool]int{false: 3, true: 0}[withToolset]; len(p.seen) != 3 || same != want {
			t.Errorf("toolsets %v: %d steps, %d with the agent's own instance, want 3 and %d", withToolset, len(p.seen), same, want)
		}
	}
}

// TestUAP_Toolset_Plan: the plan strategy plans with the step's tools and
// runs each plan step with the tools resolved for it.
func TestUAP_Toolset_Plan(t *testing.T) {
	f := &stages{stage: "a"}
	plan := map[string]any{"steps": []any{
		map[string]any{"id": "s1", "description": "go to b", "tool": "go_b", "dependsOn": []any{}},
		map[string]any{"id": "s2", "description": "finish", "tool": "finish", "dependsOn": []any{"s1"}},
	}}
	m := scripted.NewT(t,
		scripted.Step{Data: plan},
		callStep("1", "go_b"), scripted.Step{Text: "in b"},
		callStep("2", "finish"), scripted.Step{Text: "finished"},
		scripted.Step{Text: "done"},
	)
	strategy, err := execution.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, m, agent.Options{Toolsets: []agent.Toolset{f}, Execution: strategy})
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.AssertComplete(t)
	want := [][]string{{"echo", "go_b"}, {"echo", "go_b"}, {"echo", "go_b"}, {"echo", "finish"}, {"echo", "finish"}, {"echo", "finish"}}
	if diff := cmp.Diff(want, toolsPerRequest(m)); diff != "" {
		t.Errorf("tools per request (-want +got):\n%s", diff)
	}
	if res.Turn.Text() != "done" {
		t.Errorf("answer %q", res.Turn.Text())
	}
}

func countUserText(msgs []llm.Message, text string) int {
	n := 0
	for _, m := range msgs {
		if u, ok := m.(*llm.UserMessage); ok && u.Text() == text {
			n++
		}
	}
	return n
}
