package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/llmtest"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// target adapts a scripted model to the conformance kit.
func target(t *testing.T) llmtest.Target {
	m := scripted.NewT(t)
	var mu sync.Mutex
	return llmtest.Target{
		Model:     m.Ref(),
		Reasoning: true,
		NoHTTP:    true,
		Script: func(replies ...llmtest.Reply) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range replies {
				s := scripted.Step{Text: r.Text, Reasoning: r.Reasoning, ToolCalls: r.ToolCalls,
					Usage: llm.TokenUsage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens}}
				if r.Object != "" {
					if err := json.Unmarshal([]byte(r.Object), &s.Data); err != nil {
						t.Fatalf("reply object: %v", err)
					}
				}
				if r.Hang {
					s.Delay = time.Hour
				}
				m.Push(s)
			}
		},
		Requests: func() []llmtest.Observed {
			var out []llmtest.Observed
			for _, c := range m.Calls() {
				o := observe(c.Request)
				o.Stream = c.Stream
				out = append(out, o)
			}
			return out
		},
	}
}

func observe(req *llm.Request) llmtest.Observed {
	o := llmtest.Observed{System: req.System, Params: req.Params, Structured: req.Structure != nil}
	for _, tool := range req.Tools {
		o.Tools = append(o.Tools, tool.Name)
	}
	for _, m := range req.Messages {
		switch m := m.(type) {
		case *llm.UserMessage:
			o.UserTexts = append(o.UserTexts, m.Text())
		case *llm.AssistantMessage:
			if m.Text() != "" {
				o.AssistantTexts = append(o.AssistantTexts, m.Text())
			}
			for _, c := range m.ToolCalls {
				o.ToolCallIDs = append(o.ToolCallIDs, c.ToolCallID)
			}
		case *llm.ToolResultMessage:
			for _, r := range m.Results {
				o.ToolResults = append(o.ToolResults, llm.ToolResult{ToolCallID: r.ToolCallID, Result: llm.ResultText(r.Result), IsError: r.IsError})
			}
		}
	}
	return o
}

func TestConformance(t *testing.T) {
	llmtest.Run(t, target)
}

// recorder is a TB that records failures instead of failing.
type recorder struct {
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, format)
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func TestUnexpectedCallFailsTest(t *testing.T) {
	rec := &recorder{}
	m := scripted.NewT(rec, scripted.Step{Text: "only one"})
	inst, err := llm.LLM(&llm.LLMOptions{Model: m.Ref()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Generate(context.Background(), nil, llm.Text("1")); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_, err = inst.Generate(context.Background(), nil, llm.Text("2"))
	if !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("extra call error = %v, want INVALID_REQUEST", err)
	}
	if len(rec.errors) != 1 {
		t.Errorf("the extra call reported %d test failures, want 1", len(rec.errors))
	}
}

func TestAssertCompleteReportsUnusedSteps(t *testing.T) {
	rec := &recorder{}
	scripted.NewT(rec, scripted.Step{Text: "never used"})
	for _, f := range rec.cleanups {
		f()
	}
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "never used") {
		t.Errorf("cleanup reported %q, want one unused-step failure", rec.errors)
	}
}

func TestStreamChunks(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Text: "a b c", Chunks: []string{"a ", "b ", "c"}})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref()})
	var deltas []string
	for ev, err := range inst.Stream(context.Background(), nil, llm.Text("x")).Events() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == llm.TextDelta {
			deltas = append(deltas, ev.Delta.Text)
		}
	}
	if strings.Join(deltas, "|") != "a |b |c" {
		t.Errorf("deltas = %q", deltas)
	}
}

func TestStreamErrorAfterContent(t *testing.T) {
	boom := llm.NewError(llm.ProviderError, "scripted", "mid-stream failure", nil)
	m := scripted.NewT(t, scripted.Step{Text: "partial answer", Err: boom})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref()})
	var text string
	var gotErr error
	for ev, err := range inst.Stream(context.Background(), nil, llm.Text("x")).Events() {
		if err != nil {
			gotErr = err
			break
		}
		text += ev.Delta.Text
	}
	if text != "partial answer" || !errors.Is(gotErr, llm.ProviderError) {
		t.Errorf("text %q, err %v; want the content then PROVIDER_ERROR", text, gotErr)
	}
}

func TestFuncModel(t *testing.T) {
	m := scripted.NewFunc(func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		last := req.Messages[len(req.Messages)-1]
		return scripted.Step{Text: strings.ToUpper(last.Text())}, nil
	})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref()})
	turn, err := inst.Generate(context.Background(), nil, llm.Text("shout"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() != "SHOUT" {
		t.Errorf("text = %q", turn.Text())
	}
}

func TestDelayHonoursCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := scripted.NewT(t, scripted.Step{Text: "late", Delay: time.Hour})
		inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref()})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := inst.Generate(ctx, nil, llm.Text("x"))
		if d := time.Since(start); !errors.Is(err, llm.Timeout) || d != 20*time.Millisecond {
			t.Errorf("err = %v after %v, want TIMEOUT after the context's 20ms", err, d)
		}
	})
}
