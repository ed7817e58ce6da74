package execution_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// gatedStore is a CheckpointStore whose Save waits for a value on release
// (one value, one save) and records the saved steps in order. Only Save
// is expected.
type gatedStore struct {
	release chan struct{}

	mu    sync.Mutex
	steps []int
}

func (s *gatedStore) Save(ctx context.Context, _ string, st *agent.State) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	s.steps = append(s.steps, st.Step())
	s.mu.Unlock()
	return nil
}

func (s *gatedStore) saved() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.steps...)
}

func (*gatedStore) Load(context.Context, string) (*agent.State, error) { panic("unexpected Load") }
func (*gatedStore) LoadMetadata(context.Context, string) (*agent.CheckpointMetadata, error) {
	panic("unexpected LoadMetadata")
}
func (*gatedStore) Delete(context.Context, string) error   { panic("unexpected Delete") }
func (*gatedStore) List(context.Context) ([]string, error) { panic("unexpected List") }

// TestUAP_12_3_EveryStepIsCheckpointedInOrder: "checkpoints MUST be saved
// after each step_end" — with a store slower than the steps (it answers
// nothing until the run has finished every step), every strategy still
// saves every step's state, in step order, and the steps did not wait for
// it; the run returns once its checkpoints are written.
func TestUAP_12_3_EveryStepIsCheckpointedInOrder(t *testing.T) {
	type build func() (llm.ModelReference, agent.ExecutionStrategy)
	cases := map[string]struct {
		build build
		steps int
	}{
		"loop": {func() (llm.ModelReference, agent.ExecutionStrategy) {
			m := scripted.NewT(t, toolStep("1"), toolStep("2"), toolStep("3"), toolStep("4"), scripted.Step{Text: "done"})
			return m.Ref(), execution.Loop(&execution.LoopOptions{})
		}, 5},
		"react": {func() (llm.ModelReference, agent.ExecutionStrategy) {
			var steps []scripted.Step
			for _, id := range []string{"1", "2", "3"} {
				steps = append(steps, scripted.Step{Text: "think " + id}, toolStep(id))
			}
			steps = append(steps, scripted.Step{Text: "think more"}, scripted.Step{Text: "done"})
			m := scripted.NewT(t, steps...)
			return m.Ref(), execution.ReAct(&execution.ReActOptions{})
		}, 4},
		"plan": {func() (llm.ModelReference, agent.ExecutionStrategy) {
			pm := &planModel{plans: []any{planOf([3]string{"a", "call echo", ""}, [3]string{"b", "b", "a"}, [3]string{"c", "c", "b"})}}
			return scripted.NewFunc(pm.reply).Ref(), mustPlan(&execution.PlanOptions{})
		}, 5}, // plan + 3 steps + answer
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			store := &gatedStore{release: make(chan struct{})}
			completed := make(chan struct{})
			var ends []int
			ref, strategy := c.build()
			a := newAgent(t, ref, strategy, agent.Options{Checkpoints: store, Strategy: agent.StrategyHooks{
				OnStepEnd:  func(_ context.Context, step int, _ *agent.Result) { ends = append(ends, step) },
				OnComplete: func(context.Context, *agent.Result) { close(completed) },
			}})
			done := make(chan error, 1)
			go func() {
				_, err := a.Generate(context.Background(), llm.Text("go"), nil)
				done <- err
			}()
			select {
			case <-completed:
			case err := <-done:
				t.Fatalf("the run ended before it completed: %v", err)
			case <-time.After(20 * time.Second):
				close(store.release)
				t.Fatal("the steps waited for the store")
			}
			if got := store.saved(); len(got) != 0 {
				t.Fatalf("saved %v before any save was released", got)
			}
			var err error
		run:
			for {
				select {
				case store.release <- struct{}{}:
				case err = <-done:
					break run
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			atReturn := store.saved()
			flushed := make(chan struct{})
			go func() { a.FlushCheckpoints(context.Background()); close(flushed) }()
		flush:
			for {
				select {
				case store.release <- struct{}{}:
				case <-flushed:
					break flush
				}
			}
			var want []int
			for s := 1; s <= c.steps; s++ {
				want = append(want, s)
			}
			if diff := cmp.Diff(want, ends); diff != "" {
				t.Fatalf("step_end (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, store.saved()); diff != "" {
				t.Errorf("saved steps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, atReturn); diff != "" {
				t.Errorf("saved steps when the run returned (-want +got):\n%s", diff)
			}
			if saved, failed := a.CheckpointStats(); saved != int64(c.steps) || failed != 0 {
				t.Errorf("stats: %d saved, %d failed", saved, failed)
			}
		})
	}
}
