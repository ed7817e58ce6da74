package providertest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentry-dev/agentry/llm"
)

// IgnoreArgumentsJSON compares tool calls without their ArgumentsJSON (the
// model's text, whose spacing is the vendor's); CheckArgumentsJSON checks
// it apart.
var IgnoreArgumentsJSON = cmpopts.IgnoreFields(llm.ToolCall{}, "ArgumentsJSON")

// CheckArgumentsJSON checks that a provider kept the model's argument text
// of every call whose arguments are an object (so that a typed tool decodes
// it directly), and that the text is what Arguments was decoded from.
func CheckArgumentsJSON(t testing.TB, calls []llm.ToolCall) {
	t.Helper()
	for _, c := range calls {
		if c.Arguments == nil || len(c.Arguments) == 0 && c.ArgumentsJSON == nil {
			continue // raw or empty arguments: no text to keep
		}
		if c.ArgumentsJSON == nil {
			t.Errorf("call %s (%s): no ArgumentsJSON", c.ToolCallID, c.ToolName)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(c.ArgumentsJSON, &m); err != nil {
			t.Errorf("call %s: ArgumentsJSON %s: %v", c.ToolCallID, c.ArgumentsJSON, err)
			continue
		}
		if diff := cmp.Diff(c.Arguments, m); diff != "" {
			t.Errorf("call %s: ArgumentsJSON is not Arguments' text (-Arguments +text):\n%s", c.ToolCallID, diff)
		}
	}
}
