package schemas

import (
	"strings"
	"testing"
)

func TestCompile(t *testing.T) {
	s, err := Compile("t.json", map[string]any{"type": "object", "properties": map[string]any{
		"when": map[string]any{"type": "string", "format": "date-time"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{`{"when":"2026-11-28T10:00:00Z"}`, true},
		{`{"when":"yesterday"}`, false}, // formats are asserted
		{`[]`, false},
	} {
		v, err := Parse([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Validate(v) == nil; got != tc.want {
			t.Errorf("%s valid: %v, want %v", tc.doc, got, tc.want)
		}
	}
}

// A reference the compiler was not given is never fetched.
func TestCompileRefusesRemoteReferences(t *testing.T) {
	for _, ref := range []string{"https://example.com/s.json", "file:///etc/passwd"} {
		_, err := Compile("t.json", map[string]any{"$ref": ref})
		if err == nil || !strings.Contains(err.Error(), "never fetched") {
			t.Errorf("$ref %s: %v", ref, err)
		}
	}
}
