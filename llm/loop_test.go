package llm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func newLLM(t *testing.T, m *scripted.Model, opts llm.LLMOptions) *llm.LLMInstance {
	t.Helper()
	opts.Model = m.Ref()
	inst, err := llm.LLM(&opts)
	if err != nil {
		t.Fatalf("llm.LLM: %v", err)
	}
	return inst
}

func call(id, name string, args map[string]any) llm.ToolCall {
	return llm.ToolCall{ToolCallID: id, ToolName: name, Arguments: args}
}

func echoTool(name string) llm.Tool {
	return llm.Tool{Name: name, Description: "echoes", Parameters: llm.Schema{"type": "object"},
		Run: func(_ context.Context, args map[string]any) (any, error) {
			return fmt.Sprint(name, ":", args["v"]), nil
		}}
}

// resultsOf returns the tool results the model received on call i.
func resultsOf(t *testing.T, m *scripted.Model, i int) []llm.ToolResult {
	t.Helper()
	reqs := m.Requests()
	if i >= len(reqs) {
		t.Fatalf("no request %d (only %d)", i, len(reqs))
	}
	msgs := reqs[i].Messages
	tr, ok := msgs[len(msgs)-1].(*llm.ToolResultMessage)
	if !ok {
		t.Fatalf("request %d ends with %T, want *llm.ToolResultMessage", i, msgs[len(msgs)-1])
	}
	return tr.Results
}

func TestUPP_5_5_CallsOfOneRoundRunConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started sync.WaitGroup
		started.Add(3)
		barrier := func(ctx context.Context, _ map[string]any) (any, error) {
			started.Done()
			done := make(chan struct{})
			go func() { started.Wait(); close(done) }()
			select {
			case <-done: // every call is running at the same time
				return "ok", nil
			case <-time.After(5 * time.Second):
				return nil, errors.New("calls did not run concurrently")
			}
		}
		tool := llm.Tool{Name: "barrier", Run: barrier}
		m := scripted.NewT(t,
			scripted.Step{ToolCalls: []llm.ToolCall{call("a", "barrier", nil), call("b", "barrier", nil), call("c", "barrier", nil)}},
			scripted.Step{Text: "done"})
		turn, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{tool}}).Generate(context.Background(), nil, llm.Text("go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range turn.ToolExecutions {
			if x.IsError {
				t.Errorf("%s: %v", x.ToolCallID, x.Result)
			}
		}
	})
}

func TestUPP_5_5_ResultsInCallOrderExecutionsInCompletionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := llm.Tool{Name: "slow", Run: func(ctx context.Context, _ map[string]any) (any, error) {
			time.Sleep(30 * time.Millisecond)
			return "slow result", nil
		}}
		fast := llm.Tool{Name: "fast", Run: func(context.Context, map[string]any) (any, error) { return "fast result", nil }}
		m := scripted.NewT(t,
			scripted.Step{ToolCalls: []llm.ToolCall{call("1", "slow", nil), call("2", "fast", nil)}},
			scripted.Step{Text: "done"})
		turn, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{slow, fast}}).Generate(context.Background(), nil, llm.Text("go"))
		if err != nil {
			t.Fatal(err)
		}
		want := []llm.ToolResult{{ToolCallID: "1", Result: "slow result"}, {ToolCallID: "2", Result: "fast result"}}
		if diff := cmp.Diff(want, resultsOf(t, m, 1)); diff != "" {
			t.Errorf("results sent (-want +got):\n%s", diff)
		}
		// one tool result message for the round
		var trMsgs int
		for _, msg := range turn.Messages {
			if msg.Type() == llm.TypeToolResult {
				trMsgs++
			}
		}
		if trMsgs != 1 {
			t.Errorf("%d tool result messages, want 1 for the round", trMsgs)
		}
		if len(turn.ToolExecutions) != 2 || turn.ToolExecutions[0].ToolCallID != "2" || turn.ToolExecutions[1].ToolCallID != "1" {
			t.Errorf("executions %+v, want completion order 2, 1", turn.ToolExecutions)
		}
		if turn.ToolExecutions[1].Duration != 30*time.Millisecond {
			t.Errorf("slow tool duration %v, want 30ms", turn.ToolExecutions[1].Duration)
		}
	})
}

func toolRounds(n int) []scripted.Step {
	steps := make([]scripted.Step, n)
	for i := range steps {
		steps[i] = scripted.Step{ToolCalls: []llm.ToolCall{call(fmt.Sprint("c", i), "echo", map[string]any{"v": i})}}
	}
	return steps
}

func TestUPP_11_3_MaxIterationsHookThenInvalidRequest(t *testing.T) {
	var hooked []int
	var ran atomic.Int32
	tool := echoTool("echo")
	run := tool.Run
	tool.Run = func(ctx context.Context, a map[string]any) (any, error) { ran.Add(1); return run(ctx, a) }
	m := scripted.NewT(t, toolRounds(3)...)
	inst := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{tool}, ToolStrategy: &llm.ToolUseStrategy{
		MaxIterations:   2,
		OnMaxIterations: func(_ context.Context, n int) { hooked = append(hooked, n) },
	}})
	_, err := inst.Generate(context.Background(), nil, llm.Text("loop"))
	if !errors.Is(err, llm.InvalidRequest) {
		t.Fatalf("err = %v, want INVALID_REQUEST", err)
	}
	if diff := cmp.Diff([]int{2}, hooked); diff != "" {
		t.Errorf("OnMaxIterations calls (-want +got):\n%s", diff)
	}
	if ran.Load() != 2 || len(m.Requests()) != 3 {
		t.Errorf("%d tool rounds, %d provider calls; want 2 rounds, 3 calls", ran.Load(), len(m.Requests()))
	}
}

func TestUPP_11_3_DefaultMaxIterationsIsTen(t *testing.T) {
	m := scripted.NewT(t, toolRounds(11)...)
	_, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}}).Generate(context.Background(), nil, llm.Text("loop"))
	if !errors.Is(err, llm.InvalidRequest) || !strings.Contains(err.Error(), "(10)") {
		t.Fatalf("err = %v, want INVALID_REQUEST at 10", err)
	}
	if n := len(m.Requests()); n != 11 {
		t.Errorf("%d provider calls, want 11 (10 tool rounds)", n)
	}
}

func TestUPP_11_3_InfinityIsUnlimited(t *testing.T) {
	if llm.Infinity == 0 || llm.Infinity == llm.DefaultMaxIterations {
		t.Fatal("Infinity must be distinct from the zero value and the default")
	}
	m := scripted.NewT(t, append(toolRounds(25), scripted.Step{Text: "finally"})...)
	turn, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")},
		ToolStrategy: &llm.ToolUseStrategy{MaxIterations: llm.Infinity}}).Generate(context.Background(), nil, llm.Text("loop"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Cycles != 26 || turn.Text() != "finally" || len(turn.ToolExecutions) != 25 {
		t.Errorf("cycles %d, text %q, %d executions", turn.Cycles, turn.Text(), len(turn.ToolExecutions))
	}
}

func TestUPP_11_3_StrategyHooksRewriteArgumentsAndResults(t *testing.T) {
	var seen map[string]any
	tool := llm.Tool{Name: "t", Run: func(_ context.Context, args map[string]any) (any, error) {
		seen = args
		return "original", nil
	}}
	var observed []string
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("1", "t", map[string]any{"v": "model"})}}, scripted.Step{Text: "ok"})
	turn, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{tool}, ToolStrategy: &llm.ToolUseStrategy{
		OnToolCall: func(_ context.Context, tool *llm.Tool, args map[string]any) {
			observed = append(observed, tool.Name+"="+fmt.Sprint(args["v"]))
		},
		OnBeforeCall: func(_ context.Context, _ *llm.Tool, args map[string]any) llm.BeforeCall {
			return llm.BeforeCall{Proceed: true, Arguments: map[string]any{"v": "rewritten"}}
		},
		OnAfterCall: func(_ context.Context, _ *llm.Tool, args map[string]any, result any) (any, bool) {
			return fmt.Sprint(result, "+after(", args["v"], ")"), true
		},
	}}).Generate(context.Background(), nil, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if seen["v"] != "rewritten" {
		t.Errorf("tool ran with %v, want rewritten arguments", seen)
	}
	if diff := cmp.Diff([]string{"t=model"}, observed); diff != "" {
		t.Errorf("OnToolCall (-want +got):\n%s", diff)
	}
	want := []llm.ToolResult{{ToolCallID: "1", Result: "original+after(rewritten)"}}
	if diff := cmp.Diff(want, resultsOf(t, m, 1)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if x := turn.ToolExecutions[0]; x.Arguments["v"] != "rewritten" || x.Result != "original+after(rewritten)" {
		t.Errorf("execution %+v", x)
	}
}

func TestUPP_11_3_OnBeforeCallSkips(t *testing.T) {
	ran := false
	tool := llm.Tool{Name: "t", Run: func(context.Context, map[string]any) (any, error) { ran = true; return nil, nil }}
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("1", "t", nil)}}, scripted.Step{Text: "ok"})
	_, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{tool}, ToolStrategy: &llm.ToolUseStrategy{
		OnBeforeCall: func(context.Context, *llm.Tool, map[string]any) llm.BeforeCall { return llm.BeforeCall{} },
	}}).Generate(context.Background(), nil, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Error("a skipped tool ran")
	}
	want := []llm.ToolResult{{ToolCallID: "1", Result: "Tool execution skipped", IsError: true}}
	if diff := cmp.Diff(want, resultsOf(t, m, 1)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestUPP_11_2_FailuresBecomeErrorResultsAndTheLoopGoesOn(t *testing.T) {
	var onError []string
	var mu sync.Mutex
	tools := []llm.Tool{
		{Name: "fails", Run: func(context.Context, map[string]any) (any, error) { return nil, errors.New("disk full") }},
		{Name: "panics", Run: func(context.Context, map[string]any) (any, error) { panic("kaboom") }},
		{Name: "denied", Run: func(context.Context, map[string]any) (any, error) { t.Error("denied tool ran"); return nil, nil },
			Approval: func(context.Context, map[string]any) (bool, error) { return false, nil }},
		{Name: "approval_fails", Run: func(context.Context, map[string]any) (any, error) { t.Error("tool ran"); return nil, nil },
			Approval: func(context.Context, map[string]any) (bool, error) { return true, errors.New("approver offline") }},
		{Name: "approved", Run: func(context.Context, map[string]any) (any, error) { return "fine", nil },
			Approval: func(context.Context, map[string]any) (bool, error) { return true, nil }},
		{Name: "garbled", Run: func(context.Context, map[string]any) (any, error) { t.Error("tool ran on bad args"); return nil, nil }},
	}
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{
		call("1", "fails", nil), call("2", "panics", nil), call("3", "missing", nil),
		call("4", "denied", nil), call("5", "approval_fails", nil), call("6", "approved", nil),
		{ToolCallID: "7", ToolName: "garbled", RawArguments: `{"city": "Par`},
	}}, scripted.Step{Text: "recovered"})
	turn, err := newLLM(t, m, llm.LLMOptions{Tools: tools, ToolStrategy: &llm.ToolUseStrategy{
		OnError: func(_ context.Context, tool *llm.Tool, _ map[string]any, err error) {
			mu.Lock()
			onError = append(onError, tool.Name)
			mu.Unlock()
			if tool.Name == "panics" {
				var pe *llm.PanicError
				if !errors.As(err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
					t.Errorf("panic error = %#v", err)
				}
			}
		},
	}}).Generate(context.Background(), nil, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() != "recovered" {
		t.Errorf("loop did not go on: %q", turn.Text())
	}
	results := resultsOf(t, m, 1)
	wantPrefix := []string{"disk full", "tool panicked: kaboom", "Tool 'missing' not found",
		"Tool execution denied by approval handler", "Tool execution denied by approval handler: approver offline", "fine",
		"Invalid arguments for tool 'garbled'"}
	for i, r := range results {
		s, _ := r.Result.(string)
		if !strings.HasPrefix(s, wantPrefix[i]) || r.IsError != (i != 5) || r.ToolCallID != fmt.Sprint(i+1) {
			t.Errorf("result %d = %+v, want %q (error %v)", i, r, wantPrefix[i], i != 5)
		}
	}
	if len(onError) != 3 {
		t.Errorf("OnError called for %v, want fails, panics and garbled", onError)
	}
	errs := map[string]error{}
	for _, x := range turn.ToolExecutions {
		errs[x.ToolName] = x.Err
	}
	var ae *llm.ArgumentsError
	if !errors.As(errs["garbled"], &ae) || ae.Tool != "garbled" {
		t.Errorf("garbled Err = %v, want *llm.ArgumentsError", errs["garbled"])
	}
	var pe *llm.PanicError
	if !errors.As(errs["panics"], &pe) || errs["fails"] == nil || errs["approved"] != nil {
		t.Errorf("execution errors = %v", errs)
	}
	approvals := map[string]*bool{}
	for _, x := range turn.ToolExecutions {
		approvals[x.ToolName] = x.Approved
	}
	if a := approvals["denied"]; a == nil || *a {
		t.Errorf("denied execution Approved = %v", a)
	}
	if a := approvals["approved"]; a == nil || !*a {
		t.Errorf("approved execution Approved = %v", a)
	}
	if a, ok := approvals["fails"]; !ok || a != nil {
		t.Errorf("execution without approval handler: Approved = %v (recorded %v)", a, ok)
	}
	if _, ok := approvals["missing"]; ok {
		t.Error("an unknown tool was recorded as executed")
	}
}

func TestToolCallInContext(t *testing.T) {
	var got llm.ToolCall
	tool := llm.Tool{Name: "t", Run: func(ctx context.Context, _ map[string]any) (any, error) {
		got, _ = llm.ToolCallFrom(ctx)
		return nil, nil
	}}
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("provider-id-9", "t", map[string]any{"x": 1.0})}}, scripted.Step{Text: "ok"})
	if _, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{tool}}).Generate(context.Background(), nil, llm.Text("go")); err != nil {
		t.Fatal(err)
	}
	if got.ToolCallID != "provider-id-9" || got.ToolName != "t" {
		t.Errorf("ToolCallFrom = %+v", got)
	}
	if _, ok := llm.ToolCallFrom(context.Background()); ok {
		t.Error("ToolCallFrom outside a call reported ok")
	}
}

func TestUPP_12_StructuredDataEndsTheLoop(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Data: map[string]any{"answer": 42.0},
		ToolCalls: []llm.ToolCall{call("1", "echo", nil)}})
	turn, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}, Structure: llm.Schema{"type": "object"}}).
		Generate(context.Background(), nil, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"answer": 42.0}, turn.Data); diff != "" {
		t.Errorf("Data (-want +got):\n%s", diff)
	}
	if turn.Cycles != 1 || len(turn.ToolExecutions) != 0 {
		t.Errorf("cycles %d, executions %d; the loop must stop on data", turn.Cycles, len(turn.ToolExecutions))
	}
}

func TestUPP_7_1_TurnHoldsNewInputNotHistory(t *testing.T) {
	history := []llm.Message{llm.NewUserMessage(llm.Text("old")), llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("old reply")}, nil)}
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("1", "echo", map[string]any{"v": 1.0})}}, scripted.Step{Text: "new reply"})
	in := llm.NewUserMessage(llm.Text("new"))
	turn, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}}).Generate(context.Background(), history, in)
	if err != nil {
		t.Fatal(err)
	}
	var types []llm.MessageType
	for _, msg := range turn.Messages {
		types = append(types, msg.Type())
	}
	want := []llm.MessageType{llm.TypeUser, llm.TypeAssistant, llm.TypeToolResult, llm.TypeAssistant}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("turn messages (-want +got):\n%s", diff)
	}
	if turn.Messages[0] != llm.Message(in) {
		t.Error("the input message was not kept as given")
	}
	if got := len(m.Requests()[0].Messages); got != 3 {
		t.Errorf("first request had %d messages, want history + input = 3", got)
	}
	if turn.Usage.TotalTokens != turn.Usage.InputTokens+turn.Usage.OutputTokens || len(turn.Usage.Cycles) != 2 {
		t.Errorf("usage %+v", turn.Usage)
	}
}

func TestUPP_5_3_Inputs(t *testing.T) {
	img := llm.ImageFromBytes([]byte{1, 2, 3}, "image/png")
	asst := llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("earlier")}, nil)
	m := scripted.NewT(t, scripted.Step{Text: "ok"})
	turn, err := newLLM(t, m, llm.LLMOptions{}).Generate(context.Background(), nil, llm.Text("a"), img, asst)
	if err != nil {
		t.Fatal(err)
	}
	msgs := turn.Messages
	if len(msgs) != 4 {
		t.Fatalf("%d messages", len(msgs))
	}
	if u := msgs[0].(*llm.UserMessage); u.Text() != "a" {
		t.Errorf("text input → %q", u.Text())
	}
	if u := msgs[1].(*llm.UserMessage); len(u.Content) != 1 || u.Content[0].BlockType() != llm.BlockImage {
		t.Errorf("image input → %+v", u.Content)
	}
	if msgs[2] != llm.Message(asst) {
		t.Error("message input not passed through")
	}
	for name, inputs := range map[string][]llm.Input{"none": nil, "nil": {nil}, "nil message": {(*llm.UserMessage)(nil)}} {
		_, err := newLLM(t, scripted.New(), llm.LLMOptions{}).Generate(context.Background(), nil, inputs...)
		if !errors.Is(err, llm.InvalidRequest) {
			t.Errorf("%s: err = %v, want INVALID_REQUEST", name, err)
		}
	}
}

type nonLLMProvider struct{}

func (nonLLMProvider) Name() string    { return "embed-only" }
func (nonLLMProvider) Version() string { return "1" }

func TestUPP_5_4_CapabilitiesAreEnforced(t *testing.T) {
	none := scripted.New()
	none.Caps = llm.LLMCapabilities{}
	if _, err := llm.LLM(&llm.LLMOptions{Model: llm.ModelReference{ModelID: "x", Provider: nonLLMProvider{}}}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("non-LLM provider: %v", err)
	}
	if _, err := llm.LLM(&llm.LLMOptions{Model: none.Ref(), Structure: llm.Schema{"type": "object"}}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("structure without capability: %v", err)
	}
	if _, err := llm.LLM(&llm.LLMOptions{Model: none.Ref(), Tools: []llm.Tool{echoTool("e")}}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("tools without capability: %v", err)
	}
	inst, err := llm.LLM(&llm.LLMOptions{Model: none.Ref()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Stream(context.Background(), nil, llm.Text("x")).Turn(); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("stream without capability: %v", err)
	}
	for _, in := range []llm.Input{
		llm.ImageFromURL("https://example.com/a.png", "image/png"),
		llm.DocumentFromText("doc", "t"),
		llm.AudioFromBytes([]byte{1}, "audio/wav"),
		llm.VideoFromBytes([]byte{1}, "video/mp4"),
	} {
		_, err := inst.Generate(context.Background(), nil, in)
		if !errors.Is(err, llm.InvalidRequest) {
			t.Errorf("%T without capability: %v", in, err)
		}
		_, err = inst.Generate(context.Background(), []llm.Message{llm.NewUserMessage(in.(llm.ContentBlock))}, llm.Text("x"))
		if !errors.Is(err, llm.InvalidRequest) {
			t.Errorf("%T in history without capability: %v", in, err)
		}
	}
	if len(none.Requests()) != 0 {
		t.Error("a rejected request reached the provider")
	}
	dup := []llm.Tool{echoTool("same"), echoTool("same")}
	if _, err := llm.LLM(&llm.LLMOptions{Model: scripted.New().Ref(), Tools: dup}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("duplicate tool names: %v", err)
	}
	if _, err := llm.LLM(&llm.LLMOptions{Model: scripted.New().Ref(), Tools: []llm.Tool{{Name: "norun"}}}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("tool without Run: %v", err)
	}
}

func TestUPP_9_4_AbortReachesInFlightToolsAndSkipsPending(t *testing.T) {
	inFlight := make(chan struct{})
	var sawCancel atomic.Bool
	block := llm.Tool{Name: "block", Run: func(ctx context.Context, _ map[string]any) (any, error) {
		close(inFlight)
		<-ctx.Done()
		sawCancel.Store(true)
		return nil, ctx.Err()
	}}
	m := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{call("1", "block", nil)}}, scripted.Step{Text: "never"})
	s := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{block}}).Stream(context.Background(), nil, llm.Text("go"))
	go func() { <-inFlight; s.Abort() }()
	_, err := s.Turn()
	if !errors.Is(err, llm.Cancelled) {
		t.Fatalf("err = %v, want CANCELLED", err)
	}
	if !sawCancel.Load() {
		t.Error("the in-flight tool did not see the abort")
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("%d provider calls after abort, want 1", n)
	}
}

func TestUPP_9_StreamEventsAndTurnMatchGenerate(t *testing.T) {
	steps := func() []scripted.Step {
		return []scripted.Step{
			{Reasoning: "think", Text: "calling", ToolCalls: []llm.ToolCall{call("1", "echo", map[string]any{"v": "x"}), call("2", "echo", map[string]any{"v": "y"})}},
			{Text: "final answer"},
		}
	}
	gen, err := newLLM(t, scripted.NewT(t, steps()...), llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}}).Generate(context.Background(), nil, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	s := newLLM(t, scripted.NewT(t, steps()...), llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}}).Stream(context.Background(), nil, llm.Text("go"))
	var types []llm.StreamEventType
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	str, err := s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(turnShape(gen), turnShape(str)); diff != "" {
		t.Errorf("stream turn differs from generate turn (-generate +stream):\n%s", diff)
	}
	count := map[llm.StreamEventType]int{}
	for _, ty := range types {
		count[ty]++
	}
	for ty, want := range map[llm.StreamEventType]int{llm.MessageStart: 2, llm.MessageStop: 2, llm.ToolExecutionStart: 2, llm.ToolExecutionEnd: 2, llm.ReasoningDelta: 1} {
		if count[ty] != want {
			t.Errorf("%d %s events, want %d", count[ty], ty, want)
		}
	}
}

// turnShape is a turn without ids, timestamps and durations.
func turnShape(t *llm.Turn) map[string]any {
	var msgs []string
	for _, m := range t.Messages {
		msgs = append(msgs, string(m.Type())+":"+m.Text())
	}
	var execs []string
	for _, x := range t.ToolExecutions {
		execs = append(execs, fmt.Sprint(x.ToolCallID, x.Result, x.IsError))
	}
	return map[string]any{"messages": msgs, "execs": len(execs), "usage": t.Usage, "cycles": t.Cycles, "response": t.Response.Text()}
}

func TestUPP_9_1_TurnDrainsWithoutIteration(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Text: strings.Repeat("word ", 500)})
	turn, err := newLLM(t, m, llm.LLMOptions{}).Stream(context.Background(), nil, llm.Text("go")).Turn()
	if err != nil || !strings.HasPrefix(turn.Text(), "word word") {
		t.Fatalf("Turn without iterating: %v", err)
	}
}

func TestUPP_9_1_BreakingOutCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := scripted.New(scripted.Step{Text: strings.Repeat("word ", 500), ChunkDelay: time.Millisecond})
		s := newLLM(t, m, llm.LLMOptions{}).Stream(context.Background(), nil, llm.Text("go"))
		for range s.Events() {
			break
		}
		if _, err := s.Turn(); !errors.Is(err, llm.Cancelled) {
			t.Errorf("Turn after break = %v, want CANCELLED", err)
		}
	})
}

func TestUPP_10_MiddlewareOrderAndStreamTransform(t *testing.T) {
	var log []string
	var mu sync.Mutex
	rec := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	mw := func(name string) llm.Middleware {
		return llm.Middleware{
			Name:       name,
			OnStart:    func(context.Context, *llm.MiddlewareContext) error { rec(name + ".start"); return nil },
			OnRequest:  func(context.Context, *llm.MiddlewareContext) error { rec(name + ".request"); return nil },
			OnResponse: func(context.Context, *llm.MiddlewareContext) error { rec(name + ".response"); return nil },
			OnEnd:      func(context.Context, *llm.MiddlewareContext) error { rec(name + ".end"); return nil },
			OnStreamEnd: func(context.Context, *llm.MiddlewareContext) error {
				rec(name + ".streamEnd")
				return nil
			},
			OnToolCall: func(_ context.Context, _ *llm.MiddlewareContext, tool *llm.Tool, _ map[string]any) {
				rec(name + ".toolCall")
			},
			OnToolResult: func(context.Context, *llm.MiddlewareContext, *llm.Tool, llm.ToolResult) { rec(name + ".toolResult") },
		}
	}
	upper := llm.Middleware{Name: "upper", OnStreamEvent: func(_ context.Context, _ *llm.MiddlewareContext, ev llm.StreamEvent) []llm.StreamEvent {
		switch ev.Type {
		case llm.ReasoningDelta:
			return nil // drop
		case llm.TextDelta:
			ev.Delta.Text = strings.ToUpper(ev.Delta.Text)
			return []llm.StreamEvent{ev, ev} // expand
		}
		return []llm.StreamEvent{ev}
	}}
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("1", "echo", nil)}}, scripted.Step{Reasoning: "hidden", Text: "ab", Chunks: []string{"ab"}})
	s := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}, Middleware: []llm.Middleware{mw("a"), mw("b"), upper}}).
		Stream(context.Background(), nil, llm.Text("go"))
	var text string
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == llm.ReasoningDelta {
			t.Error("dropped event delivered")
		}
		text += ev.Delta.Text
	}
	if text != "ABAB" {
		t.Errorf("transformed text = %q, want ABAB", text)
	}
	want := []string{"a.start", "b.start", "a.request", "b.request", "b.response", "a.response",
		"a.toolCall", "b.toolCall", "a.toolResult", "b.toolResult",
		"a.request", "b.request", "b.response", "a.response", "b.streamEnd", "a.streamEnd", "b.end", "a.end"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("hook order (-want +got):\n%s", diff)
	}
}

func TestUPP_10_MiddlewareOnErrorAndFailingHook(t *testing.T) {
	var gotErr error
	stop := errors.New("policy says no")
	m := scripted.New()
	_, err := newLLM(t, m, llm.LLMOptions{Middleware: []llm.Middleware{{
		Name:      "gate",
		OnRequest: func(context.Context, *llm.MiddlewareContext) error { return stop },
		OnError:   func(_ context.Context, _ *llm.MiddlewareContext, err error) { gotErr = err },
	}}}).Generate(context.Background(), nil, llm.Text("go"))
	if !errors.Is(err, stop) || !errors.Is(gotErr, stop) {
		t.Errorf("err = %v, OnError saw %v", err, gotErr)
	}
	if len(m.Requests()) != 0 {
		t.Error("request sent despite the failing hook")
	}
}

func TestUPP_10_MiddlewareMayEditTheRequest(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Text: "ok"})
	_, err := newLLM(t, m, llm.LLMOptions{Middleware: []llm.Middleware{{
		Name: "inject",
		OnRequest: func(_ context.Context, mc *llm.MiddlewareContext) error {
			mc.Request.Params = map[string]any{"temperature": 0.0}
			return nil
		},
	}}}).Generate(context.Background(), nil, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Requests()[0].Params["temperature"]; got != 0.0 {
		t.Errorf("params = %v", m.Requests()[0].Params)
	}
}

func TestUPP_4_1_ConfigMerge(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Text: "ok"})
	ref := m.Ref()
	ref.Config = &llm.ProviderConfig{BaseURL: "https://factory", Timeout: time.Second, Headers: map[string]string{"X-A": "factory", "X-B": "factory"}}
	inst, err := llm.LLM(&llm.LLMOptions{Model: ref, Config: llm.ProviderConfig{Timeout: 2 * time.Second, Headers: map[string]string{"X-B": "explicit"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Generate(context.Background(), nil, llm.Text("go")); err != nil {
		t.Fatal(err)
	}
	cfg := m.Requests()[0].Config
	if cfg.BaseURL != "https://factory" || cfg.Timeout != 2*time.Second {
		t.Errorf("config = %+v", cfg)
	}
	if diff := cmp.Diff(map[string]string{"X-A": "factory", "X-B": "explicit"}, cfg.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if ref.Config.Headers["X-B"] != "factory" {
		t.Error("merge modified the factory's config")
	}
}

func TestProviderErrorsAreNormalized(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Err: errors.New("raw failure")})
	_, err := newLLM(t, m, llm.LLMOptions{}).Generate(context.Background(), nil, llm.Text("go"))
	var e *llm.Error
	if !errors.As(err, &e) || e.Code != llm.ProviderError || e.Provider != "scripted" {
		t.Errorf("err = %#v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = newLLM(t, scripted.New(), llm.LLMOptions{}).Generate(ctx, nil, llm.Text("go"))
	if !errors.Is(err, llm.Cancelled) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

func TestArgumentsErrorCarriesTheSchema(t *testing.T) {
	schema := llm.Schema{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	tool := llm.Tool{Name: "weather", Parameters: schema, Run: func(context.Context, map[string]any) (any, error) { return nil, nil }}
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "weather", RawArguments: "city=Paris"}}}, scripted.Step{Text: "ok"})
	if _, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{tool}}).Generate(context.Background(), nil, llm.Text("go")); err != nil {
		t.Fatal(err)
	}
	got := llm.ResultText(resultsOf(t, m, 1)[0].Result)
	if !strings.Contains(got, `"city":{"type":"string"}`) || !strings.Contains(got, "city=Paris") {
		t.Errorf("result sent = %q, want the raw text and the schema", got)
	}
}

func TestGenerateStepRunsOneCycle(t *testing.T) {
	m := scripted.NewT(t,
		scripted.Step{ToolCalls: []llm.ToolCall{call("1", "echo", map[string]any{"v": "a"})}},
		scripted.Step{ToolCalls: []llm.ToolCall{call("2", "echo", map[string]any{"v": "b"})}},
		scripted.Step{Text: "done"})
	inst := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}, ToolStrategy: &llm.ToolUseStrategy{MaxIterations: 1}})
	ctx := context.Background()
	first, err := inst.GenerateStep(ctx, nil, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Cycles != 1 || len(first.Messages) != 3 || first.Messages[2].Type() != llm.TypeToolResult || len(m.Requests()) != 1 {
		t.Fatalf("first step: %d cycles, %d messages, %d requests", first.Cycles, len(first.Messages), len(m.Requests()))
	}
	// MaxIterations does not apply to steps: the caller decides.
	second, err := inst.StreamStep(ctx, first.Messages).Turn()
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Messages) != 2 || second.ToolExecutions[0].Result != "echo:b" {
		t.Fatalf("second step messages %d, executions %+v", len(second.Messages), second.ToolExecutions)
	}
	third, err := inst.GenerateStep(ctx, append(first.Messages, second.Messages...))
	if err != nil {
		t.Fatal(err)
	}
	if third.Text() != "done" || len(third.Messages) != 1 {
		t.Errorf("third step %q with %d messages", third.Text(), len(third.Messages))
	}
}

func TestRoundFrom(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	tool := llm.Tool{Name: "t", Run: func(ctx context.Context, _ map[string]any) (any, error) {
		r, i, ok := llm.RoundFrom(ctx)
		if !ok || r.Calls()[i].ToolCallID != fmt.Sprint("c", i) {
			t.Errorf("RoundFrom = %v %d %v", r, i, ok)
		}
		mu.Lock()
		seen[i] = len(r.Calls())
		mu.Unlock()
		return nil, nil
	}}
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("c0", "t", nil), call("c1", "t", nil), call("c2", "t", nil)}}, scripted.Step{Text: "ok"})
	if _, err := newLLM(t, m, llm.LLMOptions{Tools: []llm.Tool{tool}}).Generate(context.Background(), nil, llm.Text("go")); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || seen[0] != 3 {
		t.Errorf("seen = %v", seen)
	}
	if _, _, ok := llm.RoundFrom(context.Background()); ok {
		t.Error("RoundFrom outside a call")
	}
}

func TestToolScheduleOrdersCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		mk := func(name string, d time.Duration) llm.Tool {
			return llm.Tool{Name: name, Run: func(context.Context, map[string]any) (any, error) {
				time.Sleep(d)
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return name, nil
			}}
		}
		tools := []llm.Tool{mk("a", 20*time.Millisecond), mk("b", 0), mk("c", 0)}
		for name, tc := range map[string]struct {
			preds [][]int
			want  string
		}{
			"c after a, b free": {[][]int{nil, nil, {0}}, "b a c"},
			"chain":             {[][]int{{1}, {2}, nil}, "c b a"},
			"cyclic → in order": {[][]int{{2}, {0}, {1}}, "a b c"},
			"out of range":      {[][]int{{7}, nil, nil}, "a b c"},
		} {
			order = nil
			m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("1", "a", nil), call("2", "b", nil), call("3", "c", nil)}}, scripted.Step{Text: "ok"})
			preds := tc.preds
			_, err := newLLM(t, m, llm.LLMOptions{Tools: tools, ToolStrategy: &llm.ToolUseStrategy{
				Schedule: func([]llm.ToolCall) [][]int { return preds },
			}}).Generate(context.Background(), nil, llm.Text("go"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(order, " "); got != tc.want {
				t.Errorf("%s: order %q, want %q", name, got, tc.want)
			}
			if got := resultsOf(t, m, 1); got[0].Result != "a" || got[2].Result != "c" {
				t.Errorf("%s: results not in call order: %v", name, got)
			}
		}
	})
}

// TestEmitStepMatchesStreamStep: EmitStep passes the events StreamStep's
// stream yields, never two at once, and returns the
// same turn; a provider that cannot stream fails with INVALID_REQUEST.
func TestEmitStepMatchesStreamStep(t *testing.T) {
	steps := func() []scripted.Step {
		return []scripted.Step{{Text: "calling", ToolCalls: []llm.ToolCall{call("1", "echo", map[string]any{"v": "x"}), call("2", "echo", map[string]any{"v": "y"})}}}
	}
	opts := llm.LLMOptions{Tools: []llm.Tool{echoTool("echo")}}
	s := newLLM(t, scripted.NewT(t, steps()...), opts).StreamStep(context.Background(), nil, llm.Text("go"))
	var want []llm.StreamEventType
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.Type)
	}
	wantTurn, err := s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	var (
		got    []llm.StreamEventType
		inside atomic.Int32
	)
	gotTurn, err := newLLM(t, scripted.NewT(t, steps()...), opts).EmitStep(context.Background(), nil, func(ev llm.StreamEvent) {
		if inside.Add(1) != 1 {
			t.Error("emit called while another call is running")
		}
		got = append(got, ev.Type)
		inside.Add(-1)
	}, llm.Text("go"))
	if err != nil {
		t.Fatal(err)
	}
	// Tool execution events of concurrent calls may interleave
	// differently: the events are compared as a multiset.
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b llm.StreamEventType) bool { return a < b })); diff != "" {
		t.Errorf("events (-StreamStep +EmitStep):\n%s", diff)
	}
	if diff := cmp.Diff(turnShape(wantTurn), turnShape(gotTurn)); diff != "" {
		t.Errorf("turn (-StreamStep +EmitStep):\n%s", diff)
	}

	m := scripted.NewT(t)
	m.Caps.Streaming = false
	if _, err := newLLM(t, m, llm.LLMOptions{}).EmitStep(context.Background(), nil, func(llm.StreamEvent) {}, llm.Text("go")); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("EmitStep on a provider without streaming = %v, want INVALID_REQUEST", err)
	}
}
