package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/checkpoint"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/sqlstore"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// The crash test (DESIGN §7): a child process — this test binary again —
// runs an agent that checkpoints after every step, and is killed (SIGKILL,
// no chance to clean up) once the store holds a checkpoint at a given
// step, possibly in the middle of a save. A second child resumes the
// session and is killed in turn; then this process resumes the session to
// completion, and the run must hold every step exactly once.

// Environment of the child process.
const (
	crashEnvStore   = "AGENTRY_CRASH_STORE" // "file" or "sqlite": run as the child
	crashEnvTarget  = "AGENTRY_CRASH_TARGET"
	crashEnvSession = "AGENTRY_CRASH_SESSION"
	crashEnvMode    = "AGENTRY_CRASH_MODE" // "start" or "resume"
)

// crashToolSteps is the number of steps asking for a tool; the run's last
// step (crashToolSteps+1) answers "done".
const crashToolSteps = 50

// killAt are the steps at which successive children are killed.
var killAt = []int{10, 25}

// childToolDelay paces a child's run: fast to the last kill point and a
// little beyond, so that kills land in saves, then slow — 20 steps of a
// second each, far beyond the parent's reaction even on a loaded machine
// — so that the parent always kills the child before it completes (the
// child is killed, so the slow steps cost the test nothing).
func childToolDelay(n int) time.Duration {
	if n <= killAt[len(killAt)-1]+5 {
		return 2 * time.Millisecond
	}
	return time.Second
}

// crashAgent builds the agent of the crash test: a function model asking
// for tool "work" until 50 results are in the conversation, numbering the
// calls from the conversation itself (call_01, call_02, …) so that a
// resumed run continues the numbering.
func crashAgent(t *testing.T, store agent.CheckpointStore, session string, delay func(int) time.Duration, onStep func(int)) *agent.Agent {
	t.Helper()
	model := scripted.NewFunc(func(ctx context.Context, req *llm.Request) (scripted.Step, error) {
		done := 0
		for _, m := range req.Messages {
			if m.Type() == llm.TypeToolResult {
				done++
			}
		}
		if done >= crashToolSteps {
			return scripted.Step{Text: "done"}, nil
		}
		n := done + 1
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: fmt.Sprintf("call_%02d", n), ToolName: "work",
			Arguments: map[string]any{"n": float64(n)}}}}, nil
	})
	work := llm.Tool{Name: "work", Run: func(ctx context.Context, args map[string]any) (any, error) {
		n, _ := args["n"].(float64)
		if delay != nil {
			time.Sleep(delay(int(n)))
		}
		return fmt.Sprintf("result %d", int(n)), nil
	}}
	var hooks agent.StrategyHooks
	if onStep != nil {
		hooks.OnStepStart = func(_ context.Context, step int, _ *agent.State) { onStep(step) }
	}
	a, err := agent.New(&agent.Options{
		LLMOptions:  llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{work}},
		Checkpoints: store, SessionID: session, Strategy: hooks,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func openCrashStore(t *testing.T, kind, target string) agent.CheckpointStore {
	t.Helper()
	switch kind {
	case "file":
		s, err := checkpoint.File(target)
		if err != nil {
			t.Fatal(err)
		}
		return s
	case "sqlite":
		s, err := sqlstore.Open(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Checkpoints()
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

// TestCrashChild is the child process of TestCrashResume; run directly it
// does nothing.
func TestCrashChild(t *testing.T) {
	kind := os.Getenv(crashEnvStore)
	if kind == "" {
		t.Skip("the child process of TestCrashResume")
	}
	session := os.Getenv(crashEnvSession)
	store := openCrashStore(t, kind, os.Getenv(crashEnvTarget))
	a := crashAgent(t, store, session, childToolDelay, nil)
	var err error
	if os.Getenv(crashEnvMode) == "resume" {
		_, err = a.Resume(t.Context(), session)
	} else {
		_, err = a.Generate(t.Context(), llm.Text("go"), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	a.FlushCheckpoints(t.Context())
	t.Error("the run completed: the parent should have killed this process")
}

func TestCrashResume(t *testing.T) {
	for _, kind := range []string{"file", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "checkpoints")
			if kind == "sqlite" {
				target = "sqlite://" + filepath.Join(t.TempDir(), "agentry.db")
			}
			testCrashResume(t, kind, target)
		})
	}
}

func testCrashResume(t *testing.T, kind, target string) {
	ctx := t.Context()
	store := openCrashStore(t, kind, target)
	session := ids.New()
	for i, step := range killAt {
		mode := "start"
		if i > 0 {
			mode = "resume"
		}
		seen := runAndKill(t, kind, target, session, mode, step, store)
		t.Logf("child %d (%s) killed with a checkpoint at step %d", i+1, mode, seen)
	}

	// The last checkpoint: whole, consistent, at least as new as its
	// metadata.
	ck, err := store.Load(ctx, session)
	if err != nil {
		t.Fatalf("Load after the crashes: %v", err)
	}
	meta, err := store.LoadMetadata(ctx, session)
	if err != nil {
		t.Fatalf("LoadMetadata after the crashes: %v", err)
	}
	if ck.Step() < killAt[len(killAt)-1] || meta.Step > ck.Step() {
		t.Fatalf("checkpoint at step %d, metadata at step %d: want a checkpoint at step ≥ %d, not older than its metadata", ck.Step(), meta.Step, killAt[len(killAt)-1])
	}
	checkRun(t, "checkpoint", ck, false)
	t.Logf("resuming from the checkpoint at step %d (metadata: step %d)", ck.Step(), meta.Step)
	if kind == "file" {
		temps, _ := filepath.Glob(filepath.Join(target, session, ".tmp-*"))
		t.Logf("%d temporary file(s) left by the kills", len(temps))
	}

	// Resume in this process, to completion.
	var steps []int
	a := crashAgent(t, store, session, nil, func(step int) { steps = append(steps, step) })
	res, err := a.Resume(ctx, session)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := a.FlushCheckpoints(ctx); err != nil {
		t.Fatal(err)
	}
	checkRun(t, "resumed run", res.State, true)
	if want := crashToolSteps + 1; res.State.Step() != want {
		t.Errorf("resumed run ended at step %d, want %d", res.State.Step(), want)
	}
	var wantSteps []int
	for s := ck.Step() + 1; s <= crashToolSteps+1; s++ {
		wantSteps = append(wantSteps, s)
	}
	if !slices.Equal(steps, wantSteps) {
		t.Errorf("resumed run's steps = %v, want %v (continuing from the checkpoint's step %d)", steps, wantSteps, ck.Step())
	}
	got := res.State.Messages()
	for i, m := range ck.Messages() {
		if i >= len(got) || got[i].Info().ID != m.Info().ID {
			t.Fatalf("resumed state's message %d is not the checkpoint's", i)
		}
	}
	if m, err := store.LoadMetadata(ctx, session); err != nil || m.Step != crashToolSteps+1 {
		t.Errorf("final checkpoint metadata = %+v, %v; want step %d", m, err, crashToolSteps+1)
	}
	if saved, failed := a.CheckpointStats(); failed != 0 || saved == 0 {
		t.Errorf("checkpoint stats: %d saved, %d failed", saved, failed)
	}
	if kind == "file" {
		if temps, _ := filepath.Glob(filepath.Join(target, session, ".tmp-*")); len(temps) > 0 {
			t.Errorf("temporary files left after the resumed run's saves: %q", temps)
		}
	}
}

// runAndKill starts a child running (mode "start") or resuming the
// session, and kills it once the store holds a checkpoint at step ≥
// killStep. It returns the step seen.
func runAndKill(t *testing.T, kind, target, session, mode string, killStep int, store agent.CheckpointStore) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashEnvStore+"="+kind, crashEnvTarget+"="+target,
		crashEnvSession+"="+session, crashEnvMode+"="+mode)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("child (%s) exited before a checkpoint at step %d: %v\n%s", mode, killStep, err, out.Bytes())
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("no checkpoint at step %d after 60 s\n%s", killStep, out.Bytes())
		default:
		}
		m, err := store.LoadMetadata(t.Context(), session)
		switch {
		case err == nil && m.Step >= killStep:
			// A random pause, so that the kill lands anywhere in a step,
			// often in the middle of a save.
			time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err == nil {
				t.Fatalf("child (%s) completed before it was killed\n%s", mode, out.Bytes())
			}
			return m.Step
		case err != nil && !errors.Is(err, agent.ErrNoCheckpoint):
			t.Fatalf("LoadMetadata while the child runs: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkRun checks a state of the crash test's run: the user input once,
// then (assistant call_N, tool result N) for N = 1, 2, … with no gap and
// no repeat, as many as the step counter says; complete, also the final
// "done" reply after 50 tool steps. Message IDs are unique.
func checkRun(t *testing.T, what string, s *agent.State, complete bool) {
	t.Helper()
	msgs := s.Messages()
	seen := map[string]bool{}
	for i, m := range msgs {
		if id := m.Info().ID; seen[id] {
			t.Fatalf("%s: message %d (%s) appears twice", what, i, id)
		}
		seen[m.Info().ID] = true
	}
	if len(msgs) == 0 || msgs[0].Type() != llm.TypeUser || msgs[0].Text() != "go" {
		t.Fatalf("%s: does not start with the user input", what)
	}
	body := msgs[1:]
	if complete {
		last, ok := body[len(body)-1].(*llm.AssistantMessage)
		if !ok || last.HasToolCalls() || last.Text() != "done" {
			t.Fatalf("%s: does not end with the final reply", what)
		}
		body = body[:len(body)-1]
	}
	if len(body)%2 != 0 {
		t.Fatalf("%s: %d messages after the input: not whole steps", what, len(body))
	}
	for i := 0; i < len(body); i += 2 {
		n := i/2 + 1
		id := fmt.Sprintf("call_%02d", n)
		call, ok1 := body[i].(*llm.AssistantMessage)
		result, ok2 := body[i+1].(*llm.ToolResultMessage)
		if !ok1 || !ok2 || len(call.ToolCalls) != 1 || call.ToolCalls[0].ToolCallID != id ||
			len(result.Results) != 1 || result.Results[0].ToolCallID != id || result.Results[0].Result != "result "+strconv.Itoa(n) {
			t.Fatalf("%s: step %d is not (assistant %s, tool_result %s): %s %s", what, n, id, id, body[i].Type(), body[i+1].Type())
		}
	}
	steps := len(body) / 2
	if complete {
		steps++
		if len(body)/2 != crashToolSteps {
			t.Fatalf("%s: %d tool steps, want %d", what, len(body)/2, crashToolSteps)
		}
	}
	if s.Step() != steps {
		t.Fatalf("%s: step counter %d, but the messages hold %d steps", what, s.Step(), steps)
	}
}
