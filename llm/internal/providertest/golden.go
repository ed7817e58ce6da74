// Package providertest holds the test helpers the LLM provider packages
// (llm/anthropic, llm/openai, llm/gemini, llm/ollama) share. Only their
// tests import it: it registers the -update flag that rewrites golden
// files.
package providertest

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// CheckJSON compares got, as JSON, with the golden file at path, ignoring
// layout and key order; under -update it rewrites the file instead,
// indented. A JSON text already encoded goes in as a json.RawMessage.
func CheckJSON(t testing.TB, path string, got any) {
	t.Helper()
	data, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: the value checked is not JSON: %v", path, err)
	}
	var gotV any
	if err := json.Unmarshal(data, &gotV); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if *update {
		pretty, err := json.MarshalIndent(gotV, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(pretty, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	wantData, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	var want any
	if err := json.Unmarshal(wantData, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if diff := cmp.Diff(want, gotV); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
