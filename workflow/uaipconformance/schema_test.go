package uaipconformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func schemaOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGenArgs(t *testing.T) {
	for _, tc := range []struct {
		name, schema, want, err string
	}{
		{"no parameters", `{}`, ``, "no type"},
		{"empty object", `{"type":"object","properties":{}}`, `{}`, ""},
		{"optional only", `{"type":"object","properties":{"q":{"type":"string"}}}`, `{}`, ""},
		{"required types", `{"type":"object","required":["s","i","n","b","a","o"],"properties":{
			"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},
			"a":{"type":"array"},"o":{"type":"object","required":["x"],"properties":{"x":{"type":"integer"}}}}}`,
			`{"a":[],"b":true,"i":1,"n":1,"o":{"x":1},"s":"conformance"}`, ""},
		{"enum first", `{"type":"object","required":["m"],"properties":{"m":{"type":"string","enum":["card","invoice"]}}}`, `{"m":"card"}`, ""},
		{"minimum", `{"type":"object","required":["q"],"properties":{"q":{"type":"integer","minimum":5,"maximum":100}}}`, `{"q":5}`, ""},
		{"exclusive minimum", `{"type":"object","required":["q"],"properties":{"q":{"type":"integer","exclusiveMinimum":5}}}`, `{"q":6}`, ""},
		{"maximum below one", `{"type":"object","required":["q"],"properties":{"q":{"type":"integer","maximum":0}}}`, `{"q":0}`, ""},
		{"empty range", `{"type":"object","required":["q"],"properties":{"q":{"type":"integer","minimum":3,"maximum":2}}}`, ``, "range"},
		{"minLength", `{"type":"object","required":["s"],"properties":{"s":{"type":"string","minLength":15}}}`, `{"s":"conformancexxxx"}`, ""},
		{"maxLength", `{"type":"object","required":["s"],"properties":{"s":{"type":"string","maxLength":3}}}`, `{"s":"con"}`, ""},
		{"email", `{"type":"object","required":["e"],"properties":{"e":{"type":"string","format":"email"}}}`, `{"e":"conformance@example.com"}`, ""},
		{"default", `{"type":"object","required":["d"],"properties":{"d":{"type":"string","pattern":"^x$","default":"x"}}}`, `{"d":"x"}`, ""},
		{"nullable type", `{"type":"object","required":["n"],"properties":{"n":{"type":["null","integer"]}}}`, `{"n":1}`, ""},
		{"minItems", `{"type":"object","required":["a"],"properties":{"a":{"type":"array","minItems":2,"items":{"type":"string","enum":["x"]}}}}`, `{"a":["x","x"]}`, ""},
		{"pattern", `{"type":"object","required":["id"],"properties":{"id":{"type":"string","pattern":"^SKU-[0-9]{3}$"}}}`, ``, `/id: "pattern"`},
		{"unknown format", `{"type":"object","required":["x"],"properties":{"x":{"type":"string","format":"ipv6"}}}`, ``, "format"},
		{"ref", `{"type":"object","required":["x"],"properties":{"x":{"$ref":"#/$defs/x"}}}`, ``, "$ref"},
		{"required but closed", `{"type":"object","required":["x"],"additionalProperties":false}`, ``, "not allowed"},
		{"required unconstrained", `{"type":"object","required":["x"]}`, `{"x":"conformance"}`, ""},
		{"not an object", `{"type":"string"}`, ``, "not an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := genArgs(schemaOf(t, tc.schema))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q (args %v)", err, tc.err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			if diff := cmp.Diff(tc.want, string(b)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenArgsNilParameters(t *testing.T) {
	got, err := genArgs(nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("%v, %v", got, err)
	}
}

func TestParseSchemaProblems(t *testing.T) {
	m := schemaOf(t, `{"name":"w","initial_stage":"a","stages":{
		"a":{"name":"a","tasks":{"t":{"name":"u","parameters":{}}},"transitions":["b","zz"]},
		"b":{"name":"x","tasks":{}}}}`)
	s, problems := parseSchema(m, "w")
	want := []string{
		`stages.a.tasks.t.name is "u", not "t"`,
		`stages.a.tasks.t.description is not a string`,
		`stages.b.name is "x", not "b"`,
		`stages.b has no transitions list`,
		`stages.a.transitions names unknown stage "zz"`,
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || p == w
		}
		if !found {
			t.Errorf("missing problem %q in %q", w, problems)
		}
	}
	if s == nil || s.initial != "a" {
		t.Fatalf("schema %+v", s)
	}
	// The spec's Workflow type keeps transitions at the top level.
	m = schemaOf(t, `{"name":"w","initial_stage":"a","transitions":{"a":["b"],"b":[]},"stages":{
		"a":{"name":"a","tasks":{}},"b":{"name":"b","tasks":{}}}}`)
	s, problems = parseSchema(m, "w")
	if len(problems) != 0 || s.stages["a"].transitions[0] != "b" {
		t.Errorf("top-level transitions: %q, %+v", problems, s.stages["a"])
	}
}
