package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// sameJSONValue compares decoded JSON values exactly: float64 by their
// bits (so -0 differs from 0), maps and slices element by element, nil
// and empty apart.
func sameJSONValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameJSONValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSONValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// checkDecodeObject fails when decodeObject departs from encoding/json.
func checkDecodeObject(t *testing.T, data []byte) {
	t.Helper()
	var want map[string]any
	werr := json.Unmarshal(data, &want)
	got, ok := llm.DecodeObject(data)
	if ok != (werr == nil) {
		t.Fatalf("%q: ok = %v, encoding/json error %v", data, ok, werr)
	}
	if ok && !sameJSONValue(map[string]any(want), got) {
		t.Fatalf("%q: decoded %#v, encoding/json %#v", data, got, want)
	}
}

var decodeObjectCases = []string{
	`{"city":"Oslo","days":2}`,
	` {"a" : [1, -0, 2.5e3, 1E-2, true, false, null, {}, [], {"b":"c"}] } `,
	`{"a":1,"a":2}`,
	`null`, ` null `, `{}`, `{ }`,
	`{"s":"tab\tnew\nq\"b\\s\/u\u00e9\u20ac"}`,
	`{"pair":"\ud83d\ude00","lone":"\ud83d","lonelow":"\ude00x","hi-hi":"\ud83d\ud83d","bad":"\ud83d\u0041"}`,
	"{\"inv\":\"a\xffb\xed\xa0\x80c\"}",
	"{\"utf8\":\"åäö€😀\"}",
	`{"n":-0.0}`, `{"n":1e400}`, `{"n":1e-400}`, `{"n":123456789012345678901234567890}`,
	// Not decoded by encoding/json:
	``, ` `, `[]`, `"s"`, `1`, `true`, `{"a":1}x`, `{"a":1,}`, `{"a"}`, `{a:1}`, `{"a":01}`,
	`{"a":1.}`, `{"a":.5}`, `{"a":+1}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":truex}`,
	"{\"a\":\"ctl\x01\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"unterminated}`,
	`{"a":[1,]}`, `{"a":[1 2]}`, `{"a" 1}`, `{"a":1 "b":2}`, "\ufeff{}", `{"a":NaN}`,
	`{"a":0x10}`, `{"a":1_000}`, `{"a":Infinity}`,
}

func TestDecodeObjectMatchesEncodingJSON(t *testing.T) {
	for _, c := range decodeObjectCases {
		checkDecodeObject(t, []byte(c))
	}
	deep := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	checkDecodeObject(t, deep(10000)) // encoding/json's limit
	checkDecodeObject(t, deep(10001))
}

func FuzzDecodeObject(f *testing.F) {
	for _, c := range decodeObjectCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeObject(t, data) })
}

func TestNewToolCall(t *testing.T) {
	for _, tc := range []struct {
		text string
		want llm.ToolCall
	}{
		{`{"city":"Oslo"}`, llm.ToolCall{ToolCallID: "c", ToolName: "t", Arguments: map[string]any{"city": "Oslo"}, ArgumentsJSON: json.RawMessage(`{"city":"Oslo"}`)}},
		{"", llm.ToolCall{ToolCallID: "c", ToolName: "t", Arguments: map[string]any{}}},
		{" \n", llm.ToolCall{ToolCallID: "c", ToolName: "t", Arguments: map[string]any{}}},
		{"null", llm.ToolCall{ToolCallID: "c", ToolName: "t", RawArguments: "null"}},
		{`[1]`, llm.ToolCall{ToolCallID: "c", ToolName: "t", RawArguments: "[1]"}},
		{`{"a":`, llm.ToolCall{ToolCallID: "c", ToolName: "t", RawArguments: `{"a":`}},
	} {
		got := llm.NewToolCall("c", "t", []byte(tc.text))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("NewToolCall(%q) (-want +got):\n%s", tc.text, diff)
		}
	}
}

// TestNewToolDecodesArgumentsJSON pins what a typed tool receives from a
// call carrying the model's text: the text decoded once (integers beyond
// 2^53 exact), the map's JSON round trip when a hook replaced the
// arguments or the text does not fit the type (2.0 for an integer, as
// before), and the same error result as before when neither decodes.
func TestNewToolDecodesArgumentsJSON(t *testing.T) {
	type in struct {
		N    int64  `json:"n"`
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		name    string
		text    string
		replace map[string]any // OnBeforeCall's arguments
		want    string
		isError bool
	}{
		{name: "text", text: `{"n":9007199254740993,"name":"x"}`, want: "9007199254740993 x"},
		{name: "float for an integer", text: `{"n":2.0,"name":"x"}`, want: "2 x"},
		{name: "replaced by a hook", text: `{"n":1,"name":"x"}`, replace: map[string]any{"n": 7.0, "name": "y"}, want: "7 y"},
		{name: "wrong type", text: `{"n":"one"}`, want: "invalid arguments for t: json: cannot unmarshal string into Go struct field in.n of type int64", isError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := llm.NewTool("t", "", nil, func(_ context.Context, a in) (any, error) {
				return fmt.Sprintf("%d %s", a.N, a.Name), nil
			})
			call := llm.NewToolCall("c1", "t", []byte(tc.text))
			model := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{call}}, scripted.Step{Text: "done"})
			opts := &llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{tool}}
			if tc.replace != nil {
				opts.ToolStrategy = &llm.ToolUseStrategy{OnBeforeCall: func(context.Context, *llm.Tool, map[string]any) llm.BeforeCall {
					return llm.BeforeCall{Proceed: true, Arguments: tc.replace}
				}}
			}
			inst, err := llm.LLM(opts)
			if err != nil {
				t.Fatal(err)
			}
			turn, err := inst.Generate(context.Background(), nil, llm.Text("go"))
			if err != nil {
				t.Fatal(err)
			}
			x := turn.ToolExecutions[0]
			if x.Result != tc.want || x.IsError != tc.isError {
				t.Errorf("result %q (isError %v), want %q (%v)", x.Result, x.IsError, tc.want, tc.isError)
			}
		})
	}
}
