package threadtree_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/threadtree"
	"github.com/agentry-dev/agentry/internal/ids"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// seqIDs is a deterministic ids.Source: UUIDv4s numbered from 1 and a
// fixed clock.
type seqIDs struct{ n atomic.Int64 }

func (s *seqIDs) NewID() string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n.Add(1))
}
func (s *seqIDs) Now() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) }

// goldenTree builds, with deterministic IDs, a tree of a root and two
// branches, one of them current.
func goldenTree(t *testing.T) *threadtree.Tree {
	t.Helper()
	defer ids.Set(&seqIDs{})()
	tree := threadtree.New()
	root := tree.Root().ID
	mustUpdate(t, tree, tree.History().WithMessages(user("Plan a trip to Lyon"), assistant("By plane or by train?")).WithStep(1))
	mustBranch(t, tree, root, "plane")
	train := mustBranch(t, tree, root, "")
	mustCheckout(t, tree, train)
	mustUpdate(t, tree, tree.History().WithMessages(user("Train"), assistant("Booked.")).WithStep(2))
	return tree
}

func indent(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// TestUAP_7_1_ToJSONGolden pins the serialized form (ThreadTreeJSON, as
// the TypeScript implementation writes it). Regenerate with -update.
func TestUAP_7_1_ToJSONGolden(t *testing.T) {
	data, err := goldenTree(t).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got := indent(t, data)
	path := filepath.Join("testdata", "tree.golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("ToJSON (-want +got):\n%s", diff)
	}

	// Decoding the golden form and encoding it again is exact.
	tree, err := threadtree.FromJSON(want)
	if err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(indent(t, again))); diff != "" {
		t.Errorf("FromJSON then ToJSON (-want +got):\n%s", diff)
	}
}

func TestUAP_7_1_FromJSONRestoresTheTree(t *testing.T) {
	orig := goldenTree(t)
	data, err := orig.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var tree threadtree.Tree
	if err := json.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	if tree.Root().ID != orig.Root().ID || tree.Current().ID != orig.Current().ID {
		t.Errorf("root/current %s/%s, want %s/%s", tree.Root().ID, tree.Current().ID, orig.Root().ID, orig.Current().ID)
	}
	want, got := orig.Nodes(), tree.Nodes()
	if len(want) != len(got) {
		t.Fatalf("%d nodes, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.ID != w.ID || g.ParentID != w.ParentID || g.Name != w.Name || !cmp.Equal(g.Children, w.Children) ||
			g.State.ID() != w.State.ID() || !cmp.Equal(texts(g.State), texts(w.State)) || g.State.Step() != w.State.Step() {
			t.Errorf("node %d = %+v, want %+v", i, g, w)
		}
	}
	// The restored tree keeps working: branch from the current node.
	id := mustBranch(t, &tree, tree.Current().ID, "more")
	if n, _ := tree.Node(id); n.ParentID != orig.Current().ID {
		t.Errorf("branch of restored tree has parent %s", n.ParentID)
	}
}

// TestUAP_7_2_FromJSONReadsTheTypeScriptForm loads a tree as the
// TypeScript implementation writes it: version 1.0.0 states, {role,
// content} messages, a root without a node tag, a branch whose state
// carries its parent's tag.
func TestUAP_7_2_FromJSONReadsTheTypeScriptForm(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "ts-tree.json"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := threadtree.FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	const (
		root = "2b1c7f1e-3b7a-4f3e-9a51-0c1d2e3f4a5b"
		alt  = "7d9e8f10-1a2b-4c3d-8e4f-5a6b7c8d9e0f"
		cur  = "c4d5e6f7-0819-4a2b-bc3d-4e5f60718293"
	)
	if tree.Root().ID != root || tree.Current().ID != cur {
		t.Errorf("root %s current %s", tree.Root().ID, tree.Current().ID)
	}
	if diff := cmp.Diff([]string{"Hello", "Hi! How can I help?", "Tell me a joke", "Why did the gopher cross the road?"}, texts(tree.History())); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	for _, id := range []string{root, alt, cur} {
		n, _ := tree.Node(id)
		if nodeIDOf(n.State) != id {
			t.Errorf("node %s state tagged %v", id, nodeIDOf(n.State))
		}
	}
	if n, _ := tree.Node(alt); n.Name != "" || n.ParentID != root {
		t.Errorf("alt = %+v", n)
	}
}

// treeDoc is a ThreadTreeJSON document to break in tests.
type treeDoc struct {
	RootID    string    `json:"rootId"`
	CurrentID string    `json:"currentId"`
	Nodes     []nodeDoc `json:"nodes"`
}

type nodeDoc struct {
	ID       string          `json:"id"`
	ParentID *string         `json:"parentId"`
	State    json.RawMessage `json:"state,omitempty"`
	Name     string          `json:"name,omitempty"`
	Children []string        `json:"children"`
}

func stateJSON(t testing.TB, s *agent.State) json.RawMessage {
	t.Helper()
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validDoc is root R with children A and B; A has child C; C is current.
func validDoc(t *testing.T) (doc treeDoc, r, a, b, c string) {
	r, a, b, c = ids.New(), ids.New(), ids.New(), ids.New()
	s := stateJSON(t, agent.Initial().WithMessage(user("hi")))
	doc = treeDoc{RootID: r, CurrentID: c, Nodes: []nodeDoc{
		{ID: r, State: s, Name: "root", Children: []string{a, b}},
		{ID: a, ParentID: &r, State: s, Children: []string{c}},
		{ID: b, ParentID: &r, State: s, Children: []string{}},
		{ID: c, ParentID: &a, State: s, Children: []string{}},
	}}
	return doc, r, a, b, c
}

func TestUAP_7_2_FromJSONRejectsInvalidTrees(t *testing.T) {
	ptr := func(s string) *string { return &s }
	cases := []struct {
		name   string
		mutate func(d *treeDoc, r, a, b, c string)
		raw    func(data []byte) []byte
		want   string
	}{
		{name: "not JSON", raw: func([]byte) []byte { return []byte("{") }, want: "unexpected EOF"},
		{name: "trailing data", raw: func(d []byte) []byte { return append(d, " {}"...) }, want: "trailing data"},
		{name: "unknown field", raw: func(d []byte) []byte { return append([]byte(`{"extra":1,`), d[1:]...) }, want: "unknown field"},
		{name: "unknown node field", raw: func(d []byte) []byte {
			return bytes.Replace(d, []byte(`"children":`), []byte(`"kids":[],"children":`), 1)
		}, want: "unknown field"},
		{name: "a state, not a tree", raw: func([]byte) []byte { return stateJSON(t, agent.Initial()) }, want: "unknown field"},
		{name: "no nodes", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes = nil }, want: "no nodes"},
		{name: "node id not UUIDv4", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes[2].ID = "node-b" }, want: "not a UUIDv4"},
		{name: "node id UUIDv1", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes[2].ID = "6ba7b810-9dad-11d1-80b4-00c04fd430c8" }, want: "not a UUIDv4"},
		{name: "duplicate node", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes = append(d.Nodes, d.Nodes[2]) }, want: "duplicate node"},
		{name: "parentId not UUIDv4", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes[2].ParentID = ptr("root") }, want: "parentId"},
		{name: "children missing", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes[2].Children = nil }, want: "children missing"},
		{name: "child not UUIDv4", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes[2].Children = []string{"x"} }, want: "not a UUIDv4"},
		{name: "state missing", mutate: func(d *treeDoc, r, a, b, c string) { d.Nodes[2].State = nil }, want: "state"},
		{name: "state invalid", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[2].State = json.RawMessage(`{"version":"9","id":"x","messages":[],"step":0,"metadata":{}}`)
		}, want: "unsupported version"},
		{name: "state holds a saved tree", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[2].State = stateJSON(t, agent.Initial().WithMetadata(threadtree.MetadataTree, "{}"))
		}, want: "saved thread tree"},
		{name: "rootId names no node", mutate: func(d *treeDoc, r, a, b, c string) { d.RootID = ids.New() }, want: "rootId"},
		{name: "rootId names a child", mutate: func(d *treeDoc, r, a, b, c string) { d.RootID = a }, want: "has parent"},
		{name: "two roots", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[2].ParentID = nil
			d.Nodes[0].Children = []string{a}
		}, want: "no parent but is not the root"},
		{name: "child does not exist", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[2].Children = []string{ids.New()}
		}, want: "does not exist"},
		{name: "child listed twice in one list", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[0].Children = []string{a, b, b}
		}, want: "listed as a child twice"},
		{name: "child listed by a node that is not its parent", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[2].Children = []string{c}
		}, want: "whose parent is"},
		{name: "parent does not exist", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[2].ParentID = ptr(ids.New())
			d.Nodes[0].Children = []string{a}
		}, want: "does not exist"},
		{name: "node missing from its parent's children", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[0].Children = []string{a}
		}, want: "not among the children"},
		{name: "root listed as a child", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[3].Children = []string{r}
		}, want: "whose parent is"},
		{name: "self parent", mutate: func(d *treeDoc, r, a, b, c string) {
			d.Nodes[2].ParentID = &b
			d.Nodes[2].Children = []string{b}
			d.Nodes[0].Children = []string{a}
		}, want: "cycle"},
		{name: "cycle", mutate: func(d *treeDoc, r, a, b, c string) {
			// A and C are each other's parent; R keeps only B.
			d.Nodes[0].Children = []string{b}
			d.Nodes[1].ParentID = &c
			d.Nodes[3].Children = []string{a}
		}, want: "cycle"},
		{name: "currentId names no node", mutate: func(d *treeDoc, r, a, b, c string) { d.CurrentID = ids.New() }, want: "currentId"},
		{name: "currentId missing", mutate: func(d *treeDoc, r, a, b, c string) { d.CurrentID = "" }, want: "currentId"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, r, a, b, c := validDoc(t)
			if tc.mutate != nil {
				tc.mutate(&doc, r, a, b, c)
			}
			data, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if tc.raw != nil {
				data = tc.raw(data)
			}
			_, err = threadtree.FromJSON(data)
			if !errors.Is(err, threadtree.ErrInvalidTree) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromJSON err = %v, want ErrInvalidTree mentioning %q", err, tc.want)
			}
		})
	}

	// The unbroken document decodes.
	doc, _, _, _, c := validDoc(t)
	data, _ := json.Marshal(doc)
	tree, err := threadtree.FromJSON(data)
	if err != nil {
		t.Fatalf("valid document: %v", err)
	}
	if tree.Current().ID != c || len(tree.Nodes()) != 4 {
		t.Errorf("valid document: current %s, %d nodes", tree.Current().ID, len(tree.Nodes()))
	}
}

// TestUAP_7_2_FromJSONHandlesDeepTrees decodes and walks a path of many
// nodes without recursion.
func TestUAP_7_2_FromJSONHandlesDeepTrees(t *testing.T) {
	tree := threadtree.New()
	id := tree.Root().ID
	for range 2000 {
		id = mustBranch(t, tree, id, "")
	}
	mustCheckout(t, tree, id)
	data, err := tree.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := threadtree.FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(back.Nodes()); n != 2001 || back.Current().ID != id {
		t.Errorf("%d nodes, current %s", n, back.Current().ID)
	}
}
