// Package schemafail turns a JSON Schema validation error of
// github.com/santhosh-tekuri/jsonschema/v6 into a flat, ordered list of
// failures, one per failing keyword, shared by the packages that
// validate protocol documents against their schemas (internal/uaicpschema for
// UAICP, envelope for UAMP).
package schemafail

import (
	"cmp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Failure is one reason a document does not match its schema.
type Failure struct {
	// Path is the JSON Pointer of the failing value in the document, ""
	// for the document itself.
	Path string
	// Keyword is the JSON Pointer of the failing keyword in the schema,
	// such as "/required" or "/properties/id/format".
	Keyword string
	// Message is the validator's explanation.
	Message string
}

// Failures flattens the validator's error tree into its leaves, sorted
// by path, keyword and message (the validator visits members in map
// order, so its own order varies from run to run), without repeats.
func Failures(ve *jsonschema.ValidationError) []Failure {
	var out []Failure
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
		if u.Error == nil {
			return
		}
		if _, group := u.Error.Kind.(*kind.Schema); group {
			return
		}
		out = append(out, Failure{Path: u.InstanceLocation, Keyword: u.KeywordLocation, Message: u.Error.String()})
	}
	walk(ve.DetailedOutput())
	if len(out) == 0 {
		out = append(out, Failure{Message: strings.TrimSpace(ve.Error())})
	}
	slices.SortFunc(out, func(a, b Failure) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Keyword, b.Keyword), strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(out)
}

// Describe is the text of a schema mismatch: "does not match SCHEMA:
// PATH: MESSAGE; …", the document itself named "(root)".
func Describe(schema string, fs []Failure) string {
	var b strings.Builder
	b.WriteString("does not match " + schema)
	for i, f := range fs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		at := f.Path
		if at == "" {
			at = "(root)"
		}
		b.WriteString(at + ": " + f.Message)
	}
	return b.String()
}
