package threadtree_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/threadtree"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

func user(text string) llm.Message { return llm.NewUserMessage(llm.Text(text)) }

func assistant(text string) llm.Message {
	return llm.NewAssistantMessage([]llm.ContentBlock{llm.Text(text)}, nil)
}

// texts returns the text of each message of s.
func texts(s *agent.State) []string {
	out := []string{}
	for _, m := range s.AllMessages() {
		out = append(out, m.Text())
	}
	return out
}

func mustBranch(t *testing.T, tree *threadtree.Tree, from, name string) string {
	t.Helper()
	id, err := tree.Branch(from, name)
	if err != nil {
		t.Fatalf("Branch(%s, %q): %v", from, name, err)
	}
	return id
}

func mustCheckout(t *testing.T, tree *threadtree.Tree, id string) {
	t.Helper()
	if err := tree.Checkout(id); err != nil {
		t.Fatalf("Checkout(%s): %v", id, err)
	}
}

func mustUpdate(t *testing.T, tree *threadtree.Tree, s *agent.State) {
	t.Helper()
	if err := tree.Update(s); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// nodeIDOf returns the MetadataNodeID of s.
func nodeIDOf(s *agent.State) any {
	v, _ := s.Value(threadtree.MetadataNodeID)
	return v
}

func TestUAP_7_1_NewTreeHasOneRootThatIsCurrent(t *testing.T) {
	for name, tree := range map[string]*threadtree.Tree{"New": threadtree.New(), "zero value": new(threadtree.Tree)} {
		t.Run(name, func(t *testing.T) {
			root := tree.Root()
			if !ids.Valid(root.ID) || root.ParentID != "" || root.Name != "root" || len(root.Children) != 0 {
				t.Errorf("root = %+v", root)
			}
			if cur := tree.Current(); cur.ID != root.ID {
				t.Errorf("current %s, want root %s", cur.ID, root.ID)
			}
			h := tree.History()
			if h.Len() != 0 || h.Step() != 0 || nodeIDOf(h) != root.ID {
				t.Errorf("history: %d messages, step %d, node %v", h.Len(), h.Step(), nodeIDOf(h))
			}
			if n := tree.Nodes(); len(n) != 1 || n[0].ID != root.ID {
				t.Errorf("Nodes() = %+v", n)
			}
		})
	}
}

func TestUAP_7_1_BranchCopiesStateAndLinksParent(t *testing.T) {
	tree := threadtree.New()
	root := tree.Root().ID
	mustUpdate(t, tree, tree.History().WithMessages(user("hello"), assistant("hi")).WithStep(1))

	a := mustBranch(t, tree, root, "a")
	b := mustBranch(t, tree, root, "")
	aa := mustBranch(t, tree, a, "a.a")

	if cur := tree.Current().ID; cur != root {
		t.Errorf("Branch moved current to %s", cur)
	}
	want := map[string]struct {
		parent, name string
		children     []string
	}{
		root: {"", "root", []string{a, b}},
		a:    {root, "a", []string{aa}},
		b:    {root, "", []string{}},
		aa:   {a, "a.a", []string{}},
	}
	for id, w := range want {
		n, ok := tree.Node(id)
		if !ok {
			t.Fatalf("Node(%s) missing", id)
		}
		if !ids.Valid(n.ID) || n.ParentID != w.parent || n.Name != w.name {
			t.Errorf("node %s = {parent %q name %q}, want {%q %q}", id, n.ParentID, n.Name, w.parent, w.name)
		}
		if diff := cmp.Diff(w.children, n.Children); diff != "" {
			t.Errorf("node %s children (-want +got):\n%s", id, diff)
		}
		if diff := cmp.Diff([]string{"hello", "hi"}, texts(n.State)); diff != "" || n.State.Step() != 1 {
			t.Errorf("node %s state step %d, messages (-want +got):\n%s", id, n.State.Step(), diff)
		}
		if nodeIDOf(n.State) != id {
			t.Errorf("node %s state stamped %v", id, nodeIDOf(n.State))
		}
	}
	var order []string
	for _, n := range tree.Nodes() {
		order = append(order, n.ID)
	}
	if diff := cmp.Diff([]string{root, a, aa, b}, order); diff != "" {
		t.Errorf("Nodes() order (-want +got):\n%s", diff)
	}

	if _, err := tree.Branch("no-such-node", "x"); !errors.Is(err, threadtree.ErrNodeNotFound) {
		t.Errorf("Branch(unknown) err = %v, want ErrNodeNotFound", err)
	}
	if len(tree.Nodes()) != 4 {
		t.Errorf("a failed Branch added a node")
	}
}

func TestUAP_7_1_CheckoutSwitchesCurrent(t *testing.T) {
	tree := threadtree.New()
	root := tree.Root().ID
	b := mustBranch(t, tree, root, "b")
	mustCheckout(t, tree, b)
	if tree.Current().ID != b || nodeIDOf(tree.History()) != b {
		t.Errorf("current %s, history of %v; want %s", tree.Current().ID, nodeIDOf(tree.History()), b)
	}
	if err := tree.Checkout(ids.New()); !errors.Is(err, threadtree.ErrNodeNotFound) {
		t.Errorf("Checkout(unknown) err = %v, want ErrNodeNotFound", err)
	}
	if tree.Current().ID != b {
		t.Errorf("a failed Checkout moved current to %s", tree.Current().ID)
	}
	mustCheckout(t, tree, root)
	if tree.Current().ID != root {
		t.Errorf("current %s, want root", tree.Current().ID)
	}
}

func TestUAP_7_1_HistoryIsRootToCurrent(t *testing.T) {
	tree := threadtree.New()
	mustUpdate(t, tree, tree.History().WithMessage(user("root")))
	b := mustBranch(t, tree, tree.Root().ID, "b")
	mustCheckout(t, tree, b)
	mustUpdate(t, tree, tree.History().WithMessage(assistant("branch")))
	c := mustBranch(t, tree, b, "c")
	mustCheckout(t, tree, c)
	mustUpdate(t, tree, tree.History().WithMessage(user("child")).WithStep(5))

	h := tree.History()
	if diff := cmp.Diff([]string{"root", "branch", "child"}, texts(h)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if h.Step() != 5 {
		t.Errorf("history step %d, want the current node's 5", h.Step())
	}
	mustCheckout(t, tree, b)
	if diff := cmp.Diff([]string{"root", "branch"}, texts(tree.History())); diff != "" {
		t.Errorf("history at b (-want +got):\n%s", diff)
	}

	// A snapshot whose history was pruned (UAP-1.1 §6.3) is the history:
	// nothing is re-added from the ancestors.
	mustCheckout(t, tree, c)
	mustUpdate(t, tree, tree.History().WithContext([]llm.Message{user("summary")}))
	if diff := cmp.Diff([]string{"summary"}, texts(tree.History())); diff != "" {
		t.Errorf("history after WithContext (-want +got):\n%s", diff)
	}
}

func TestUAP_7_1_UpdateRefusesAStateOfAnotherNode(t *testing.T) {
	tree := threadtree.New()
	a := mustBranch(t, tree, tree.Root().ID, "a")
	b := mustBranch(t, tree, tree.Root().ID, "b")
	mustCheckout(t, tree, a)
	fromA := tree.History().WithMessage(user("on a"))
	mustCheckout(t, tree, b) // a checkout while the "run" on a was going on
	before := tree.History()

	if err := tree.Update(fromA); !errors.Is(err, threadtree.ErrWrongNode) {
		t.Fatalf("Update(state of a) on b: err = %v, want ErrWrongNode", err)
	}
	if tree.History() != before {
		t.Error("a refused Update changed b")
	}
	if err := tree.Set(a, fromA); err != nil {
		t.Fatalf("Set(a, state of a): %v", err)
	}
	if n, _ := tree.Node(a); n.State != fromA {
		t.Error("Set(a) did not store the state")
	}

	for name, s := range map[string]*agent.State{
		"nil":            nil,
		"saved tree":     agent.Initial().WithMetadata(threadtree.MetadataTree, "{}"),
		"non-string tag": agent.Initial().WithMetadata(threadtree.MetadataNodeID, 42),
	} {
		if err := tree.Update(s); err == nil {
			t.Errorf("Update(%s) succeeded", name)
		}
	}
	if err := tree.Set(ids.New(), agent.Initial()); !errors.Is(err, threadtree.ErrNodeNotFound) {
		t.Errorf("Set(unknown) err = %v, want ErrNodeNotFound", err)
	}

	// A state without a node tag (a conversation from elsewhere) is
	// adopted and tagged.
	s := agent.Initial().WithMessage(user("imported"))
	mustUpdate(t, tree, s)
	if h := tree.History(); nodeIDOf(h) != b || h.Len() != 1 {
		t.Errorf("imported state: tag %v, %d messages", nodeIDOf(h), h.Len())
	}
}

// TestUAP_7_1_BranchIsolation runs a real agent on two branches and checks
// that neither run leaks into the other branch.
func TestUAP_7_1_BranchIsolation(t *testing.T) {
	ctx := context.Background()
	m := scripted.NewT(t,
		scripted.Step{Text: "By plane or by train?"},
		scripted.Step{Text: "Flights booked."},
		scripted.Step{Text: "Train tickets booked."},
		scripted.Step{Text: "Window seat it is."})
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}})
	if err != nil {
		t.Fatal(err)
	}
	tree := threadtree.New()
	ask := func(prompt string) {
		t.Helper()
		res, err := a.Ask(ctx, llm.Text(prompt), tree.History())
		if err != nil {
			t.Fatal(err)
		}
		mustUpdate(t, tree, res.State)
	}

	ask("Plan a trip to Lyon")
	root := tree.Root().ID
	plane := mustBranch(t, tree, root, "plane")
	train := mustBranch(t, tree, root, "train")

	mustCheckout(t, tree, plane)
	ask("Plane")
	mustCheckout(t, tree, train)
	ask("Train")
	mustCheckout(t, tree, plane)
	ask("Window seat")

	prefix := []string{"Plan a trip to Lyon", "By plane or by train?"}
	want := map[string][]string{
		root:  prefix,
		plane: append(append([]string{}, prefix...), "Plane", "Flights booked.", "Window seat", "Window seat it is."),
		train: append(append([]string{}, prefix...), "Train", "Train tickets booked."),
	}
	for id, w := range want {
		n, _ := tree.Node(id)
		if diff := cmp.Diff(w, texts(n.State)); diff != "" {
			t.Errorf("node %s (%s) history (-want +got):\n%s", id, n.Name, diff)
		}
	}

	// The model saw, on each branch, only that branch's history.
	reqs := m.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	for i, w := range [][]string{want[train][:3], want[plane][:5]} {
		var got []string
		for _, msg := range reqs[i+2].Messages {
			got = append(got, msg.Text())
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("call %d request (-want +got):\n%s", i+3, diff)
		}
	}
}

// TestUAP_7_1_ConcurrentRunsOnBranches runs agents on several branches at
// once, each writing back with Set, while other goroutines read, branch,
// check out and serialize the tree (run with -race).
func TestUAP_7_1_ConcurrentRunsOnBranches(t *testing.T) {
	ctx := context.Background()
	m := scripted.NewFunc(func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		return scripted.Step{Text: "echo: " + req.Messages[len(req.Messages)-1].Text()}, nil
	})
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}})
	if err != nil {
		t.Fatal(err)
	}
	tree := threadtree.New()
	const branches, turns = 8, 5
	var branchIDs []string
	for i := range branches {
		branchIDs = append(branchIDs, mustBranch(t, tree, tree.Root().ID, fmt.Sprint(i)))
	}
	var wg sync.WaitGroup
	for i, id := range branchIDs {
		wg.Go(func() {
			for k := range turns {
				n, _ := tree.Node(id)
				res, err := a.Ask(ctx, llm.Text(fmt.Sprintf("b%d t%d", i, k)), n.State)
				if err != nil {
					t.Error(err)
					return
				}
				if err := tree.Set(id, res.State); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for k := range 50 {
			id := branchIDs[k%branches]
			_ = tree.Checkout(id)
			_ = tree.History()
			_, _ = tree.Branch(id, "side")
			if _, err := tree.MarshalJSON(); err != nil {
				t.Error(err)
			}
			_ = tree.Nodes()
		}
	})
	wg.Wait()
	for i, id := range branchIDs {
		n, _ := tree.Node(id)
		var want []string
		for k := range turns {
			p := fmt.Sprintf("b%d t%d", i, k)
			want = append(want, p, "echo: "+p)
		}
		if diff := cmp.Diff(want, texts(n.State)); diff != "" {
			t.Errorf("branch %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestUAP_7_2_ThreadNodesAreCopies(t *testing.T) {
	tree := threadtree.New()
	root := tree.Root()
	child := mustBranch(t, tree, root.ID, "child")
	n := tree.Root()
	n.Children[0] = "mutated"
	n.Name = "mutated"
	if got := tree.Root(); got.Children[0] != child || got.Name != "root" {
		t.Errorf("changing a returned node changed the tree: %+v", got)
	}
	if len(root.Children) != 0 {
		t.Errorf("a node returned before Branch sees the new child: %v", root.Children)
	}
	if _, ok := tree.Node("no-such-node"); ok {
		t.Error("Node(unknown) reported ok")
	}
}
