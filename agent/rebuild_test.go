package agent_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// rebuildFixture is a toolset with two stages: in "a" the tool "go_b"
// moves to "b", whose tool is "finish".
type rebuildFixture struct {
	stage, seen string
}

func (f *rebuildFixture) tools() []llm.Tool {
	f.seen = f.stage
	tool := func(name string, run func()) llm.Tool {
		return llm.Tool{Name: name, Description: name, Parameters: llm.MustSchema(`{"type":"object"}`),
			Run: func(context.Context, map[string]any) (any, error) { run(); return "ok", nil }}
	}
	if f.stage == "a" {
		return []llm.Tool{tool("go_b", func() { f.stage = "b" })}
	}
	return []llm.Tool{tool("finish", func() {})}
}

func (f *rebuildFixture) changed() bool { return f.stage != f.seen }

func toolNames(r *llm.Request) []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

// TestGenerateRebuilt: a tool call that changes the tools ends the run
// after that step; the agent is rebuilt with the new tools and continues
// from the state reached, without the input again; the merged turn holds
// both runs; the context hook sees exactly one final call.
func TestGenerateRebuilt(t *testing.T) {
	f := &rebuildFixture{stage: "a"}
	model := scripted.NewT(t,
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "go_b", Arguments: map[string]any{}}}},
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "2", ToolName: "finish", Arguments: map[string]any{}}}},
		scripted.Step{Text: "done"},
	)
	var finals []bool
	rb := agent.Rebuild{Tools: f.tools, Changed: f.changed,
		Context: func(ctx context.Context, final func() bool) context.Context {
			return context.WithValue(ctx, finalKey{}, func() { finals = append(finals, final()) })
		}}
	opts := agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}}
	res, err := agent.GenerateRebuilt(context.Background(), withFinalProbe(opts), llm.Text("go"), nil, rb)
	if err != nil {
		t.Fatal(err)
	}
	model.AssertComplete(t)
	reqs := model.Requests()
	if got := [][]string{toolNames(reqs[0]), toolNames(reqs[1]), toolNames(reqs[2])}; !slices.Equal(got[0], []string{"go_b"}) ||
		!slices.Equal(got[1], []string{"finish"}) || !slices.Equal(got[2], []string{"finish"}) {
		t.Errorf("tools per request = %v, want [go_b] then [finish] [finish]", got)
	}
	if n := countUserText(reqs[1].Messages, "go"); n != 1 {
		t.Errorf("the rebuilt agent's first request has the input %d times, want once (continued, not repeated)", n)
	}
	if res.Turn.Text() != "done" || res.State.Step() != 3 {
		t.Errorf("result %q at step %d, want \"done\" at step 3", res.Turn.Text(), res.State.Step())
	}
	if !slices.Equal(finals, []bool{false, true}) {
		t.Errorf("final() at the end of each agent call = %v, want [false true]", finals)
	}
}

// TestGenerateRebuiltStopCondition: the caller's stop condition ends the
// whole run, even when the tools changed in that step.
func TestGenerateRebuiltStopCondition(t *testing.T) {
	f := &rebuildFixture{stage: "a"}
	model := scripted.NewT(t,
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "go_b", Arguments: map[string]any{}}}},
	)
	opts := agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}}
	opts.Strategy.StopCondition = func(context.Context, *agent.State) bool { return true }
	res, err := agent.GenerateRebuilt(context.Background(), opts, llm.Text("go"), nil, agent.Rebuild{Tools: f.tools, Changed: f.changed})
	if err != nil {
		t.Fatal(err)
	}
	model.AssertComplete(t)
	if res.State.Step() != 1 || len(model.Requests()) != 1 {
		t.Errorf("ran %d steps and %d requests, want 1 and 1: the stop condition must end the run", res.State.Step(), len(model.Requests()))
	}
}

type finalKey struct{}

// withFinalProbe calls the probe the Context hook put in the context at
// the end of each agent call (what govern.Segments' middleware does).
func withFinalProbe(opts agent.Options) agent.Options {
	opts.Strategy.OnComplete = func(ctx context.Context, _ *agent.Result) {
		if probe, ok := ctx.Value(finalKey{}).(func()); ok {
			probe()
		}
	}
	return opts
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

// An agent whose tools depend on where it is, as a workflow's stages or
// an app's screens do: calling go_b moves to stage b, so the agent is
// rebuilt with b's tools and carries on from the state reached.
func ExampleGenerateRebuilt() {
	f := &rebuildFixture{stage: "a"}
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "go_b", Arguments: map[string]any{}}}},
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "2", ToolName: "finish", Arguments: map[string]any{}}}},
		scripted.Step{Text: "Finished in stage b."},
	)
	res, err := agent.GenerateRebuilt(context.Background(), agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}},
		llm.Text("Get to b and finish."), nil, agent.Rebuild{Tools: f.tools, Changed: f.changed})
	if err != nil {
		panic(err)
	}
	for _, r := range model.Requests() {
		fmt.Println(toolNames(r))
	}
	fmt.Println(res.Turn.Text())
	// Output:
	// [go_b]
	// [finish]
	// [finish]
	// Finished in stage b.
}
