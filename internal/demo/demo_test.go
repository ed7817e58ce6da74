package demo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
)

func TestEvaluate(t *testing.T) {
	for expr, want := range map[string]string{
		"6*7": "42", "(2+3)*4": "20", "2^3^2": "512", "-3 + 5": "2", "10 / 4": "2.5", "7 % 3": "1",
		"0.1+0.2": "0.3", "--2": "2", " 1 + 2 * 3 ": "7", "2*(3+(4-1))": "12", "1/3": "0.333333333333",
	} {
		v, err := Evaluate(expr)
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		if got := FormatNumber(v); got != want {
			t.Errorf("%q = %s, want %s", expr, got, want)
		}
	}
	for _, bad := range []string{"", "1 +", "(1", "1)", "1/0", "5 % 0", "abc", "1..2", "10^400", strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), strings.Repeat("1+", 600) + "1"} {
		if _, err := Evaluate(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{"6*7", "(2+3)*4", "2^3^2", "-(1)", "1/0", "((((1))))", "1e5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Evaluate(s)
		if err == nil && (v != v) {
			t.Fatalf("%q evaluated to NaN without error", s)
		}
	})
}

func TestDemoModelUsesTheCalculator(t *testing.T) {
	inst, err := llm.LLM(&llm.LLMOptions{Model: Model().Ref(), Tools: Tools()})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := inst.Generate(context.Background(), nil, llm.Text("What is (12 + 30) * 2?"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() != "(12 + 30) * 2 = 84." || turn.Cycles != 2 || len(turn.ToolExecutions) != 1 {
		t.Errorf("text %q, cycles %d", turn.Text(), turn.Cycles)
	}
	turn, err = inst.Stream(context.Background(), nil, llm.Text("Hello there, agentry")).Turn()
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() != "Your text has 3 words and 20 characters." {
		t.Errorf("word stats answer %q", turn.Text())
	}
	bare, _ := llm.LLM(&llm.LLMOptions{Model: Model().Ref()})
	turn, _ = bare.Generate(context.Background(), nil, llm.Text("two words"))
	if !strings.Contains(turn.Text(), "2 words") {
		t.Errorf("tool-less answer %q", turn.Text())
	}
}

func TestDemoModelReportsToolErrors(t *testing.T) {
	inst, _ := llm.LLM(&llm.LLMOptions{Model: Model().Ref(), Tools: Tools()})
	turn, err := inst.Generate(context.Background(), nil, llm.Text("compute 1/0 please"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(turn.Text(), "calculate tool failed: division by zero") {
		t.Errorf("answer %q", turn.Text())
	}
}

func TestFindExpression(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"What is (12 + 30) * 2?", "(12 + 30) * 2"},
		{"What is (12 + 30) × 2?", "(12 + 30) * 2"},
		{"What is (12 + 30)*2?", "(12 + 30)*2"},
		{"what's (12 + 30) x 2", "(12 + 30) * 2"},
		{"What is 2 * (3 + 4)?", "2 * (3 + 4)"},
		{"What is 1234 * 5678?", "1234 * 5678"},
		{"What is 1,234 * 5?", "1234 * 5"},
		{"What is 2^16 - 1?", "2^16 - 1"},
		{"What is 2**10?", "2^10"},
		{"10 ÷ 4", "10 / 4"},
		{"5 − 3", "5 - 3"},
		{"What is 6*7?", "6*7"},
		{"compute 1/0 please", "1/0"},
		{"Step 1: compute (12 + 30) * 2.", "(12 + 30) * 2"},
		{"first 1+1, then (12 + 30) * 2", "(12 + 30) * 2"},
		{"((1 + 2)) * 3)", "((1 + 2)) * 3"},
		{"(12 + 30", "12 + 30"},
		{"-(3 + 4) * 2", "-(3 + 4) * 2"},
		{"Why is the sky blue?", ""},
		{"Hello", ""},
		{"call me at 12:30", ""},
		{"I have 3 apples", ""},
		{"-5", ""},
		{"", ""},
	} {
		if got := FindExpression(tc.text); got != tc.want {
			t.Errorf("FindExpression(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func FuzzFindExpression(f *testing.F) {
	for _, s := range []string{"What is (12 + 30) * 2?", "2 × 3", "1,234,567 x 2", "((((", "1e5 + 2", strings.Repeat("(1+", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		expr := FindExpression(s)
		if expr == "" {
			return
		}
		var ae arithmeticError
		if _, err := Evaluate(expr); err != nil && !errors.As(err, &ae) {
			t.Fatalf("FindExpression(%q) = %q, which does not parse: %v", s, expr, err)
		}
		if !hasOperator(expr) {
			t.Fatalf("FindExpression(%q) = %q, which has no operator", s, expr)
		}
	})
}

// The demo model says each thing once with every strategy's prompts: a
// ReAct action after the reasoning does not reason again.
func TestDemoModelReasonsOncePerReActStep(t *testing.T) {
	inst, err := llm.LLM(&llm.LLMOptions{Model: Model().Ref(), Tools: Tools()})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := inst.GenerateStep(context.Background(), []llm.Message{llm.NewUserMessage(llm.Text("What is (12 + 30) * 2?"))}, llm.Text(execution.DefaultActionPrompt))
	if err != nil {
		t.Fatal(err)
	}
	if r := turn.Response.Reasoning(); r != "" {
		t.Errorf("the action reply reasons again: %q", r)
	}
	if !turn.Response.HasToolCalls() {
		t.Errorf("the action reply calls no tool: %q", turn.Text())
	}
}

// Offered neither calculate nor word_stats, the demo model hands the
// task to the first tool taking one required string and answers with its
// result.
func TestDemoModelDelegates(t *testing.T) {
	var got []string
	helper := llm.Tool{Name: "helper", Description: "A sub-agent.",
		Parameters: llm.Schema{"type": "object", "required": []any{"input"}, "properties": map[string]any{"input": map[string]any{"type": "string"}}},
		Run: func(_ context.Context, args map[string]any) (any, error) {
			got = append(got, args["input"].(string))
			return "6*7 = 42.", nil
		}}
	two := llm.Tool{Name: "two", Description: "Takes two strings.",
		Parameters: llm.Schema{"type": "object", "required": []any{"a", "b"}, "properties": map[string]any{"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "string"}}},
		Run:        func(context.Context, map[string]any) (any, error) { t.Error("two was called"); return nil, nil }}
	inst, err := llm.LLM(&llm.LLMOptions{Model: Model().Ref(), Tools: []llm.Tool{two, helper}})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := inst.Generate(context.Background(), nil, llm.Text("What is 6*7?"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() != "helper returned 6*7 = 42." || len(got) != 1 || got[0] != "What is 6*7?" {
		t.Errorf("text %q, helper got %q", turn.Text(), got)
	}
}
