package middleware_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/middleware"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// The four middleware in the order the package documentation suggests, on
// one streamed run with a repaired call and enough rounds to slide the
// window: the run completes, every request is a valid conversation, and
// each middleware did its part.
func TestAllTogether(t *testing.T) {
	rec := &recorder{}
	script := []scripted.Step{calls(call("", "echo", map[string]any{"value": "x"}))} // invalid: v is required
	for i := range 6 {
		script = append(script, toolStep(fmt.Sprintf("s%d", i), 10, 10))
	}
	script = append(script, textStep("done", 10, 10))
	m := scripted.NewT(t, script...)
	a, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{echo}},
		Middleware: []agent.Middleware{
			middleware.Logging(&middleware.LoggingOptions{Logger: slog.New(rec), NoTiming: true}),
			middleware.Budget(&middleware.BudgetOptions{MaxTotalTokens: 1000, MaxToolCalls: 10}),
			middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{}),
			middleware.ContextWindow(&middleware.ContextWindowOptions{MaxMessages: 6, KeepToolResults: 2}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Stream(t.Context(), llm.Text("go"), nil).Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Turn.Text() != "done" || res.State.Step() != 8 {
		t.Errorf("text %q, step %d; want done, 8", res.Turn.Text(), res.State.Step())
	}
	for i, req := range m.Requests() {
		if err := checkConversation(req.Messages); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if len(req.Messages) > 8 {
			t.Errorf("request %d sent %d messages", i, len(req.Messages))
		}
	}
	if second := m.Requests()[1].Messages; !strings.Contains(second[len(second)-1].Text(), "missing property 'v'") {
		t.Errorf("the model was not told about the invalid call: %q", second[len(second)-1].Text())
	}
	recs := rec.records()
	if len(recs) != 10 || recs[len(recs)-1].Msg != "agent end" || recs[1].Attrs["tool_errors"] != 1 {
		t.Errorf("records: %v", recs)
	}
}
