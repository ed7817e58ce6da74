package agent_test

import (
	"context"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

func TestSmokeLoop(t *testing.T) {
	m := scripted.NewT(t,
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "echo", Arguments: map[string]any{"v": "x"}}}},
		scripted.Step{Text: "done"})
	echo := llm.Tool{Name: "echo", Run: func(_ context.Context, a map[string]any) (any, error) { return a["v"], nil }}
	a, err := agent.New(agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{echo}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Len() != 4 || res.State.Step() != 2 || res.Turn.Text() != "done" || res.Turn.Cycles != 2 || len(res.Turn.Messages) != 4 {
		t.Errorf("state len %d step %d text %q cycles %d msgs %d", res.State.Len(), res.State.Step(), res.Turn.Text(), res.Turn.Cycles, len(res.Turn.Messages))
	}
}
