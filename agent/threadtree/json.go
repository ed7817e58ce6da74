package threadtree

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/ids"
)

// maxTreeJSON bounds the size FromJSON accepts. It equals
// agent.MaxStateJSON: a tree Save can store fits in one state.
const maxTreeJSON = agent.MaxStateJSON

// treeJSON is ThreadTreeJSON, the TypeScript implementation's form.
type treeJSON struct {
	RootID    string     `json:"rootId"`
	CurrentID string     `json:"currentId"`
	Nodes     []nodeJSON `json:"nodes"`
}

// nodeJSON is ThreadNodeJSON.
type nodeJSON struct {
	ID       string          `json:"id"`
	ParentID *string         `json:"parentId"`
	State    json.RawMessage `json:"state"`
	Name     string          `json:"name,omitempty"`
	Children []string        `json:"children"`
}

// MarshalJSON returns the tree's ThreadTreeJSON (UAP-1.1 §7.1 toJSON), in the
// TypeScript implementation's form:
//
//	{"rootId": ID, "currentId": ID, "nodes": [
//	  {"id": ID, "parentId": ID or null, "state": AgentStateJSON,
//	   "name": string (omitted when empty), "children": [ID, ...]}, ...]}
//
// Nodes are listed depth-first from the root, children oldest first.
func (t *Tree) MarshalJSON() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	j := treeJSON{RootID: t.root, CurrentID: t.current, Nodes: make([]nodeJSON, 0, len(t.nodes))}
	var err error
	t.walk(func(n *ThreadNode) {
		if err != nil {
			return
		}
		var state []byte
		if state, err = n.State.MarshalJSON(); err != nil {
			err = fmt.Errorf("threadtree: node %s: %w", n.ID, err)
			return
		}
		nj := nodeJSON{ID: n.ID, State: state, Name: n.Name, Children: n.Children}
		if n.ParentID != "" {
			nj.ParentID = &n.ParentID
		}
		j.Nodes = append(j.Nodes, nj)
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// FromJSON decodes and validates ThreadTreeJSON, as MarshalJSON and the
// TypeScript implementation write it. It rejects, with an error wrapping
// ErrInvalidTree and naming the fault: more than agent.MaxStateJSON bytes,
// unknown fields or trailing data, no nodes, an ID that is not a UUIDv4,
// a duplicate node, missing children, a state agent.FromJSON rejects or
// one carrying a saved tree (MetadataTree), a parent or child that does
// not exist, parent and children links that disagree, no root or more
// than one, a rootId that does not name it, nodes unreachable from the
// root (a cycle), and a currentId that names no node.
//
// A node state whose MetadataNodeID is missing or names another node (the
// TypeScript implementation sets it only on the states history() returns)
// gets it set to its node's ID, and hence a new state ID.
func FromJSON(data []byte) (*Tree, error) {
	if len(data) > maxTreeJSON {
		return nil, fmt.Errorf("%w: exceeds %d bytes", ErrInvalidTree, maxTreeJSON)
	}
	var j treeJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTree, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalidTree)
	}
	nodes, err := decodeNodes(j.Nodes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTree, err)
	}
	if err := checkLinks(nodes, j.RootID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTree, err)
	}
	if _, ok := nodes[j.CurrentID]; !ok {
		return nil, fmt.Errorf("%w: currentId %q names no node", ErrInvalidTree, j.CurrentID)
	}
	return &Tree{root: j.RootID, current: j.CurrentID, nodes: nodes}, nil
}

// UnmarshalJSON is FromJSON into t, replacing its contents.
func (t *Tree) UnmarshalJSON(data []byte) error {
	v, err := FromJSON(data)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.root, t.current, t.nodes = v.root, v.current, v.nodes
	return nil
}

// decodeNodes checks each node on its own: IDs, uniqueness, state.
func decodeNodes(list []nodeJSON) (map[string]*ThreadNode, error) {
	if len(list) == 0 {
		return nil, fmt.Errorf("no nodes")
	}
	nodes := make(map[string]*ThreadNode, len(list))
	for i, nj := range list {
		switch {
		case !ids.Valid(nj.ID):
			return nil, fmt.Errorf("nodes[%d]: id %q is not a UUIDv4", i, nj.ID)
		case nodes[nj.ID] != nil:
			return nil, fmt.Errorf("nodes[%d]: duplicate node %s", i, nj.ID)
		case nj.ParentID != nil && !ids.Valid(*nj.ParentID):
			return nil, fmt.Errorf("nodes[%d]: parentId %q is not a UUIDv4", i, *nj.ParentID)
		case nj.Children == nil:
			return nil, fmt.Errorf("nodes[%d]: children missing", i)
		}
		for k, c := range nj.Children {
			if !ids.Valid(c) {
				return nil, fmt.Errorf("nodes[%d]: children[%d] %q is not a UUIDv4", i, k, c)
			}
		}
		state, err := agent.FromJSON(nj.State)
		if err != nil {
			return nil, fmt.Errorf("nodes[%d]: state: %w", i, err)
		}
		if _, ok := state.Value(MetadataTree); ok {
			return nil, fmt.Errorf("nodes[%d]: state carries a saved thread tree (metadata %q)", i, MetadataTree)
		}
		if v, _ := state.Value(MetadataNodeID); v != any(nj.ID) {
			state = state.WithMetadata(MetadataNodeID, nj.ID)
		}
		n := &ThreadNode{ID: nj.ID, State: state, Name: nj.Name, Children: nj.Children}
		if nj.ParentID != nil {
			n.ParentID = *nj.ParentID
		}
		nodes[n.ID] = n
	}
	return nodes, nil
}

// checkLinks checks that the nodes form one tree rooted at rootID whose
// parent and children links agree.
func checkLinks(nodes map[string]*ThreadNode, rootID string) error {
	root, ok := nodes[rootID]
	switch {
	case !ok:
		return fmt.Errorf("rootId %q names no node", rootID)
	case root.ParentID != "":
		return fmt.Errorf("root %s has parent %s", rootID, root.ParentID)
	}
	listedBy := make(map[string]string, len(nodes)) // child ID -> the node listing it
	for _, n := range nodes {
		if n.ParentID == "" && n.ID != rootID {
			return fmt.Errorf("node %s has no parent but is not the root", n.ID)
		}
		for _, c := range n.Children {
			child, ok := nodes[c]
			switch {
			case !ok:
				return fmt.Errorf("node %s: child %s does not exist", n.ID, c)
			case child.ParentID != n.ID:
				return fmt.Errorf("node %s lists child %s whose parent is %q", n.ID, c, child.ParentID)
			case listedBy[c] != "":
				return fmt.Errorf("node %s is listed as a child twice by %s", c, n.ID)
			}
			listedBy[c] = n.ID
		}
	}
	for _, n := range nodes {
		if n.ParentID == "" {
			continue
		}
		if _, ok := nodes[n.ParentID]; !ok {
			return fmt.Errorf("node %s: parent %s does not exist", n.ID, n.ParentID)
		}
		if listedBy[n.ID] != n.ParentID {
			return fmt.Errorf("node %s is not among the children of its parent %s", n.ID, n.ParentID)
		}
	}
	// Links agree and only the root lacks a parent, so every node not
	// reachable from the root lies on (or hangs from) a parent cycle.
	seen, stack := 0, []string{rootID}
	for len(stack) > 0 {
		n := nodes[stack[len(stack)-1]]
		stack = stack[:len(stack)-1]
		seen++
		stack = append(stack, n.Children...)
	}
	if seen != len(nodes) {
		return fmt.Errorf("%d node(s) unreachable from the root: their parent links form a cycle", len(nodes)-seen)
	}
	return nil
}
