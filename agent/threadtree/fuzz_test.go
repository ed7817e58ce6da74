package threadtree_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/threadtree"
	"github.com/agentry-dev/agentry/llm"
)

// FuzzFromJSON checks that FromJSON never panics, that every error wraps
// ErrInvalidTree, and that whatever it accepts is a tree that encodes, and
// re-decodes to the same encoding.
func FuzzFromJSON(f *testing.F) {
	for _, name := range []string{"tree.golden.json", "ts-tree.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	tree := threadtree.New()
	root := tree.Root().ID
	_ = tree.Update(tree.History().WithMessages(
		llm.NewUserMessage(llm.Text("Use the tool")),
		llm.NewAssistantMessage(nil, []llm.ToolCall{{ToolCallID: "c1", ToolName: "t", Arguments: map[string]any{"n": 1.5}}}),
		llm.NewToolResultMessage([]llm.ToolResult{{ToolCallID: "c1", Result: "ok"}}),
	).WithReasoning("thinking").WithPlan([]agent.PlanStep{{ID: "p1", Description: "d", Status: agent.PlanPending}}))
	a, _ := tree.Branch(root, "a")
	b, _ := tree.Branch(a, "")
	_, _ = tree.Branch(root, "c")
	_ = tree.Checkout(b)
	data, err := tree.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	small, _ := threadtree.New().MarshalJSON()
	f.Add(small)
	f.Add([]byte(`{"rootId":"","currentId":"","nodes":[]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		tree, err := threadtree.FromJSON(data)
		if err != nil {
			if !errors.Is(err, threadtree.ErrInvalidTree) {
				t.Fatalf("error does not wrap ErrInvalidTree: %v", err)
			}
			return
		}
		if tree.History() == nil || len(tree.Nodes()) == 0 {
			t.Fatal("accepted tree has no current state or no nodes")
		}
		enc, err := tree.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted tree does not encode: %v", err)
		}
		back, err := threadtree.FromJSON(enc)
		if err != nil {
			t.Fatalf("encoding of an accepted tree is rejected: %v\n%s", err, enc)
		}
		enc2, err := back.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
		if len(back.Nodes()) != len(tree.Nodes()) || back.Current().ID != tree.Current().ID {
			t.Fatal("re-decoded tree differs")
		}
	})
}
