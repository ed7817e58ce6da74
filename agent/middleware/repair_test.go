package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/middleware"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var (
	addSchema  = llm.MustSchema(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)
	mailSchema = llm.MustSchema(`{"type":"object","properties":{"to":{"type":"string","format":"email"}},"required":["to"]}`)
)

// countingTools returns add and mail, which count their runs in ran.
func countingTools(ran *atomic.Int64) []llm.Tool {
	return []llm.Tool{
		{Name: "add", Parameters: addSchema, Run: func(_ context.Context, a map[string]any) (any, error) {
			ran.Add(1)
			x, _ := a["a"].(int)
			y, _ := a["b"].(int)
			return x + y, nil
		}},
		{Name: "mail", Parameters: mailSchema, Run: func(context.Context, map[string]any) (any, error) {
			ran.Add(1)
			return "sent", nil
		}},
	}
}

// calls is a scripted step with the given calls.
func calls(cs ...llm.ToolCall) scripted.Step { return scripted.Step{ToolCalls: cs} }

func argumentsError(tool, reason string, schema llm.Schema) *llm.ArgumentsError {
	return &llm.ArgumentsError{Tool: tool, Reason: reason, Schema: schema}
}

func TestToolArgumentRepair(t *testing.T) {
	valid := call("", "add", map[string]any{"a": 1, "b": 2})
	invalid := call("", "add", map[string]any{"a": "1"})
	const invalidReason = "at the top level: missing property 'b'; at '/a': got string, want integer"
	badMail := call("", "mail", map[string]any{"to": "nobody"})
	malformed := llm.ToolCall{ToolName: "add", RawArguments: "{not json"}
	done := textStep("done", 1, 1)

	tests := []struct {
		name     string
		opts     middleware.ToolArgumentRepairOptions
		script   []scripted.Step
		want     *middleware.RepairExhaustedError // without State; nil: the run completes
		wantRan  int64
		wantStep int
	}{
		{
			name:     "valid arguments run the tool",
			script:   []scripted.Step{calls(valid), done},
			wantRan:  1,
			wantStep: 2,
		},
		{
			name:     "invalid arguments, then a valid retry",
			script:   []scripted.Step{calls(invalid), calls(valid), done},
			wantRan:  1,
			wantStep: 3,
		},
		{
			name:     "retries exhausted (default 2)",
			script:   []scripted.Step{calls(invalid), calls(invalid), calls(invalid)},
			want:     &middleware.RepairExhaustedError{Tool: "add", Attempts: 3, Last: argumentsError("add", invalidReason, addSchema)},
			wantStep: 3,
		},
		{
			name:     "one retry",
			opts:     middleware.ToolArgumentRepairOptions{MaxRetries: 1},
			script:   []scripted.Step{calls(invalid), calls(invalid)},
			want:     &middleware.RepairExhaustedError{Tool: "add", Attempts: 2, Last: argumentsError("add", invalidReason, addSchema)},
			wantStep: 2,
		},
		{
			name:     "no retries",
			opts:     middleware.ToolArgumentRepairOptions{MaxRetries: -1},
			script:   []scripted.Step{calls(invalid)},
			want:     &middleware.RepairExhaustedError{Tool: "add", Attempts: 1, Last: argumentsError("add", invalidReason, addSchema)},
			wantStep: 1,
		},
		{
			name:     "no limit",
			opts:     middleware.ToolArgumentRepairOptions{MaxRetries: llm.Infinity},
			script:   []scripted.Step{calls(invalid), calls(invalid), calls(invalid), calls(invalid), done},
			wantStep: 5,
		},
		{
			name:     "a valid call resets the count",
			script:   []scripted.Step{calls(invalid), calls(invalid), calls(valid), calls(invalid), calls(invalid), done},
			wantRan:  1,
			wantStep: 6,
		},
		{
			name:     "counts are per tool, other tools do not reset them",
			script:   []scripted.Step{calls(invalid), calls(badMail), calls(invalid), calls(badMail), calls(invalid)},
			want:     &middleware.RepairExhaustedError{Tool: "add", Attempts: 3, Last: argumentsError("add", invalidReason, addSchema)},
			wantStep: 5,
		},
		{
			name:     "formats are asserted",
			opts:     middleware.ToolArgumentRepairOptions{MaxRetries: -1},
			script:   []scripted.Step{calls(badMail)},
			want:     &middleware.RepairExhaustedError{Tool: "mail", Attempts: 1, Last: argumentsError("mail", "at '/to': 'nobody' is not valid email: missing @", mailSchema)},
			wantStep: 1,
		},
		{
			name:   "malformed arguments count",
			script: []scripted.Step{calls(malformed), calls(malformed), calls(malformed)},
			want: &middleware.RepairExhaustedError{Tool: "add", Attempts: 3,
				Last: argumentsError("add", "expected a JSON object, got {not json", addSchema)},
			wantStep: 3,
		},
		{
			name:     "a step with a valid and an invalid call of a tool is a failure",
			opts:     middleware.ToolArgumentRepairOptions{MaxRetries: -1},
			script:   []scripted.Step{calls(valid, invalid, valid)},
			want:     &middleware.RepairExhaustedError{Tool: "add", Attempts: 1, Last: argumentsError("add", invalidReason, addSchema)},
			wantRan:  2,
			wantStep: 1,
		},
		{
			name:     "the first failure in call order is reported",
			opts:     middleware.ToolArgumentRepairOptions{MaxRetries: -1},
			script:   []scripted.Step{calls(invalid, call("", "add", map[string]any{"a": 1}), invalid)},
			want:     &middleware.RepairExhaustedError{Tool: "add", Attempts: 1, Last: argumentsError("add", invalidReason, addSchema)},
			wantStep: 1,
		},
		{
			name:     "the first tool in call order is reported",
			opts:     middleware.ToolArgumentRepairOptions{MaxRetries: -1},
			script:   []scripted.Step{calls(badMail, invalid)},
			want:     &middleware.RepairExhaustedError{Tool: "mail", Attempts: 1, Last: argumentsError("mail", "at '/to': 'nobody' is not valid email: missing @", mailSchema)},
			wantStep: 1,
		},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				var ran atomic.Int64
				m := scripted.NewT(t, tt.script...)
				a := newAgent(t, m.Ref(), countingTools(&ran), middleware.ToolArgumentRepair(&tt.opts))
				res, err := run(t, a, stream)
				var state *agent.State
				if tt.want == nil {
					if err != nil {
						t.Fatalf("run failed: %v", err)
					}
					state = res.State
				} else {
					var re *middleware.RepairExhaustedError
					if !errors.As(err, &re) {
						t.Fatalf("err = %v, want *RepairExhaustedError", err)
					}
					if diff := cmp.Diff(tt.want, re, cmpopts.IgnoreFields(middleware.RepairExhaustedError{}, "State")); diff != "" {
						t.Errorf("error (-want +got):\n%s", diff)
					}
					if ae := (*llm.ArgumentsError)(nil); !errors.As(err, &ae) || ae != re.Last {
						t.Errorf("errors.As does not reach the last ArgumentsError")
					}
					state = re.State
				}
				if got := ran.Load(); got != tt.wantRan {
					t.Errorf("the tools ran %d times, want %d", got, tt.wantRan)
				}
				if state.Step() != tt.wantStep {
					t.Errorf("state step = %d, want %d", state.Step(), tt.wantStep)
				}
				if err := checkConversation(state.Messages()); err != nil {
					t.Errorf("state: %v", err)
				}
			})
		}
	}
}

// The model receives the validation failures and the schema as the tool
// result, and the tool execution records the ArgumentsError.
func TestToolArgumentRepairResult(t *testing.T) {
	var ran atomic.Int64
	m := scripted.NewT(t, calls(call("c1", "add", map[string]any{"a": "1", "c": true})), textStep("done", 1, 1))
	a := newAgent(t, m.Ref(), countingTools(&ran), middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{}))
	res, err := a.Generate(t.Context(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := json.Marshal(addSchema)
	want := "Invalid arguments for tool 'add': at the top level: additional properties 'c' not allowed; " +
		"at the top level: missing property 'b'; at '/a': got string, want integer. " +
		"Call the tool again with arguments matching this JSON Schema: " + string(schema)
	x := res.Turn.ToolExecutions[0]
	if x.Result != want || !x.IsError {
		t.Errorf("tool result = %v (error %v), want %q", x.Result, x.IsError, want)
	}
	var ae *llm.ArgumentsError
	if !errors.As(x.Err, &ae) || ae.Tool != "add" {
		t.Errorf("execution error = %v, want an ArgumentsError", x.Err)
	}
	sent := m.Requests()[1].Messages
	if got := sent[len(sent)-1].Text(); got != want {
		t.Errorf("the model received %q, want %q", got, want)
	}
}

// A schema that does not compile is logged when the agent is created and
// its tool runs unvalidated; a tool without a schema is left alone.
func TestToolArgumentRepairUncompilableSchema(t *testing.T) {
	rec := &recorder{}
	var ran atomic.Int64
	count := func(context.Context, map[string]any) (any, error) { ran.Add(1); return "ok", nil }
	tools := []llm.Tool{
		{Name: "invalid", Parameters: llm.MustSchema(`{"type":"objekt"}`), Run: count},
		{Name: "remote", Parameters: llm.MustSchema(`{"$ref":"file:///etc/passwd"}`), Run: count},
		{Name: "free", Run: count},
	}
	m := scripted.NewT(t,
		calls(call("", "invalid", map[string]any{"x": 1}), call("", "remote", map[string]any{"x": 1}), call("", "free", map[string]any{"x": 1})),
		textStep("done", 1, 1))
	a := newAgent(t, m.Ref(), tools, middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{Logger: slog.New(rec)}))
	recs := rec.records()
	if len(recs) != 2 {
		t.Fatalf("got %d records, want 2: %v", len(recs), recs)
	}
	for i, tool := range []string{"invalid", "remote"} {
		r := recs[i]
		if r.Level != slog.LevelError || r.Attrs["tool"] != tool || !strings.Contains(r.Msg, "does not compile") {
			t.Errorf("record %d = %v, want an error naming %s", i, r, tool)
		}
	}
	if !strings.Contains(fmt.Sprint(recs[1].Attrs["error"]), "not loaded") {
		t.Errorf("the remote schema's record does not say it was not loaded: %v", recs[1])
	}
	if _, err := a.Generate(t.Context(), llm.Text("go"), nil); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 3 {
		t.Errorf("the tools ran %d times, want 3", ran.Load())
	}
}

// Calls of one round are validated concurrently (run with -race).
func TestToolArgumentRepairConcurrentCalls(t *testing.T) {
	var ran atomic.Int64
	var round []llm.ToolCall
	for i := range 8 {
		args := map[string]any{"a": i, "b": i}
		if i%2 == 1 {
			args = map[string]any{"a": "x"}
		}
		round = append(round, call(fmt.Sprintf("c%d", i), "add", args))
	}
	m := scripted.NewT(t, calls(round...), textStep("done", 1, 1))
	a := newAgent(t, m.Ref(), countingTools(&ran), middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{}))
	res, err := a.Generate(t.Context(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, x := range res.Turn.ToolExecutions {
		if x.IsError {
			failed++
		}
	}
	if ran.Load() != 4 || failed != 4 {
		t.Errorf("ran %d, failed %d; want 4 and 4", ran.Load(), failed)
	}
}

// A tool's approval handler is asked only about valid arguments; an
// invalid call goes through to fail validation. A denied call neither
// counts as a failure nor resets the count.
func TestToolArgumentRepairApproval(t *testing.T) {
	var ran atomic.Int64
	tools := countingTools(&ran)
	var asked []any
	tools[0].Approval = func(_ context.Context, args map[string]any) (bool, error) {
		asked = append(asked, args["a"]) // one call per round: no race
		return args["a"] != 2, nil
	}
	invalid := calls(call("", "add", map[string]any{"a": "1"}))
	denied := calls(call("", "add", map[string]any{"a": 2, "b": 2}))
	approved := calls(call("", "add", map[string]any{"a": 1, "b": 2}))

	m := scripted.NewT(t, invalid, denied, invalid)
	a := newAgent(t, m.Ref(), tools, middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{MaxRetries: 1}))
	_, err := a.Generate(t.Context(), llm.Text("go"), nil)
	var re *middleware.RepairExhaustedError
	if !errors.As(err, &re) || re.Attempts != 2 || re.State.Step() != 3 {
		t.Fatalf("err = %v, want 2 attempts exhausted at step 3", err)
	}
	if diff := cmp.Diff([]any{2}, asked); diff != "" {
		t.Errorf("approval asked about (-want +got):\n%s", diff)
	}

	asked = nil
	m = scripted.NewT(t, approved, textStep("done", 1, 1))
	a = newAgent(t, m.Ref(), tools, middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{}))
	if _, err := a.Generate(t.Context(), llm.Text("go"), nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{1}, asked); diff != "" {
		t.Errorf("approval asked about (-want +got):\n%s", diff)
	}
	if ran.Load() != 1 {
		t.Errorf("ran %d times, want 1", ran.Load())
	}
}

// Failures are listed at most ten, each at most 300 bytes: a long
// argument is not echoed whole.
func TestToolArgumentRepairLongReason(t *testing.T) {
	props := map[string]any{}
	args := map[string]any{}
	for i := range 12 {
		k := fmt.Sprintf("p%02d", i)
		props[k] = map[string]any{"type": "string", "pattern": "^[a-z]+$"}
		args[k] = strings.Repeat("Ä", 400)
	}
	tool := llm.Tool{Name: "t", Parameters: llm.Schema{"type": "object", "properties": props},
		Run: func(context.Context, map[string]any) (any, error) { return "ran", nil }}
	m := scripted.NewT(t, calls(call("", "t", args)), textStep("done", 1, 1))
	a := newAgent(t, m.Ref(), []llm.Tool{tool}, middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{}))
	res, err := a.Generate(t.Context(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ae *llm.ArgumentsError
	if !errors.As(res.Turn.ToolExecutions[0].Err, &ae) {
		t.Fatalf("execution error = %v, want an ArgumentsError", res.Turn.ToolExecutions[0].Err)
	}
	parts := strings.Split(ae.Reason, "; ")
	if len(parts) != 11 || parts[10] != "and 2 more" {
		t.Fatalf("reason lists %d parts, last %q; want 10 failures and \"and 2 more\"", len(parts), parts[len(parts)-1])
	}
	for _, p := range parts[:10] {
		if !strings.HasPrefix(p, "at '/p0") && !strings.HasPrefix(p, "at '/p1") || len(p) > 330 || !strings.HasSuffix(p, "…") {
			t.Errorf("failure %q: want a located, truncated message", p)
		}
	}
}

func TestRepairExhaustedErrorText(t *testing.T) {
	err := &middleware.RepairExhaustedError{Tool: "add", Attempts: 3, Last: argumentsError("add", "at '/a': got string, want integer", addSchema)}
	want := `middleware: tool "add" received invalid arguments 3 times in a row: at '/a': got string, want integer`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&middleware.RepairExhaustedError{Tool: "add", Attempts: 1}).Unwrap(); got != nil {
		t.Errorf("Unwrap() without Last = %v, want nil", got)
	}
}
