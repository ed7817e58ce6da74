package providertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// errorsTB records the errors a check reports instead of failing.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func TestCheckJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "golden.json")
	if err := os.WriteFile(path, []byte(`{"b": [1, "x"], "a": {"c": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  any
		want string // a part of the reported difference; "" for none
	}{
		{"value", map[string]any{"a": map[string]any{"c": true}, "b": []any{1, "x"}}, ""},
		{"encoded", json.RawMessage(`{"a":{"c":true},"b":[1,"x"]}`), ""},
		{"different", json.RawMessage(`{"a":{"c":false},"b":[1,"x"]}`), "differs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &errorsTB{TB: t}
			CheckJSON(tb, path, c.got)
			if c.want == "" && len(tb.errs) > 0 || c.want != "" && (len(tb.errs) != 1 || !strings.Contains(tb.errs[0], c.want)) {
				t.Errorf("reported %q, want an error containing %q", tb.errs, c.want)
			}
		})
	}
}

func TestCheckJSONUpdate(t *testing.T) {
	defer func(old bool) { *update = old }(*update)
	*update = true
	path := filepath.Join(t.TempDir(), "golden.json")
	CheckJSON(t, path, json.RawMessage(`{"b":1,"a":[true]}`))
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": [\n    true\n  ],\n  \"b\": 1\n}\n"; string(got) != want {
		t.Errorf("-update wrote %q, want %q", got, want)
	}
}
