package strictjson_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/google/go-cmp/cmp"
)

type request struct {
	WorkflowName string         `json:"workflow_name"`
	Action       string         `json:"action"`
	Args         map[string]any `json:"args,omitempty"`
	Count        int8           `json:"count"`
	Size         uint16         `json:"size"`
	Ratio        float32        `json:"ratio"`
	Wait         bool           `json:"wait"`
	Items        []item         `json:"items"`
	Pair         [2]string      `json:"pair"`
	Next         *request       `json:"next"`
	Raw          json.RawMessage
	Ignored      string `json:"-"`
	unexported   string
}

type item struct {
	ID  string  `json:"id"`
	Qty float64 `json:"qty"`
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, in string
		opts     *strictjson.Options
		reason   error
		text     string
	}{
		{"empty", ``, nil, strictjson.ErrSyntax, "no JSON value"},
		{"blank", " \n", nil, strictjson.ErrSyntax, "no JSON value"},
		{"trailing brace and x", `{"workflow_name":"store"}}x`, nil, strictjson.ErrTrailingData, "unexpected data after the JSON value at byte 25"},
		{"trailing object", `{"workflow_name":"store"}{}`, nil, strictjson.ErrTrailingData, "unexpected data after the JSON value at byte 25"},
		{"trailing NUL", "{}\n\x00", nil, strictjson.ErrTrailingData, "unexpected data after the JSON value at byte 3"},
		{"invalid UTF-8 in a string", "{\"action\":\"a\xffb\"}", nil, strictjson.ErrInvalidUTF8, "action: invalid UTF-8 (byte 0xff) at byte 12"},
		{"overlong UTF-8", "{\"action\":\"\xc0\xaf\"}", nil, strictjson.ErrInvalidUTF8, "action: invalid UTF-8 (byte 0xc0) at byte 11"},
		{"UTF-16 surrogate in UTF-8", "{\"action\":\"\xed\xa0\x80\"}", nil, strictjson.ErrInvalidUTF8, "action: invalid UTF-8 (byte 0xed) at byte 11"},
		{"invalid UTF-8 in a member name", "{\"\xff\":1}", nil, strictjson.ErrInvalidUTF8, "member name: invalid UTF-8 (byte 0xff) at byte 2"},
		{"invalid UTF-8 outside strings", "{\xff}", nil, strictjson.ErrSyntax, "invalid character byte 0xff at byte 1, expecting a member name"},
		{"lone high surrogate", `{"args":{"note":"\ud800"}}`, nil, strictjson.ErrLoneSurrogate, `args.note: \ud800 at byte 17 is half a surrogate pair without its other half (not a character)`},
		{"reversed pair", `{"action":"\udc00\ud800"}`, nil, strictjson.ErrLoneSurrogate, `action: \udc00 at byte 11 is half a surrogate pair without its other half (not a character)`},
		{"high then letter", `{"action":"\uD800\u0041"}`, nil, strictjson.ErrLoneSurrogate, `action: \ud800 at byte 11 is half a surrogate pair without its other half (not a character)`},
		{"high at the end", `{"action":"\ud800"}`, nil, strictjson.ErrLoneSurrogate, `action: \ud800 at byte 11 is half a surrogate pair without its other half (not a character)`},
		{"lone surrogate in a member name", `{"args":{"\udfff":1}}`, nil, strictjson.ErrLoneSurrogate, `args: member name: \udfff at byte 10 is half a surrogate pair without its other half (not a character)`},
		{"number out of range for any", `{"args":{"quantity":1e400}}`, nil, strictjson.ErrType, "args.quantity: number out of range"},
		{"number out of range for float32", `{"ratio":1e39}`, nil, strictjson.ErrType, "ratio: number out of range"},
		{"int8 out of range", `{"count":128}`, nil, strictjson.ErrType, "count: number out of range"},
		{"int with a fraction", `{"count":1.0}`, nil, strictjson.ErrType, "count: must be an integer (no fraction or exponent)"},
		{"int with an exponent", `{"count":1e2}`, nil, strictjson.ErrType, "count: must be an integer (no fraction or exponent)"},
		{"uint negative", `{"size":-1}`, nil, strictjson.ErrType, "size: must be a non-negative integer"},
		{"uint out of range", `{"size":65536}`, nil, strictjson.ErrType, "size: number out of range"},
		{"string for an object", `{"args":"x"}`, nil, strictjson.ErrType, "args: must be an object"},
		{"array for an object", `{"args":[1]}`, nil, strictjson.ErrType, "args: must be an object"},
		{"number for a string", `{"action":1}`, nil, strictjson.ErrType, "action: must be a string"},
		{"string for a bool", `{"wait":"yes"}`, nil, strictjson.ErrType, "wait: must be a boolean"},
		{"object for an array", `{"items":{}}`, nil, strictjson.ErrType, "items: must be an array"},
		{"deep path", `{"items":[{"id":"a"},{"id":"b","qty":"2"}]}`, nil, strictjson.ErrType, "items[1].qty: must be a number"},
		{"recursive type", `{"next":{"next":{"count":"x"}}}`, nil, strictjson.ErrType, "next.next.count: must be an integer"},
		{"quoted path element", `{"args":{"a.b":{"c d":1e999}}}`, nil, strictjson.ErrType, `args["a.b"]["c d"]: number out of range`},
		{"not an object", `["store"]`, nil, strictjson.ErrType, "the JSON value must be an object"},
		{"null is fine but a string is not", `"store"`, nil, strictjson.ErrType, "the JSON value must be an object"},
		{"member in another case", `{"Workflow_Name":"store"}`, nil, strictjson.ErrUnknownField, `unknown member "Workflow_Name" (member names are case-sensitive: "workflow_name")`},
		{"member in another case, escaped", `{"WORKFLOW\u005fNAME":"store"}`, nil, strictjson.ErrUnknownField, `unknown member "WORKFLOW_NAME" (member names are case-sensitive: "workflow_name")`},
		{"member in another case, deep", `{"items":[{"ID":"a"}]}`, nil, strictjson.ErrUnknownField, `items[0]: unknown member "ID" (member names are case-sensitive: "id")`},
		{"unknown member, closed", `{"workflow_name":"store","priority":1}`, &strictjson.Options{DisallowUnknownFields: true}, strictjson.ErrUnknownField, `unknown member "priority"`},
		{"ignored field is unknown, closed", `{"Ignored":"x"}`, &strictjson.Options{DisallowUnknownFields: true}, strictjson.ErrUnknownField, `unknown member "Ignored"`},
		{"duplicate member", `{"action":"a","action":"b"}`, &strictjson.Options{DisallowDuplicates: true}, strictjson.ErrDuplicate, `duplicate member "action"`},
		{"duplicate escaped member", `{"action":"a","\u0061ction":"b"}`, &strictjson.Options{DisallowDuplicates: true}, strictjson.ErrDuplicate, `duplicate member "action"`},
		{"duplicate deep in a map", `{"args":{"x":[{"a":1,"b":2,"a":3}]}}`, &strictjson.Options{DisallowDuplicates: true}, strictjson.ErrDuplicate, `args.x[0]: duplicate member "a"`},
		{"too deep", `{"args":{"a":[[[[1]]]]}}`, &strictjson.Options{MaxDepth: 5}, strictjson.ErrTooDeep, "args.a[0][0][0]: arrays and objects nested deeper than 5"},
		{"too large", `{"action":"` + strings.Repeat("a", 100) + `"}`, &strictjson.Options{MaxSize: 100}, strictjson.ErrTooLarge, "input is 113 bytes, more than 100"},
		{"truncated", `{"workflow_name":`, nil, strictjson.ErrSyntax, "workflow_name: unexpected end of JSON input, expecting a value"},
		{"unterminated string", `{"action":"abc`, nil, strictjson.ErrSyntax, "action: unexpected end of JSON input, in a string"},
		{"control character", "{\"action\":\"a\tb\"}", nil, strictjson.ErrSyntax, "action: control character 0x09 at byte 12 in a string (escape it)"},
		{"bad escape", `{"action":"\x"}`, nil, strictjson.ErrSyntax, `action: invalid character 'x' at byte 12, in a string escape`},
		{"bad \\u escape", `{"action":"\u12g4"}`, nil, strictjson.ErrSyntax, `action: invalid \u escape at byte 11`},
		{"leading zero", `{"count":01}`, nil, strictjson.ErrSyntax, "invalid character '1' at byte 10, expecting ',' or '}'"},
		{"BOM", "\ufeff{}", nil, strictjson.ErrSyntax, "invalid character '\\ufeff' at byte 0, expecting a value"},
		{"trailing comma", `{"action":"a",}`, nil, strictjson.ErrSyntax, "invalid character '}' at byte 14, expecting a member name"},
		{"single quotes", `{'action':1}`, nil, strictjson.ErrSyntax, `invalid character '\'' at byte 1, expecting a member name`},
		{"NaN", `{"ratio":NaN}`, nil, strictjson.ErrSyntax, "ratio: invalid character 'N' at byte 9, expecting a value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := request{Action: "untouched"}
			err := strictjson.Decode([]byte(tc.in), &v, tc.opts)
			var e *strictjson.Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%q) = %v, want an *Error", tc.in, err)
			}
			if !errors.Is(err, tc.reason) {
				t.Errorf("reason %v, want %v", e.Reason, tc.reason)
			}
			if diff := cmp.Diff(tc.text, err.Error()); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			if v.Action != "untouched" || v.WorkflowName != "" {
				t.Errorf("the target changed: %+v", v)
			}
		})
	}
}

func TestDecodeAcceptsAsEncodingJSON(t *testing.T) {
	tests := []string{
		`{"workflow_name":"store","action":"method_call","args":{"product_id":"SKU-005","quantity":1}}`,
		" \t\r\n{\"workflow_name\":\"store\"} \t\r\n",
		`{"args":{"n":[1e308,-0,0.5e-400,1E+2,{"deep":[true,false,null]}],"s":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t"}}`,
		`{"count":-128,"size":65535,"ratio":3.4e38,"wait":true,"items":[{"id":"a","qty":1.5}],"pair":["a","b","ignored"]}`,
		`{"next":{"next":{"count":1}},"Raw":{"any":"thing"}}`,
		`{"unknown":{"ignored":[1,2,{"x":"y"}]},"workflow_name":"w"}`,
		`{"action":null,"args":null,"items":null,"next":null}`,
		`{"action":"a","action":"b"}`, // duplicates allowed by default: the last wins
		`null`,
		"{\"action\":\"Grüße \u2028 🙂\"}",
	}
	for _, in := range tests {
		var want, got request
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("encoding/json refuses %s: %v", in, err)
		}
		if err := strictjson.Decode([]byte(in), &got, nil); err != nil {
			t.Errorf("Decode(%s) = %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(request{})); diff != "" {
			t.Errorf("Decode(%s) (-encoding/json +strictjson):\n%s", in, diff)
		}
	}
}

// Types the check does not model are left to encoding/json, whose
// refusal comes back without its Go text.
func TestDecodeOpaqueTypes(t *testing.T) {
	var v struct {
		At time.Time `json:"at"`
	}
	err := strictjson.Decode([]byte(`{"at":"yesterday"}`), &v, nil)
	if !errors.Is(err, strictjson.ErrType) {
		t.Fatalf("Decode = %v, want ErrType", err)
	}
	if diff := cmp.Diff("invalid value", err.Error()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	// Their contents still get the whole-text rules.
	err = strictjson.Decode([]byte(`{"at":"\ud800"}`), &v, nil)
	if !errors.Is(err, strictjson.ErrLoneSurrogate) {
		t.Errorf("Decode = %v, want ErrLoneSurrogate", err)
	}
	if err := strictjson.Decode([]byte(`{"at":"2025-07-10T10:00:00Z"}`), &v, nil); err != nil || v.At.IsZero() {
		t.Errorf("Decode = %v, %v", err, v.At)
	}
}

func TestCheck(t *testing.T) {
	for in, want := range map[string]error{
		`{"a":[1,"x",{"b":null}]}`: nil,
		`1e400`:                    strictjson.ErrType,
		`"\udc00"`:                 strictjson.ErrLoneSurrogate,
		"\"\xff\"":                 strictjson.ErrInvalidUTF8,
		`[] []`:                    strictjson.ErrTrailingData,
		`{"a":1,"a":2}`:            nil,
	} {
		if err := strictjson.Check([]byte(in), nil); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("Check(%s) = %v, want %v", in, err, want)
		}
	}
	if err := strictjson.Check([]byte(`{"a":1,"a":2}`), &strictjson.Options{DisallowDuplicates: true}); !errors.Is(err, strictjson.ErrDuplicate) {
		t.Errorf("Check with DisallowDuplicates = %v", err)
	}
}

// No message names a Go type, whatever the destination.
func TestMessagesNameNoGoType(t *testing.T) {
	type all struct {
		I   int
		I64 int64
		U   uint64
		F   float64
		F32 float32
		M   map[string]int
		S   []string
		B   bool
		P   *int
		A   any
	}
	for _, in := range []string{`{"I":"x"}`, `{"I64":1e99}`, `{"U":-1}`, `{"F":1e999}`, `{"F32":[]}`, `{"M":{"a":"b"}}`, `{"S":[1]}`, `{"B":0}`, `{"P":{}}`, `{"A":1e999}`, `[]`} {
		var v all
		err := strictjson.Decode([]byte(in), &v, nil)
		if err == nil {
			t.Errorf("Decode(%s) accepted", in)
			continue
		}
		if goTypeName.MatchString(err.Error()) {
			t.Errorf("Decode(%s) = %q: names a Go type", in, err)
		}
	}
}

// Options.Number sees every number literal as written, and its error
// refuses the input at that number.
func TestCheckNumberHook(t *testing.T) {
	var seen []string
	opts := &strictjson.Options{Number: func(lit []byte) error {
		seen = append(seen, string(lit))
		if string(lit) == "1e20" {
			return errors.New("number 1e20 is too big")
		}
		return nil
	}}
	if err := strictjson.Check([]byte(`{"a":[1,-2.5,3E2],"b":0}`), opts); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "-2.5", "3E2", "0"}; !slices.Equal(seen, want) {
		t.Errorf("literals %q, want %q", seen, want)
	}
	err := strictjson.Check([]byte(`{"a":{"b":1e20}}`), opts)
	var e *strictjson.Error
	if !errors.As(err, &e) || !errors.Is(err, strictjson.ErrType) || e.Path != "a.b" || e.Message != "number 1e20 is too big" {
		t.Errorf("refusal %#v", err)
	}
}
