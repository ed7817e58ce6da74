package schemafail

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestFailuresAndDescribe(t *testing.T) {
	c := jsonschema.NewCompiler()
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"object","required":["a"],"properties":{"b":{"type":"string"}}}`))
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"b":1}`))
	ve, ok := sch.Validate(inst).(*jsonschema.ValidationError)
	if !ok {
		t.Fatal("no validation error")
	}
	fs := Failures(ve)
	if len(fs) != 2 || fs[0].Path != "" || fs[1].Path != "/b" {
		t.Fatalf("failures %+v, want the root (required) then /b (type), sorted", fs)
	}
	got := Describe("s.json", fs)
	if !strings.HasPrefix(got, "does not match s.json: (root): ") || !strings.Contains(got, "; /b: ") {
		t.Errorf("Describe = %q", got)
	}
	if Describe("s.json", nil) != "does not match s.json" {
		t.Errorf("Describe without failures = %q", Describe("s.json", nil))
	}
}
