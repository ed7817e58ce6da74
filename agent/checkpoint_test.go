package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// gatedStore is a CheckpointStore whose Save waits for a value on release
// (one value, one save) and records the saved steps in order. It ignores
// Save's context: a store that hangs. Only Save is expected.
type gatedStore struct {
	started chan int // the step of each Save that begins (buffered)
	release chan struct{}

	mu    sync.Mutex
	steps []int
}

func newGatedStore() *gatedStore {
	return &gatedStore{started: make(chan int, 100), release: make(chan struct{})}
}

func (s *gatedStore) Save(_ context.Context, _ string, st *agent.State) error {
	s.started <- st.Step()
	<-s.release
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

// panicStore is a CheckpointStore whose Save panics.
type panicStore struct{ memStore }

func (*panicStore) Save(context.Context, string, *agent.State) error { panic("store exploded") }

// syncLog is a log of strings safe for concurrent use.
type syncLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *syncLog) add(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *syncLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// A Save that panics is a failed save like any other (§12.3 "failed
// saves SHOULD log errors but MUST NOT throw"): logged, counted, and the
// run goes on — the process does not crash.
func TestUAP_12_3_PanickingSaveIsAFailedSave(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	m := scripted.NewT(t, toolStep("1"), scripted.Step{Text: "done"})
	a := newAgent(t, m, agent.Options{Checkpoints: &panicStore{}, Logger: logger})
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatalf("run failed because of the store: %v", err)
	}
	if res.Turn.Text() != "done" {
		t.Errorf("text %q", res.Turn.Text())
	}
	if err := a.FlushCheckpoints(context.Background()); err != nil {
		t.Fatal(err)
	}
	if saved, failed := a.CheckpointStats(); saved != 0 || failed != 2 {
		t.Errorf("stats: %d saved, %d failed; want 0 and 2", saved, failed)
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if n := strings.Count(out, "checkpoint save failed"); n != 2 || !strings.Contains(out, "store exploded") || !strings.Contains(out, "stack=") {
		t.Errorf("log (want 2 failures with the panic and its stack):\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// A full checkpoint queue holds the step (back-pressure) instead of
// growing or dropping states: with CheckpointQueue 1 and a store that
// does not answer, step 2 waits in the queue while step 1 is written,
// and step 3 cannot queue its state until the store takes step 2.
func TestUAP_12_3_FullCheckpointQueueHoldsTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newGatedStore()
		var log syncLog
		m := scripted.NewT(t, toolStep("1"), toolStep("2"), toolStep("3"), scripted.Step{Text: "done"})
		a := newAgent(t, m, agent.Options{Checkpoints: store, CheckpointQueue: 1, Logger: slog.New(slog.DiscardHandler),
			Strategy: agent.StrategyHooks{
				OnStepEnd: func(_ context.Context, step int, _ *agent.Result) { log.add("end %d", step) },
				// StopCondition runs once the step's checkpoint is queued.
				StopCondition: func(_ context.Context, s *agent.State) bool { log.add("queued %d", s.Step()); return false },
			}})
		done := make(chan error, 1)
		go func() {
			_, err := a.Generate(context.Background(), llm.Text("go"), nil)
			done <- err
		}()
		want := []string{"end 1", "queued 1", "end 2", "queued 2", "end 3"}
		synctest.Wait()
		if diff := cmp.Diff(want, log.get()); diff != "" {
			t.Fatalf("while step 1 is written (-want +got):\n%s", diff)
		}
		store.release <- struct{}{} // step 1 written: step 2 leaves the queue, step 3 queues
		synctest.Wait()
		want = append(want, "queued 3", "end 4")
		if diff := cmp.Diff(want, log.get()); diff != "" {
			t.Fatalf("after step 1 was written (-want +got):\n%s", diff)
		}
		for range 3 {
			store.release <- struct{}{}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want = append(want, "queued 4")
		if diff := cmp.Diff(want, log.get()); diff != "" {
			t.Errorf("at the end (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{1, 2, 3, 4}, store.saved()); diff != "" {
			t.Errorf("saved steps (-want +got):\n%s", diff)
		}
	})
}

// CoalesceCheckpoints is the explicit opt-out: the newest state replaces
// the waiting one and steps never wait, so a slow store skips steps.
func TestUAP_12_3_CoalescedCheckpointsKeepTheNewest(t *testing.T) {
	store := newGatedStore()
	// Step 2's tool waits until step 1's save is under way, so that the
	// states of steps 2–4 arrive while it is.
	wait := llm.Tool{Name: "echo", Parameters: llm.Schema{"type": "object"}, Run: func(ctx context.Context, args map[string]any) (any, error) {
		if args["v"] == "2" {
			select {
			case <-store.started:
			case <-time.After(20 * time.Second):
				return nil, fmt.Errorf("step 1's save never started")
			}
		}
		return "ok", nil
	}}
	completed := make(chan struct{})
	m := scripted.NewT(t, toolStep("1"), toolStep("2"), toolStep("3"), scripted.Step{Text: "done"})
	a := newAgent(t, m, agent.Options{LLMOptions: llm.LLMOptions{Tools: []llm.Tool{wait}}, Checkpoints: store, CoalesceCheckpoints: true,
		Strategy: agent.StrategyHooks{OnComplete: func(context.Context, *agent.Result) { close(completed) }}})
	done := make(chan error, 1)
	go func() {
		_, err := a.Generate(context.Background(), llm.Text("go"), nil)
		done <- err
	}()
	select {
	case <-completed: // every step ended while step 1's save hangs
	case <-time.After(20 * time.Second):
		close(store.release)
		t.Fatal("a coalescing queue made a step wait for the store")
	}
	store.release <- struct{}{}
	<-store.started
	store.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 4}, store.saved()); diff != "" {
		t.Errorf("saved steps (-want +got):\n%s", diff)
	}
}

func TestCheckpointQueueMustNotBeNegative(t *testing.T) {
	_, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.New().Ref()}, CheckpointQueue: -1})
	if err == nil || !strings.Contains(err.Error(), "CheckpointQueue") {
		t.Errorf("err = %v", err)
	}
}
