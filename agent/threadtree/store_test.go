package threadtree_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/threadtree"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// memStore is an in-memory agent.CheckpointStore that, like a durable
// store, keeps each checkpoint as AgentStateJSON and decodes it on Load.
type memStore struct {
	mu    sync.Mutex
	saved map[string][]byte
	meta  map[string]agent.CheckpointMetadata
}

func newMemStore() *memStore {
	return &memStore{saved: map[string][]byte{}, meta: map[string]agent.CheckpointMetadata{}}
}

func (s *memStore) Save(ctx context.Context, sessionID string, state *agent.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := state.MarshalJSON()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saved[sessionID] = data
	s.meta[sessionID] = agent.NewCheckpointMetadata(sessionID, state)
	return nil
}

func (s *memStore) Load(_ context.Context, sessionID string) (*agent.State, error) {
	s.mu.Lock()
	data, ok := s.saved[sessionID]
	s.mu.Unlock()
	if !ok {
		return nil, agent.ErrNoCheckpoint
	}
	return agent.FromJSON(data)
}

func (s *memStore) LoadMetadata(_ context.Context, sessionID string) (*agent.CheckpointMetadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.meta[sessionID]
	if !ok {
		return nil, agent.ErrNoCheckpoint
	}
	return &m, nil
}

func (s *memStore) Delete(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.saved, sessionID)
	delete(s.meta, sessionID)
	return nil
}

func (s *memStore) List(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.saved))
	for id := range s.saved {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

var _ agent.CheckpointStore = (*memStore)(nil)

func TestUAP_12_2_TreePersistsThroughCheckpointStore(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	session := ids.New()
	m := scripted.NewT(t, scripted.Step{Text: "Hello!"}, scripted.Step{Text: "Bonjour !"}, scripted.Step{Text: "Ça va bien."})
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(tree *threadtree.Tree, prompt string) {
		t.Helper()
		res, err := a.Ask(ctx, llm.Text(prompt), tree.History())
		if err != nil {
			t.Fatal(err)
		}
		mustUpdate(t, tree, res.State)
	}

	tree := threadtree.New()
	ask(tree, "Hi")
	fr := mustBranch(t, tree, tree.Root().ID, "french")
	mustCheckout(t, tree, fr)
	ask(tree, "En français")
	if err := tree.Save(ctx, store, session); err != nil {
		t.Fatal(err)
	}

	loaded, err := threadtree.Load(ctx, store, session)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tree.MarshalJSON()
	got, _ := loaded.MarshalJSON()
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("loaded tree (-want +got):\n%s", diff)
	}

	// The loaded tree goes on where the saved one stopped, and saving it
	// again replaces the checkpoint.
	ask(loaded, "Ça va ?")
	if err := loaded.Save(ctx, store, session); err != nil {
		t.Fatal(err)
	}
	again, err := threadtree.Load(ctx, store, session)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Hi", "Hello!", "En français", "Bonjour !", "Ça va ?", "Ça va bien."}, texts(again.History())); diff != "" {
		t.Errorf("history after reload (-want +got):\n%s", diff)
	}
	if root, _ := again.Node(again.Root().ID); !cmp.Equal(texts(root.State), []string{"Hi", "Hello!"}) {
		t.Errorf("root after reload: %v", texts(root.State))
	}
	if list, _ := store.List(ctx); !cmp.Equal(list, []string{session}) {
		t.Errorf("store sessions %v, want one", list)
	}

	// The checkpoint is a state, not a conversation: a tree refuses it.
	carrier, err := store.Load(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if carrier.Len() != 0 {
		t.Errorf("checkpoint has %d messages", carrier.Len())
	}
	if err := again.Update(carrier); !errors.Is(err, threadtree.ErrInvalidState) {
		t.Errorf("Update(checkpoint) err = %v, want ErrInvalidState", err)
	}
}

func TestUAP_12_2_LoadFailures(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	if _, err := threadtree.Load(ctx, store, ids.New()); !errors.Is(err, agent.ErrNoCheckpoint) {
		t.Errorf("Load(missing session) err = %v, want agent.ErrNoCheckpoint", err)
	}

	plain := ids.New()
	if err := store.Save(ctx, plain, agent.Initial().WithMessage(user("hi"))); err != nil {
		t.Fatal(err)
	}
	if _, err := threadtree.Load(ctx, store, plain); !errors.Is(err, threadtree.ErrNoTree) {
		t.Errorf("Load(plain state) err = %v, want ErrNoTree", err)
	}

	notString := ids.New()
	if err := store.Save(ctx, notString, agent.Initial().WithMetadata(threadtree.MetadataTree, map[string]any{"rootId": "x"})); err != nil {
		t.Fatal(err)
	}
	if _, err := threadtree.Load(ctx, store, notString); !errors.Is(err, threadtree.ErrNoTree) {
		t.Errorf("Load(non-string tree) err = %v, want ErrNoTree", err)
	}

	broken := ids.New()
	if err := store.Save(ctx, broken, agent.Initial().WithMetadata(threadtree.MetadataTree, `{"rootId":"x","currentId":"x","nodes":[]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := threadtree.Load(ctx, store, broken); !errors.Is(err, threadtree.ErrInvalidTree) {
		t.Errorf("Load(broken tree) err = %v, want ErrInvalidTree", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := threadtree.New().Save(cancelled, store, ids.New()); !errors.Is(err, context.Canceled) {
		t.Errorf("Save(cancelled) err = %v, want context.Canceled", err)
	}
}
