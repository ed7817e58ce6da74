// Package threadtree provides thread trees, the optional Thread Trees
// conformance level of UAP-1.1 (§7, §14.1): tree-structured conversation
// management built on agent.State, with branching, checkout, history,
// JSON serialization and persistence through an agent.CheckpointStore.
//
//	tree := threadtree.New()
//	res, _ := a.Ask(ctx, llm.Text("Plan a trip"), tree.History())
//	_ = tree.Update(res.State)
//	alt, _ := tree.Branch(tree.Current().ID, "by train")
//	_ = tree.Checkout(alt)
//	res, _ = a.Ask(ctx, llm.Text("Only trains, please"), tree.History())
//	_ = tree.Update(res.State) // the first branch is unchanged
//
// # Node states are full snapshots
//
// Every node holds a complete agent.State (§7.2 "state snapshot"), not
// the messages added since its parent. Branch gives the new node a copy
// of its parent's state, and a run on a branch extends that copy, so the
// current node's state already is the history from the root to the
// current node: History returns it as is, in O(1), with nothing to
// concatenate. This is also how the TypeScript implementation stores
// nodes, so a tree crosses between the two implementations with the same
// meaning. It also keeps context window management (§6.3) sound: a run
// that pruned its history with WithContext leaves on its node exactly the
// history the agent will continue from. The cost is that serialized trees
// repeat the prefix a branch shares with its parent.
//
// Each node's state carries the node's ID in its metadata under
// MetadataNodeID (the key the TypeScript implementation uses for the
// same purpose). Update and Set use it to refuse a state that was taken
// from another node, so a run started on one branch can never overwrite
// another branch, even when a Checkout happened during the run.
//
// # Persistence
//
// Save stores the whole tree as one checkpoint of a session: a state with
// no messages whose metadata key MetadataTree holds the tree's JSON as a
// string. One state per tree makes a save atomic (a crash cannot leave
// half a tree), and a string survives every store exactly: as a JSON
// object the tree would come back from a JSON store as map[string]any,
// with numbers turned into float64. Load reverses Save. The session
// belongs to the tree: an agent must not checkpoint into the same session
// (its states would replace the tree).
//
// # Concurrency
//
// A Tree is safe for concurrent use: every method holds the tree's lock
// while it runs, so each is atomic. The values it returns are snapshots:
// a ThreadNode is a copy, and agent.State values are immutable. Sequences
// of calls are not atomic. Update detects a Checkout between History and
// Update (ErrWrongNode). Runs on different branches may proceed
// concurrently when each reads its node with Node and writes back with Set
// and the node's ID; two runs from the same node race, and the later write
// wins — Branch first to keep both.
package threadtree

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/ids"
)

// MetadataNodeID is the state metadata key that names the node a state
// belongs to. The TypeScript implementation writes the same key.
const MetadataNodeID = "_threadTreeNodeId"

// MetadataTree is the metadata key of the state Save writes: its value is
// the tree's JSON, as a string.
const MetadataTree = "uap.threadTree"

// rootName is the name New gives the root, as the TypeScript
// implementation does.
const rootName = "root"

// Errors reported by Tree methods; FromJSON and Load wrap ErrInvalidTree
// and ErrNoTree.
var (
	// ErrNodeNotFound is returned for a node ID the tree does not hold.
	ErrNodeNotFound = errors.New("threadtree: node not found")
	// ErrWrongNode is returned by Update and Set for a state whose
	// MetadataNodeID names another node than the one being written.
	ErrWrongNode = errors.New("threadtree: state belongs to another node")
	// ErrInvalidState is returned by Update and Set for a nil state or
	// for one carrying a saved tree (MetadataTree).
	ErrInvalidState = errors.New("threadtree: invalid node state")
	// ErrInvalidTree is wrapped by every FromJSON error.
	ErrInvalidTree = errors.New("threadtree: invalid thread tree JSON")
	// ErrNoTree is returned by Load for a session whose checkpoint holds
	// no tree.
	ErrNoTree = errors.New("threadtree: checkpoint holds no thread tree")
)

// ThreadNode is one node of a thread tree (UAP-1.1 §7.2). The values a
// Tree returns are copies: changing one does not change the tree.
type ThreadNode struct {
	// ID is the node's UUIDv4.
	ID string
	// ParentID is the parent's ID, "" for the root.
	ParentID string
	// State is the full state snapshot at this node: the conversation
	// from the root to this node.
	State *agent.State
	// Name is the optional branch name, "" when unnamed.
	Name string
	// Children are the IDs of the child nodes, oldest first.
	Children []string
}

func (n *ThreadNode) clone() ThreadNode {
	c := *n
	c.Children = slices.Clone(n.Children)
	if c.Children == nil {
		c.Children = []string{}
	}
	return c
}

// Tree is a thread tree (UAP-1.1 §7.1 ThreadTree). Create one with New or
// FromJSON; the zero Tree is ready to use too, and is a tree whose root
// holds an empty state. A Tree must not be copied after first use.
type Tree struct {
	mu      sync.Mutex
	root    string
	current string
	nodes   map[string]*ThreadNode
}

// New returns a tree of one node, the root, named "root", holding an
// empty state; the root is the current node.
func New() *Tree {
	t := &Tree{}
	t.init()
	return t
}

// init makes the zero Tree a one-node tree. It runs under t.mu.
func (t *Tree) init() {
	if t.nodes != nil {
		return
	}
	id := ids.New()
	t.root, t.current = id, id
	t.nodes = map[string]*ThreadNode{id: {ID: id, State: agent.Initial().WithMetadata(MetadataNodeID, id), Name: rootName, Children: []string{}}}
}

// Root returns the root node.
func (t *Tree) Root() ThreadNode {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	return t.nodes[t.root].clone()
}

// Current returns the current node: the one History reads and Update
// writes.
func (t *Tree) Current() ThreadNode {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	return t.nodes[t.current].clone()
}

// Node returns the node with the given ID.
func (t *Tree) Node(id string) (ThreadNode, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	n, ok := t.nodes[id]
	if !ok {
		return ThreadNode{}, false
	}
	return n.clone(), true
}

// Nodes returns every node, in depth-first order from the root, children
// oldest first.
func (t *Tree) Nodes() []ThreadNode {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	out := make([]ThreadNode, 0, len(t.nodes))
	t.walk(func(n *ThreadNode) { out = append(out, n.clone()) })
	return out
}

// walk visits every node depth-first from the root without recursion (a
// decoded tree may be a path thousands of nodes deep). It runs under t.mu.
func (t *Tree) walk(visit func(*ThreadNode)) {
	stack := []string{t.root}
	for len(stack) > 0 {
		n := t.nodes[stack[len(stack)-1]]
		stack = stack[:len(stack)-1]
		visit(n)
		for i := len(n.Children) - 1; i >= 0; i-- {
			stack = append(stack, n.Children[i])
		}
	}
}

// Branch creates a child of node fromID holding a copy of its state
// (stamped with the child's ID under MetadataNodeID) and returns the
// child's ID (UAP-1.1 §7.1 branch). name is optional. The current node
// does not change: Checkout the new ID to work on the branch.
func (t *Tree) Branch(fromID, name string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	parent, ok := t.nodes[fromID]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrNodeNotFound, fromID)
	}
	id := ids.New()
	t.nodes[id] = &ThreadNode{ID: id, ParentID: fromID, State: parent.State.WithMetadata(MetadataNodeID, id), Name: name, Children: []string{}}
	parent.Children = append(parent.Children, id)
	return id, nil
}

// Checkout makes node nodeID the current node (UAP-1.1 §7.1 checkout).
func (t *Tree) Checkout(nodeID string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	if _, ok := t.nodes[nodeID]; !ok {
		return fmt.Errorf("%w: %q", ErrNodeNotFound, nodeID)
	}
	t.current = nodeID
	return nil
}

// History returns the AgentState from the root to the current node
// (UAP-1.1 §7.1 history): the current node's state, which is a full
// snapshot (see the package documentation). Pass it to an agent run and
// give the run's state to Update.
func (t *Tree) History() *agent.State {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	return t.nodes[t.current].State
}

// Update replaces the current node's state with state, typically the
// state an agent run returned. It fails with ErrWrongNode when state
// belongs to another node (it was taken from one, and a Checkout
// happened since), leaving the tree unchanged.
func (t *Tree) Update(state *agent.State) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	return t.set(t.current, state)
}

// Set replaces node nodeID's state with state. It is Update for a node
// named explicitly, for runs on several branches at once.
func (t *Tree) Set(nodeID string, state *agent.State) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	return t.set(nodeID, state)
}

// set runs under t.mu.
func (t *Tree) set(nodeID string, state *agent.State) error {
	n, ok := t.nodes[nodeID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNodeNotFound, nodeID)
	}
	state, err := stamp(nodeID, state)
	if err != nil {
		return err
	}
	n.State = state
	return nil
}

// stamp checks that state may be node id's state and returns it with
// MetadataNodeID set to id.
func stamp(id string, state *agent.State) (*agent.State, error) {
	if state == nil {
		return nil, fmt.Errorf("%w: nil state", ErrInvalidState)
	}
	if _, ok := state.Value(MetadataTree); ok {
		return nil, fmt.Errorf("%w: state %s carries a saved thread tree (metadata %q); it is a Save checkpoint, not a conversation", ErrInvalidState, state.ID(), MetadataTree)
	}
	v, ok := state.Value(MetadataNodeID)
	if !ok {
		return state.WithMetadata(MetadataNodeID, id), nil
	}
	if s, _ := v.(string); s != id {
		return nil, fmt.Errorf("%w: state %s belongs to node %v, not %s", ErrWrongNode, state.ID(), v, id)
	}
	return state, nil
}
