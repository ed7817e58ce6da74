// Package schemas compiles JSON Schemas under the module's one set of
// rules, for every package that validates against one (UAICP and UAMP
// documents, workflow files, task arguments, tool arguments, plans):
// draft 2020-12 unless a schema names another, formats asserted, and
// no reference ever loaded from a file or the network — a schema that
// refers to another must have it added to the same compiler.
package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// NewCompiler returns a compiler with the module's rules and formats
// registered.
func NewCompiler(formats ...*jsonschema.Format) *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for _, f := range formats {
		c.RegisterFormat(f)
	}
	c.UseLoader(noLoader{})
	return c
}

// noLoader refuses every reference the compiler was not given.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema %s is not loaded: references are never fetched from files or the network", url)
}

// Compile compiles the schema v — Go values that encode to a JSON
// Schema (a decoded document, llm.Schema, workflow.Schema) — on its
// own, under url.
func Compile(url string, v any) (*jsonschema.Schema, error) {
	doc, err := Value(v)
	if err != nil {
		return nil, err
	}
	c := NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// Embedded compiles one of the module's own schema documents with c,
// under its $id (or name when it has none), panicking on a fault: an
// embedded schema that does not compile is a bug of the build.
func Embedded(c *jsonschema.Compiler, name string, doc []byte) *jsonschema.Schema {
	v, err := Parse(doc)
	if err != nil {
		panic("embedded schema " + name + ": " + err.Error())
	}
	id, _ := v.(map[string]any)["$id"].(string)
	if id == "" {
		id = name
	}
	if err := c.AddResource(id, v); err != nil {
		panic("embedded schema " + name + ": " + err.Error())
	}
	return c.MustCompile(id)
}

// Value converts v to the form the validator works on (numbers as
// json.Number, objects as map[string]any…) through its JSON encoding.
func Value(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse reads JSON text into the form the validator works on.
func Parse(b []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}
