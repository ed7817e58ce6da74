package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

func TestParsePartialJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"name": "Ad`:              `{"name":"Ad"}`,
		`{"a": 1, "b": [2, `:        `{"a":1,"b":[2]}`,
		`{"a": 1, "b`:               `{"a":1}`,
		`{"a": 12`:                  `{"a":12}`,
		`{"a":`:                     `{}`,
		`[1, 2`:                     `[1,2]`,
		`[{"x": "y"}, {"x": "z`:     `[{"x":"y"},{"x":"z"}]`,
		`{"s": "line\`:              `{"s":"line"}`,
		`{"s": "ok", "t": "a\"b`:    `{"s":"ok","t":"a\"b"}`,
		`{"n": {"deep": [true, fal`: `{"n":{"deep":[true]}}`,
		`{"complete": true}`:        `{"complete":true}`,
		`"half a str`:               `"half a str"`,
		`{"é": "café`:               `{"é":"café"}`,
	} {
		v, ok := llm.ParsePartialJSON(in)
		if !ok {
			t.Errorf("%s: not parsed", in)
			continue
		}
		got, _ := json.Marshal(v)
		var w any
		json.Unmarshal([]byte(want), &w)
		wb, _ := json.Marshal(w)
		if string(got) != string(wb) {
			t.Errorf("%s → %s, want %s", in, got, wb)
		}
	}
	for _, in := range []string{"", "tr", "}", "]]", "1."} {
		if v, ok := llm.ParsePartialJSON(in); ok {
			t.Errorf("%q → %v, want not ok", in, v)
		}
	}
}

func FuzzParsePartialJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, {"b": "c`, `[`, `{"x":"\u00`, `{"a":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := llm.ParsePartialJSON(s)
		if ok {
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("parsed value does not encode: %v", err)
			}
		}
		var full any
		if json.Unmarshal([]byte(s), &full) == nil && !ok {
			t.Fatalf("complete JSON %q not parsed", s)
		}
	})
}

func TestUPP_10_7_ParsedObjectMiddleware(t *testing.T) {
	m := scripted.NewT(t, scripted.Step{Data: map[string]any{"name": "Ada", "tags": []any{"math", "poetry"}}})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Structure: llm.Schema{"type": "object"},
		Middleware: []llm.Middleware{llm.ParsedObject(&llm.ParsedObjectOptions{})}})
	var last any
	n := 0
	for ev, err := range inst.Stream(context.Background(), nil, llm.Text("x")).Events() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == llm.ObjectDelta {
			n++
			if ev.Delta.Parsed != nil {
				last = ev.Delta.Parsed
			}
		}
	}
	if n < 2 {
		t.Fatalf("only %d object deltas", n)
	}
	if diff := cmp.Diff(map[string]any{"name": "Ada", "tags": []any{"math", "poetry"}}, last); diff != "" {
		t.Errorf("final parsed value (-want +got):\n%s", diff)
	}
}

func TestUPP_10_7_LoggingMiddleware(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "echo", Arguments: map[string]any{"v": "secret-arg"}}}}, scripted.Step{Text: "ok"})
	inst, _ := llm.LLM(&llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{echoTool("echo")},
		Config:     llm.ProviderConfig{APIKey: llm.StaticKey("sk-never-logged")},
		Middleware: []llm.Middleware{llm.Logging(&llm.LoggingOptions{Logger: logger})}})
	if _, err := inst.Generate(context.Background(), nil, llm.Text("x")); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, msg := range []string{"llm start", "llm response", "llm tool call", "llm tool result", "llm end"} {
		if !strings.Contains(out, `"msg":"`+msg+`"`) {
			t.Errorf("no %q record in:\n%s", msg, out)
		}
	}
	if strings.Contains(out, "sk-never-logged") || strings.Contains(out, "secret-arg") {
		t.Errorf("sensitive data logged:\n%s", out)
	}
}
