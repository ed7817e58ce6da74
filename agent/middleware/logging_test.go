package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/middleware"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// with returns m with kv added (m is not modified).
func with(m map[string]any, kv ...any) map[string]any {
	out := maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// without returns m without keys.
func without(m map[string]any, keys ...string) map[string]any {
	out := maps.Clone(m)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// TestUAP_9_3_Logging drives an agent through a tool step and a final step
// (or a failing one) and checks every record. Time is synctest's, so the
// durations are the scripted delays exactly.
func TestUAP_9_3_Logging(t *testing.T) {
	toolCall := scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "echo", map[string]any{"v": "hi"})},
		Usage: llm.TokenUsage{InputTokens: 10, OutputTokens: 5}, Delay: time.Second}
	final := scripted.Step{Text: "done", Usage: llm.TokenUsage{InputTokens: 20, OutputTokens: 3}, Delay: 2 * time.Second}
	failing := scripted.Step{Err: errors.New("boom"), Delay: 2 * time.Second}

	start := map[string]any{"streaming": false, "history": 0, "step": 0,
		"input_type": "user", "input_bytes": 5, "input_blocks": 1}
	step1 := map[string]any{"step": 1, "tool_calls": 1, "tools": []string{"echo"}, "tool_errors": 0,
		"input_tokens": 10, "output_tokens": 5, "history": 3, "duration": time.Second}
	step2 := map[string]any{"step": 2, "tool_calls": 0, "tool_errors": 0,
		"input_tokens": 20, "output_tokens": 3, "history": 4, "duration": 2 * time.Second}
	end := map[string]any{"steps": 2, "cycles": 2, "tool_calls": 1, "input_tokens": 30, "output_tokens": 8,
		"history": 4, "duration": 3 * time.Second}
	execs := []map[string]any{{"tool": "echo", "tool_call_id": "c1", "arguments": map[string]any{"v": "hi"},
		"result": "hi", "is_error": false}}
	info := slog.LevelInfo

	tests := []struct {
		name   string
		opts   middleware.LoggingOptions
		stream bool
		script []scripted.Step
		want   func(errText string) []record // without agent_id
	}{
		{
			name:   "defaults",
			script: []scripted.Step{toolCall, final},
			want: func(string) []record {
				return []record{{info, "agent start", start}, {info, "agent step", step1},
					{info, "agent step", step2}, {info, "agent end", end}}
			},
		},
		{
			name:   "streamed",
			stream: true,
			script: []scripted.Step{toolCall, final},
			want: func(string) []record {
				return []record{{info, "agent start", with(start, "streaming", true)}, {info, "agent step", step1},
					{info, "agent step", step2}, {info, "agent end", end}}
			},
		},
		{
			name:   "include messages",
			opts:   middleware.LoggingOptions{IncludeMessages: true},
			script: []scripted.Step{toolCall, final},
			want: func(string) []record {
				return []record{
					{info, "agent start", with(start, "input", "hello")},
					{info, "agent step", with(step1, "response", "", "tool_executions", execs)},
					{info, "agent step", with(step2, "response", "done")},
					{info, "agent end", with(end, "response", "done")},
				}
			},
		},
		{
			name:   "no timing, debug level",
			opts:   middleware.LoggingOptions{NoTiming: true, Level: slog.LevelDebug},
			script: []scripted.Step{toolCall, final},
			want: func(string) []record {
				d := slog.LevelDebug
				return []record{{d, "agent start", start}, {d, "agent step", without(step1, "duration")},
					{d, "agent step", without(step2, "duration")}, {d, "agent end", without(end, "duration")}}
			},
		},
		{
			name:   "failure",
			script: []scripted.Step{toolCall, failing},
			want: func(errText string) []record {
				return []record{{info, "agent start", start}, {info, "agent step", step1},
					{slog.LevelError, "agent error", map[string]any{"error": errText, "steps": 1, "duration": 3 * time.Second}}}
			},
		},
		{
			name:   "failure without timing",
			opts:   middleware.LoggingOptions{NoTiming: true},
			script: []scripted.Step{failing},
			want: func(errText string) []record {
				return []record{{info, "agent start", start},
					{slog.LevelError, "agent error", map[string]any{"error": errText, "steps": 0}}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				opts := tt.opts
				opts.Logger = slog.New(rec)
				model := scripted.NewT(t, tt.script...)
				a := newAgent(t, model.Ref(), []llm.Tool{echo}, middleware.Logging(&opts))
				var err error
				if tt.stream {
					_, err = a.Stream(t.Context(), llm.Text("hello"), nil).Result()
				} else {
					_, err = a.Generate(t.Context(), llm.Text("hello"), nil)
				}
				errText := ""
				if err != nil {
					errText = err.Error()
				}
				want := tt.want(errText)
				for i := range want {
					want[i].Attrs = with(want[i].Attrs, "agent_id", a.ID())
				}
				if diff := cmp.Diff(want, rec.records()); diff != "" {
					t.Errorf("records (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// secretKey is an API key that must never reach a log.
type secretKey struct{}

func (secretKey) Key(context.Context) (string, error) { return "sk-secret-0123456789", nil }

func TestLoggingNeverLogsKeys(t *testing.T) {
	rec := &recorder{}
	model := scripted.NewT(t, toolStep("c1", 1, 1), textStep("done", 1, 1))
	a, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{echo},
			Config: llm.ProviderConfig{APIKey: secretKey{}, Headers: map[string]string{"Authorization": "Bearer sk-secret-0123456789"}}},
		Middleware: []agent.Middleware{middleware.Logging(&middleware.LoggingOptions{Logger: slog.New(rec), IncludeMessages: true})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Generate(t.Context(), llm.Text("hello"), nil); err != nil {
		t.Fatal(err)
	}
	recs := rec.records()
	if len(recs) != 4 {
		t.Fatalf("got %d records, want 4", len(recs))
	}
	if dump := fmt.Sprint(recs); strings.Contains(dump, "sk-secret") {
		t.Errorf("a record holds the API key: %s", dump)
	}
}

func TestLoggingDefaultLogger(t *testing.T) {
	rec := &recorder{}
	prev := slog.Default()
	slog.SetDefault(slog.New(rec))
	t.Cleanup(func() { slog.SetDefault(prev) })

	model := scripted.NewT(t, textStep("done", 1, 1))
	a := newAgent(t, model.Ref(), nil, middleware.Logging(&middleware.LoggingOptions{}))
	if _, err := a.Generate(t.Context(), llm.Text("hello"), nil); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, r := range rec.records() {
		msgs = append(msgs, r.Msg)
	}
	if diff := cmp.Diff([]string{"agent start", "agent step", "agent end"}, msgs); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// A resumed run (no input) is logged as such, its steps counted from the
// state's step.
func TestLoggingResumed(t *testing.T) {
	rec := &recorder{}
	model := scripted.NewT(t, toolStep("c1", 1, 1), textStep("done", 1, 1))
	a := newAgent(t, model.Ref(), []llm.Tool{echo},
		middleware.Logging(&middleware.LoggingOptions{Logger: slog.New(rec), NoTiming: true}))
	state := agent.Initial().WithMessage(llm.NewUserMessage(llm.Text("hello"))).WithStep(5)
	if _, err := a.Generate(t.Context(), nil, state); err != nil {
		t.Fatal(err)
	}
	recs := rec.records()
	got := []map[string]any{recs[0].Attrs, recs[len(recs)-1].Attrs}
	want := []map[string]any{
		{"agent_id": a.ID(), "streaming": false, "history": 1, "step": 5, "resumed": true},
		{"agent_id": a.ID(), "steps": 2, "cycles": 2, "tool_calls": 1, "input_tokens": 2, "output_tokens": 2, "history": 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("start and end records (-want +got):\n%s", diff)
	}
}

// Records below the handler's level are not built; failures, at Error,
// still are.
func TestLoggingDisabledLevel(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	model := scripted.NewT(t, toolStep("c1", 1, 1), scripted.Step{Err: errors.New("boom")})
	a := newAgent(t, model.Ref(), []llm.Tool{echo}, middleware.Logging(&middleware.LoggingOptions{Logger: logger}))
	if _, err := a.Generate(t.Context(), llm.Text("hello"), nil); err == nil {
		t.Fatal("run succeeded, want the scripted failure")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `msg="agent error"`) || !strings.Contains(lines[0], "steps=1") {
		t.Errorf("logged %q, want only the failure, after one step", lines)
	}
}
