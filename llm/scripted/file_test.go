package scripted_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

const script = `
steps:
  - reasoning: "Six times seven."
    text: "Let me calculate."
    tool_calls:
      - {id: call_1, name: calculate, arguments: {expression: "6*7", precise: true, n: 2}}
  - text: "42"
    usage: {input: 10, output: 1}
  - data: {name: Ada, age: 36}
  - error: {code: RATE_LIMITED, message: "slow down"}
    delay: 1ms
`

func TestLoadPlaysTheScript(t *testing.T) {
	m, err := scripted.Load(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	calc := llm.Tool{Name: "calculate", Run: func(_ context.Context, a map[string]any) (any, error) {
		if diff := cmp.Diff(map[string]any{"expression": "6*7", "precise": true, "n": 2.0}, a); diff != "" {
			t.Errorf("arguments (-want +got):\n%s", diff)
		}
		return "42", nil
	}}
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{calc}})
	turn, err := inst.Generate(context.Background(), nil, llm.Text("6*7?"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() != "42" || turn.Usage.InputTokens < 10 || turn.Messages[1].(*llm.AssistantMessage).Reasoning() != "Six times seven." {
		t.Errorf("turn %q usage %+v", turn.Text(), turn.Usage)
	}
	st, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Structure: llm.Schema{"type": "object"}})
	turn, _ = st.Generate(context.Background(), nil, llm.Text("Ada"))
	if diff := cmp.Diff(map[string]any{"name": "Ada", "age": 36.0}, turn.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if _, err := inst.Generate(context.Background(), nil, llm.Text("x")); !errors.Is(err, llm.RateLimited) {
		t.Errorf("scripted error = %v", err)
	}
}

func TestLoadRejectsBadScripts(t *testing.T) {
	for name, src := range map[string]string{
		"empty":        "",
		"no steps":     "steps: []",
		"unknown":      "steps:\n  - text: hi\n    colour: red",
		"empty step":   "steps:\n  - {}",
		"bad code":     "steps:\n  - error: {code: OOPS}",
		"bad delay":    "steps:\n  - text: hi\n    delay: soon",
		"nameless":     "steps:\n  - tool_calls: [{id: x}]",
		"not yaml":     "steps: [",
		"json unknown": `{"steps":[{"txt":"hi"}]}`,
	} {
		if _, err := scripted.Load(strings.NewReader(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := scripted.Load(strings.NewReader(`{"steps":[{"text":"json works"}]}`)); err != nil {
		t.Errorf("JSON script: %v", err)
	}
}

func FuzzLoad(f *testing.F) {
	f.Add(script)
	f.Add(`{"steps":[{"text":"hi"}]}`)
	f.Fuzz(func(t *testing.T, src string) {
		m, err := scripted.Load(strings.NewReader(src))
		if err == nil && m.Remaining() == 0 {
			t.Fatal("a script without steps was accepted")
		}
	})
}
