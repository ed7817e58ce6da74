package execution_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
)

// TestPlanSchemaLoadsNoFiles: a plan schema resolves only what it holds;
// a $ref to a local file is refused, never read.
func TestPlanSchemaLoadsNoFiles(t *testing.T) {
	local := filepath.Join(t.TempDir(), "steps.json")
	if err := os.WriteFile(local, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := execution.Plan(&execution.PlanOptions{PlanSchema: llm.Schema{"$ref": "file://" + filepath.ToSlash(local)}})
	if err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Errorf("Plan with a file $ref = %v, want a refusal", err)
	}
}
