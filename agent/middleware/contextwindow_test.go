package middleware_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/middleware"
	"github.com/agentry-dev/agentry/internal/agenttest"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// history builds a conversation from a spec of space-separated letters:
// u a user message, a an assistant reply, c an assistant message calling
// echo (cN calls it N times), r the tool results answering the c before
// it. Texts are 40 bytes, results 400.
func history(spec string) []llm.Message {
	var msgs []llm.Message
	var last *llm.AssistantMessage
	for i, f := range strings.Fields(spec) {
		text := fmt.Sprintf("%-40s", "message "+strconv.Itoa(i))
		switch f[0] {
		case 'u':
			msgs = append(msgs, llm.NewUserMessage(llm.Text(text)))
		case 'a':
			msgs = append(msgs, llm.NewAssistantMessage([]llm.ContentBlock{llm.Text(text)}, nil))
		case 'c':
			n := 1
			if len(f) > 1 {
				n, _ = strconv.Atoi(f[1:])
			}
			var calls []llm.ToolCall
			for j := range n {
				id := fmt.Sprintf("c%d", i)
				if j > 0 {
					id += "_" + strconv.Itoa(j)
				}
				calls = append(calls, call(id, "echo", map[string]any{"v": id}))
			}
			last = llm.NewAssistantMessage(nil, calls)
			msgs = append(msgs, last)
		case 'r':
			var results []llm.ToolResult
			for _, c := range last.ToolCalls {
				results = append(results, llm.ToolResult{ToolCallID: c.ToolCallID, Result: strings.Repeat("x", 400)})
			}
			msgs = append(msgs, llm.NewToolResultMessage(results))
		}
	}
	return msgs
}

// describe names each of msgs by its letter and index in hist (by id),
// with * when its tool output was pruned.
func describe(msgs, hist []llm.Message) string {
	var out []string
	for _, m := range msgs {
		i := slices.IndexFunc(hist, func(h llm.Message) bool { return h.Info().ID == m.Info().ID })
		label := "?"
		switch m := m.(type) {
		case *llm.UserMessage:
			label = "u"
		case *llm.AssistantMessage:
			label = "a"
			if m.HasToolCalls() {
				label = "c"
			}
		case *llm.ToolResultMessage:
			label = "r"
		}
		label += strconv.Itoa(i)
		if strings.HasPrefix(m.Text(), "[tool output pruned: ") {
			label += "*"
		}
		out = append(out, label)
	}
	return strings.Join(out, " ")
}

// tokens is a test estimate: 10 per text message, 5 per tool call
// message, a quarter of the text for tool results.
func tokens(m llm.Message) int {
	switch m := m.(type) {
	case *llm.ToolResultMessage:
		return len(m.Text()) / 4
	case *llm.AssistantMessage:
		if m.HasToolCalls() {
			return 5
		}
	}
	return 10
}

// TestUAP_6_3_ContextWindow runs an agent on a history whose last message is
// the input and checks what the model receives: the history bounded at the
// start of the run.
func TestUAP_6_3_ContextWindow(t *testing.T) {
	// Estimates with tokens: u0 10, a1 10, u2 10, c3 5, r4 100, c5 5, r6 100,
	// c7 5, r8 100, a9 10, u10 10 = 365; a pruned result is 7.
	const long = "u a u c r c r c r a u"
	tests := []struct {
		name string
		hist string
		opts middleware.ContextWindowOptions
		want string
	}{
		{"zero options", long, middleware.ContextWindowOptions{}, "u0 a1 u2 c3 r4 c5 r6 c7 r8 a9 u10"},
		{"prune all but the last result", long, middleware.ContextWindowOptions{KeepToolResults: 1}, "u0 a1 u2 c3 r4* c5 r6* c7 r8 a9 u10"},
		{"prune all but two", long, middleware.ContextWindowOptions{KeepToolResults: 2}, "u0 a1 u2 c3 r4* c5 r6 c7 r8 a9 u10"},
		{"fewer results than kept", long, middleware.ContextWindowOptions{KeepToolResults: 5}, "u0 a1 u2 c3 r4 c5 r6 c7 r8 a9 u10"},
		{"window", long, middleware.ContextWindowOptions{MaxMessages: 4}, "u0 c7 r8 a9 u10"},
		{"window moved back to a call", long, middleware.ContextWindowOptions{MaxMessages: 3}, "u0 c7 r8 a9 u10"},
		{"window dropping the first user message", long, middleware.ContextWindowOptions{MaxMessages: 3, DropFirstUserMessage: true}, "c7 r8 a9 u10"},
		{"window larger than the history", long, middleware.ContextWindowOptions{MaxMessages: 20}, "u0 a1 u2 c3 r4 c5 r6 c7 r8 a9 u10"},
		{"window and pruning", long, middleware.ContextWindowOptions{MaxMessages: 6, KeepToolResults: 1}, "u0 c5 r6* c7 r8 a9 u10"},
		{"window with the first user message inside", "u c r a u", middleware.ContextWindowOptions{MaxMessages: 4}, "u0 c1 r2 a3 u4"},
		{"first user message after an assistant", "a u c r a u", middleware.ContextWindowOptions{MaxMessages: 2}, "u1 a4 u5"},
		{"tokens", long, middleware.ContextWindowOptions{MaxTokens: 300, Estimate: tokens}, "u0 c5 r6 c7 r8 a9 u10"},
		{"fewer tokens", long, middleware.ContextWindowOptions{MaxTokens: 100, Estimate: tokens}, "u0 a9 u10"},
		{"too few tokens: the first and last messages stay", long, middleware.ContextWindowOptions{MaxTokens: 5, Estimate: tokens}, "u0 u10"},
		{"tokens, dropping the first user message", long, middleware.ContextWindowOptions{MaxTokens: 5, Estimate: tokens, DropFirstUserMessage: true}, "u10"},
		{"pruning makes the tokens fit", long, middleware.ContextWindowOptions{MaxTokens: 200, Estimate: tokens, KeepToolResults: 1}, "u0 a1 u2 c3 r4* c5 r6* c7 r8 a9 u10"},
		{"pruning and tokens", long, middleware.ContextWindowOptions{MaxTokens: 150, Estimate: tokens, KeepToolResults: 1}, "u0 c5 r6* c7 r8 a9 u10"},
		// EstimateTokens: texts 10, calls (4+10)/4 → 4, results 100: 362.
		{"default estimate", long, middleware.ContextWindowOptions{MaxTokens: 250}, "u0 c5 r6 c7 r8 a9 u10"},
		{"tool result input keeps its call", "u a u c2 r", middleware.ContextWindowOptions{MaxMessages: 1}, "u0 c3 r4"},
		{"tool result input within tokens", "u a u c2 r", middleware.ContextWindowOptions{MaxTokens: 1, Estimate: tokens}, "u0 c3 r4"},
		{"several results per round", "u c3 r c2 r a u", middleware.ContextWindowOptions{KeepToolResults: 1, MaxMessages: 4}, "u0 c3 r4 a5 u6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hist := history(tt.hist)
			m := scripted.NewT(t, textStep("ok", 1, 1))
			a := newAgent(t, m.Ref(), []llm.Tool{echo}, middleware.ContextWindow(&tt.opts))
			input := hist[len(hist)-1]
			if _, err := a.Generate(t.Context(), input, agent.Initial().WithMessages(hist[:len(hist)-1]...)); err != nil {
				t.Fatal(err)
			}
			sent := m.Requests()[0].Messages
			if diff := cmp.Diff(tt.want, describe(sent, hist)); diff != "" {
				t.Errorf("history sent (-want +got):\n%s", diff)
			}
			if err := checkConversation(sent); err != nil {
				t.Errorf("history sent: %v", err)
			}
		})
	}
}

func TestContextWindowPlaceholder(t *testing.T) {
	hist := history("u c r c r u")
	m := scripted.NewT(t, textStep("ok", 1, 1))
	a := newAgent(t, m.Ref(), nil, middleware.ContextWindow(&middleware.ContextWindowOptions{KeepToolResults: 1}))
	if _, err := a.Generate(t.Context(), hist[5], agent.Initial().WithMessages(hist[:5]...)); err != nil {
		t.Fatal(err)
	}
	sent := m.Requests()[0].Messages
	pruned := sent[2].(*llm.ToolResultMessage)
	want := &llm.ToolResultMessage{MessageInfo: hist[2].Info(),
		Results: []llm.ToolResult{{ToolCallID: "c1", Result: "[tool output pruned: 400 bytes]"}}}
	if diff := cmp.Diff(want, pruned); diff != "" {
		t.Errorf("pruned message (-want +got):\n%s", diff)
	}
	if orig := hist[2].(*llm.ToolResultMessage); orig.Results[0].Result != strings.Repeat("x", 400) {
		t.Errorf("the original message was modified")
	}
}

// Between steps: a tool loop of five rounds under a window of four
// messages, with only the last round's output kept. Every request is a
// valid conversation within bounds.
func TestContextWindowBetweenSteps(t *testing.T) {
	long := llm.Tool{Name: "long", Run: func(_ context.Context, a map[string]any) (any, error) {
		return strings.Repeat("y", 200) + a["v"].(string), nil
	}}
	var script []scripted.Step
	for i := range 5 {
		id := fmt.Sprintf("s%d", i+1)
		script = append(script, scripted.Step{ToolCalls: []llm.ToolCall{call(id, "long", map[string]any{"v": id})}})
	}
	script = append(script, textStep("done", 1, 1))
	m := scripted.NewT(t, script...)
	a := newAgent(t, m.Ref(), []llm.Tool{long},
		middleware.ContextWindow(&middleware.ContextWindowOptions{MaxMessages: 4, KeepToolResults: 1}))
	res, err := a.Generate(t.Context(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for i, req := range m.Requests() {
		if err := checkConversation(req.Messages); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		sizes = append(sizes, len(req.Messages))
		if _, ok := req.Messages[0].(*llm.UserMessage); !ok || req.Messages[0].Text() != "go" {
			t.Errorf("request %d does not start with the task", i)
		}
	}
	// 1, 3, 5, then the task and the last four messages.
	if diff := cmp.Diff([]int{1, 3, 5, 5, 5, 5}, sizes); diff != "" {
		t.Errorf("request sizes (-want +got):\n%s", diff)
	}
	// The state keeps the bound: the task, the last round, the reply.
	var got []string
	for _, msg := range res.State.Messages() {
		got = append(got, string(msg.Type())+":"+msg.Text())
	}
	want := []string{"user:go", "assistant:", "tool_result:[tool output pruned: 202 bytes]",
		"assistant:", "tool_result:" + strings.Repeat("y", 200) + "s5", "assistant:done"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final state (-want +got):\n%s", diff)
	}
	if len(res.Turn.Messages) != 12 {
		t.Errorf("the turn holds %d messages, want all 12 of the run", len(res.Turn.Messages))
	}
}

// An unchanged history keeps its state: no replacement, no new state id.
func TestContextWindowUnchanged(t *testing.T) {
	m := scripted.NewT(t, textStep("ok", 1, 1))
	var ids []string
	a, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: m.Ref()},
		Middleware: []agent.Middleware{
			middleware.ContextWindow(&middleware.ContextWindowOptions{MaxMessages: 10, KeepToolResults: 1, MaxTokens: 1000}),
			agenttest.MiddlewareFuncs{MiddlewareName: "spy", BeforeFunc: func(_ context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
				ids = append(ids, mc.State.ID())
				return nil, nil
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	start := agent.Initial().WithMessages(history("u a")...)
	if _, err := a.Generate(t.Context(), llm.Text("again"), start); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != start.ID() {
		t.Errorf("the state reaching the next middleware is %v, want the starting state %s", ids, start.ID())
	}
}

// Random conversations and bounds: what the model receives is always a
// valid conversation that ends with the input, keeps the first user
// message unless asked not to, stays within the window (give or take the
// first message and a call pulled in with its results), keeps the recent
// tool output and is otherwise the history in order.
func TestContextWindowRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		var spec []string
		if rng.IntN(4) > 0 {
			spec = append(spec, "u")
		}
		for range rng.IntN(12) {
			switch rng.IntN(4) {
			case 0:
				spec = append(spec, "u")
			case 1:
				spec = append(spec, "a")
			default:
				spec = append(spec, "c"+strconv.Itoa(1+rng.IntN(3)), "r")
			}
		}
		spec = append(spec, "u")
		opts := middleware.ContextWindowOptions{
			KeepToolResults:      rng.IntN(4),
			MaxMessages:          rng.IntN(8),
			DropFirstUserMessage: rng.IntN(2) == 0,
		}
		if rng.IntN(2) == 0 {
			opts.MaxTokens = rng.IntN(600)
		}
		name := fmt.Sprintf("%d %q %+v", i, strings.Join(spec, " "), opts)
		hist := history(strings.Join(spec, " "))
		m := scripted.NewT(t, textStep("ok", 1, 1))
		a := newAgent(t, m.Ref(), []llm.Tool{echo}, middleware.ContextWindow(&opts))
		input := hist[len(hist)-1]
		if _, err := a.Generate(t.Context(), input, agent.Initial().WithMessages(hist[:len(hist)-1]...)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sent := m.Requests()[0].Messages
		if err := checkConversation(sent); err != nil {
			t.Errorf("%s: %v\nsent %s", name, err, describe(sent, hist))
		}
		if sent[len(sent)-1] != input {
			t.Errorf("%s: the input is not last: %s", name, describe(sent, hist))
		}
		firstUser := slices.IndexFunc(hist, func(m llm.Message) bool { return m.Type() == llm.TypeUser })
		kept := slices.IndexFunc(sent, func(m llm.Message) bool { return m.Info().ID == hist[firstUser].Info().ID })
		if !opts.DropFirstUserMessage && (kept < 0 || firstUser == 0 && kept != 0) {
			t.Errorf("%s: the first user message is not kept: %s", name, describe(sent, hist))
		}
		if opts.MaxMessages > 0 && len(sent) > opts.MaxMessages+2 {
			t.Errorf("%s: %d messages sent: %s", name, len(sent), describe(sent, hist))
		}
		// In order, each message the history's (or its pruned form).
		last := -1
		for _, s := range sent {
			j := slices.IndexFunc(hist, func(h llm.Message) bool { return h.Info().ID == s.Info().ID })
			if j <= last {
				t.Errorf("%s: not the history in order: %s", name, describe(sent, hist))
				break
			}
			last = j
		}
		// The last KeepToolResults tool result messages are intact.
		var results []llm.Message
		for _, h := range hist {
			if h.Type() == llm.TypeToolResult {
				results = append(results, h)
			}
		}
		for _, r := range results[max(0, len(results)-opts.KeepToolResults):] {
			for _, s := range sent {
				if s.Info().ID == r.Info().ID && s != r {
					t.Errorf("%s: a recent result was pruned: %s", name, describe(sent, hist))
				}
			}
		}
	}
}
