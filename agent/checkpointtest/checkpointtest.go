// Package checkpointtest is the conformance suite of the agent.CheckpointStore
// interface (UAP-1.1 §12.2, github.com/ProviderProtocol/agents): every implementation —
// the file store of internal/checkpoint, internal/memstore, internal/sqlstore —
// passes Run, as every slog handler passes testing/slogtest.
//
//	func TestUAP_12_2_MyStore(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T) agent.CheckpointStore { return newMyStore(t) })
//	}
package checkpointtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/google/go-cmp/cmp"
)

// Run checks the store that newStore returns against the behaviour UAP-1.1
// §12.2 and agent.CheckpointStore require. Each case calls newStore for a
// fresh, empty store; newStore releases it through t.Cleanup. The store
// must be safe for concurrent use: run the suite with -race.
func Run(t *testing.T, newStore func(t *testing.T) agent.CheckpointStore) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, s agent.CheckpointStore)
	}{
		{"SaveLoadRoundTrip", testRoundTrip},
		{"LatestWins", testLatestWins},
		{"Metadata", testMetadata},
		{"NoCheckpoint", testNoCheckpoint},
		{"Delete", testDelete},
		{"List", testList},
		{"ValidSessionIDs", testValidIDs},
		{"InvalidSessionIDs", testInvalidIDs},
		{"ContextCancelled", testCancelled},
		{"ConcurrentSessions", testConcurrentSessions},
		{"ConcurrentSaves", testConcurrentSaves},
		{"ReadersSeeWholeCheckpoints", testReaders},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore(t)) })
	}
}

// SampleState returns a state exercising every part of AgentStateJSON
// (UAP-1.1 §12.1): messages of the three types with ids, timestamps,
// provider metadata, image, document and audio blocks with raw bytes,
// reasoning, tool calls and results; step, nested metadata (with agentId),
// reasoning traces, a plan and a sub-agent trace. Each call returns a
// state with new IDs.
func SampleState() *agent.State {
	img := llm.ImageFromBytes([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}, "image/png")
	user := llm.NewUserMessage(llm.Text("Summarise <today's> incidents & report"), img,
		llm.DocumentFromText("incident 1: disk full", "incidents.txt"),
		llm.AudioFromBytes([]byte{1, 2, 3, 4}, "audio/wav"))
	user.Metadata = llm.Metadata{"anthropic": map[string]any{"cache_control": map[string]any{"type": "ephemeral"}}}
	call := llm.ToolCall{ToolCallID: "call_1", ToolName: "search", Arguments: map[string]any{"q": "incidents", "limit": 5.0, "tags": []any{"ops", "p1"}}}
	asst := llm.NewAssistantMessage([]llm.ContentBlock{llm.ReasoningBlock{Text: "I should search."}, llm.Text("Searching…")}, []llm.ToolCall{call})
	res := llm.NewToolResultMessage([]llm.ToolResult{
		{ToolCallID: "call_1", Result: map[string]any{"hits": []any{"disk full", "oom"}, "total": 2.0}},
		{ToolCallID: "call_2", Result: "timeout", IsError: true},
	})
	final := llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("Two incidents: disk full, OOM.")}, nil)
	start := ids.Now()
	return agent.Initial().
		WithMessages(user, asst, res, final).
		WithStep(3).
		WithMetadata(agent.MetadataAgentID, "agent-7").
		WithMetadata("tenant", map[string]any{"id": "acme", "tier": 2.0, "flags": []any{true, nil, "x"}}).
		WithReasoning("The user wants a summary.").
		WithReasoning("Search first.").
		WithPlan([]agent.PlanStep{
			{ID: "s1", Description: "search", Tool: "search", Status: agent.PlanCompleted},
			{ID: "s2", Description: "summarise", DependsOn: []string{"s1"}, Status: agent.PlanInProgress},
		}).
		WithSubagentTrace(agent.SubagentTrace{SubagentID: ids.New(), SubagentType: "researcher", ParentToolCallID: "call_1",
			Prompt: "find incidents", StartTime: start, EndTime: start.Add(1500 * time.Millisecond), Success: true, Result: "2 found",
			ToolExecutions: []agent.ToolExecutionTrace{{ToolName: "grep", ToolCallID: "g1", Arguments: map[string]any{"pattern": "ERR"}, Result: "2 lines", Duration: 12}},
			Usage:          &llm.TokenUsage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}})
}

func mustJSON(t *testing.T, s *agent.State) []byte {
	t.Helper()
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func save(t *testing.T, s agent.CheckpointStore, id string, state *agent.State) {
	t.Helper()
	if err := s.Save(t.Context(), id, state); err != nil {
		t.Fatalf("Save(%q): %v", id, err)
	}
}

func load(t *testing.T, s agent.CheckpointStore, id string) *agent.State {
	t.Helper()
	state, err := s.Load(t.Context(), id)
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	if state == nil {
		t.Fatalf("Load(%q) = nil, nil", id)
	}
	return state
}

func loadMeta(t *testing.T, s agent.CheckpointStore, id string) *agent.CheckpointMetadata {
	t.Helper()
	m, err := s.LoadMetadata(t.Context(), id)
	if err != nil {
		t.Fatalf("LoadMetadata(%q): %v", id, err)
	}
	if m == nil {
		t.Fatalf("LoadMetadata(%q) = nil, nil", id)
	}
	return m
}

func list(t *testing.T, s agent.CheckpointStore) []string {
	t.Helper()
	got, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got = slices.Clone(got)
	slices.Sort(got)
	return got
}

// testRoundTrip: the loaded state is the saved one, byte for byte in its
// JSON form, with message ids, timestamps and raw bytes kept.
func testRoundTrip(t *testing.T, s agent.CheckpointStore) {
	want := SampleState()
	id := ids.New()
	save(t, s, id, want)
	got := load(t, s, id)
	if w, g := mustJSON(t, want), mustJSON(t, got); !bytes.Equal(w, g) {
		t.Fatalf("state JSON after reload differs (-want +got):\n%s", cmp.Diff(string(w), string(g)))
	}
	if got.ID() != want.ID() || got.Step() != want.Step() || got.Len() != want.Len() {
		t.Errorf("loaded id/step/len = %s/%d/%d, want %s/%d/%d", got.ID(), got.Step(), got.Len(), want.ID(), want.Step(), want.Len())
	}
	wm, gm := want.Messages(), got.Messages()
	for i := range min(len(wm), len(gm)) {
		wi, gi := wm[i].Info(), gm[i].Info()
		if wm[i].Type() != gm[i].Type() || wi.ID != gi.ID || !wi.Timestamp.Equal(gi.Timestamp) {
			t.Errorf("message %d: got %s %s %v, want %s %s %v", i, gm[i].Type(), gi.ID, gi.Timestamp, wm[i].Type(), wi.ID, wi.Timestamp)
		}
	}
	if imgs := llm.BlocksOf[llm.ImageBlock](gm[0]); len(imgs) != 1 {
		t.Errorf("user message images = %d, want 1", len(imgs))
	} else if raw, _ := imgs[0].Source.Raw(); !bytes.Equal(raw, []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}) {
		t.Errorf("image bytes = %x", raw)
	}
	if diff := cmp.Diff(want.Plan(), got.Plan()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Metadata(), got.Metadata()); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	// An empty state round-trips too.
	empty := agent.Initial()
	save(t, s, "empty", empty)
	if w, g := mustJSON(t, empty), mustJSON(t, load(t, s, "empty")); !bytes.Equal(w, g) {
		t.Errorf("empty state: got %s, want %s", g, w)
	}
}

// testLatestWins: Load returns the last state saved; every save has a new
// checkpoint ID.
func testLatestWins(t *testing.T, s agent.CheckpointStore) {
	id := ids.New()
	state := SampleState()
	seen := map[string]bool{}
	var last *agent.State
	for step := 4; step <= 7; step++ {
		last = state.WithStep(step).WithReasoning(fmt.Sprintf("step %d", step))
		save(t, s, id, last)
		m := loadMeta(t, s, id)
		if m.Step != step {
			t.Errorf("after saving step %d: metadata step %d", step, m.Step)
		}
		if !ids.Valid(m.CheckpointID) || seen[m.CheckpointID] {
			t.Errorf("checkpoint ID %q not a new UUIDv4", m.CheckpointID)
		}
		seen[m.CheckpointID] = true
	}
	if got := load(t, s, id); !bytes.Equal(mustJSON(t, got), mustJSON(t, last)) {
		t.Errorf("Load returned step %d (state %s), want the last save, step 7 (state %s)", got.Step(), got.ID(), last.ID())
	}
	// An older state saved last wins too: the store keeps the latest save,
	// not the highest step.
	save(t, s, id, state)
	if got := load(t, s, id); got.ID() != state.ID() || loadMeta(t, s, id).Step != state.Step() {
		t.Errorf("after saving step %d again: Load step %d", state.Step(), got.Step())
	}
}

// testMetadata: sessionId, a UUIDv4 checkpointId, the save's time, the
// state's step, and agentId from the state's metadata or "unknown".
func testMetadata(t *testing.T, s agent.CheckpointStore) {
	for _, c := range []struct {
		name    string
		state   *agent.State
		agentID string
	}{
		{"agentId", SampleState().WithStep(12), "agent-7"},
		{"no agentId", agent.Initial().WithMessage(llm.NewUserMessage(llm.Text("hi"))).WithStep(1), "unknown"},
		{"empty agentId", agent.Initial().WithMetadata(agent.MetadataAgentID, ""), "unknown"},
		{"non-string agentId", agent.Initial().WithMetadata(agent.MetadataAgentID, 42.0).WithStep(2), "unknown"},
	} {
		id := ids.New()
		before := time.Now().Add(-time.Millisecond)
		save(t, s, id, c.state)
		after := time.Now().Add(time.Millisecond)
		m := loadMeta(t, s, id)
		if m.SessionID != id || m.Step != c.state.Step() || m.AgentID != c.agentID || !ids.Valid(m.CheckpointID) {
			t.Errorf("%s: metadata %+v, want sessionId %s, step %d, agentId %q, a UUIDv4 checkpointId", c.name, *m, id, c.state.Step(), c.agentID)
		}
		if m.Timestamp.Before(before) || m.Timestamp.After(after) {
			t.Errorf("%s: timestamp %v not within the save [%v, %v]", c.name, m.Timestamp, before, after)
		}
		// The metadata's JSON form (what the file store writes) round-trips.
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back agent.CheckpointMetadata
		if err := back.UnmarshalJSON(b); err != nil || !back.Timestamp.Equal(m.Timestamp) || back.CheckpointID != m.CheckpointID {
			t.Errorf("%s: metadata JSON %s does not round-trip: %v", c.name, b, err)
		}
	}
}

// testNoCheckpoint: Load and LoadMetadata of an unknown session report
// agent.ErrNoCheckpoint with a nil result.
func testNoCheckpoint(t *testing.T, s agent.CheckpointStore) {
	save(t, s, "other", SampleState())
	for _, id := range []string{ids.New(), "never-saved", "othe", "other-"} {
		if st, err := s.Load(t.Context(), id); !errors.Is(err, agent.ErrNoCheckpoint) || st != nil {
			t.Errorf("Load(%q) = %v, %v; want nil, ErrNoCheckpoint", id, st, err)
		}
		if m, err := s.LoadMetadata(t.Context(), id); !errors.Is(err, agent.ErrNoCheckpoint) || m != nil {
			t.Errorf("LoadMetadata(%q) = %v, %v; want nil, ErrNoCheckpoint", id, m, err)
		}
	}
}

// testDelete: a deleted session is gone from Load, LoadMetadata and List;
// others stay; deleting a missing session is fine; a deleted session can
// be saved again.
func testDelete(t *testing.T, s agent.CheckpointStore) {
	a, b := ids.New(), ids.New()
	save(t, s, a, SampleState())
	save(t, s, b, SampleState())
	if err := s.Delete(t.Context(), a); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Load(t.Context(), a); !errors.Is(err, agent.ErrNoCheckpoint) {
		t.Errorf("Load after Delete: %v, want ErrNoCheckpoint", err)
	}
	if _, err := s.LoadMetadata(t.Context(), a); !errors.Is(err, agent.ErrNoCheckpoint) {
		t.Errorf("LoadMetadata after Delete: %v, want ErrNoCheckpoint", err)
	}
	load(t, s, b)
	if got := list(t, s); !slices.Equal(got, []string{b}) {
		t.Errorf("List after Delete = %q, want [%s]", got, b)
	}
	for _, id := range []string{a, ids.New()} {
		if err := s.Delete(t.Context(), id); err != nil {
			t.Errorf("Delete(%q) of a missing session: %v", id, err)
		}
	}
	again := SampleState().WithStep(9)
	save(t, s, a, again)
	if got := load(t, s, a); got.ID() != again.ID() || loadMeta(t, s, a).Step != 9 {
		t.Errorf("save after Delete: Load gave state %s step %d", got.ID(), got.Step())
	}
}

// testList: List names exactly the sessions with a checkpoint.
func testList(t *testing.T, s agent.CheckpointStore) {
	if got := list(t, s); len(got) != 0 {
		t.Fatalf("List of an empty store = %q", got)
	}
	want := []string{ids.New(), ids.New(), ids.New(), "session-b", "session-a"}
	for _, id := range want {
		save(t, s, id, agent.Initial())
		save(t, s, id, SampleState()) // twice: listed once
	}
	slices.Sort(want)
	if got := list(t, s); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
}

// validIDs are unusual session IDs that every store accepts.
var validIDs = []string{"a", "A.b_c-d:e@f+g", "with spaces", "ünïcödé-会话", "x.y.z", "trailing.", strings.Repeat("s", agent.MaxSessionIDLen)}

func testValidIDs(t *testing.T, s agent.CheckpointStore) {
	for _, id := range validIDs {
		state := SampleState()
		save(t, s, id, state)
		if got := load(t, s, id); got.ID() != state.ID() {
			t.Errorf("Load(%q) = state %s, want %s", id, got.ID(), state.ID())
		}
		if m := loadMeta(t, s, id); m.SessionID != id {
			t.Errorf("LoadMetadata(%q).SessionID = %q", id, m.SessionID)
		}
	}
	want := slices.Clone(validIDs)
	slices.Sort(want)
	if got := list(t, s); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	for _, id := range validIDs {
		if err := s.Delete(t.Context(), id); err != nil {
			t.Errorf("Delete(%q): %v", id, err)
		}
	}
	if got := list(t, s); len(got) != 0 {
		t.Errorf("List after deleting all = %q", got)
	}
}

// invalidIDs are session IDs every store rejects: a store must never
// write outside its own namespace.
var invalidIDs = []string{"", ".", "..", "../escape", "../../etc/passwd", "a/b", "/abs", `a\b`, `..\x`, "a..b",
	".hidden", "nul\x00byte", "new\nline", "tab\tx", "del\x7f", "bad\xffutf8", strings.Repeat("s", agent.MaxSessionIDLen+1)}

func testInvalidIDs(t *testing.T, s agent.CheckpointStore) {
	ctx := t.Context()
	for _, id := range invalidIDs {
		if err := s.Save(ctx, id, SampleState()); !errors.Is(err, agent.ErrInvalidSessionID) {
			t.Errorf("Save(%q) = %v, want ErrInvalidSessionID", id, err)
		}
		if st, err := s.Load(ctx, id); !errors.Is(err, agent.ErrInvalidSessionID) || st != nil {
			t.Errorf("Load(%q) = %v, %v; want ErrInvalidSessionID", id, st, err)
		}
		if m, err := s.LoadMetadata(ctx, id); !errors.Is(err, agent.ErrInvalidSessionID) || m != nil {
			t.Errorf("LoadMetadata(%q) = %v, %v; want ErrInvalidSessionID", id, m, err)
		}
		if err := s.Delete(ctx, id); !errors.Is(err, agent.ErrInvalidSessionID) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidSessionID", id, err)
		}
	}
	if got := list(t, s); len(got) != 0 {
		t.Errorf("List after rejected saves = %q", got)
	}
}

// testCancelled: every operation honours a cancelled context, and a
// cancelled Save or Delete changes nothing.
func testCancelled(t *testing.T, s agent.CheckpointStore) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	id := ids.New()
	if err := s.Save(cancelled, id, SampleState()); !errors.Is(err, context.Canceled) {
		t.Errorf("Save with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Load(t.Context(), id); !errors.Is(err, agent.ErrNoCheckpoint) {
		t.Errorf("Load after a cancelled Save = %v, want ErrNoCheckpoint", err)
	}
	state := SampleState()
	save(t, s, id, state)
	if st, err := s.Load(cancelled, id); !errors.Is(err, context.Canceled) || st != nil {
		t.Errorf("Load with a cancelled context = %v, %v; want context.Canceled", st, err)
	}
	if m, err := s.LoadMetadata(cancelled, id); !errors.Is(err, context.Canceled) || m != nil {
		t.Errorf("LoadMetadata with a cancelled context = %v, %v; want context.Canceled", m, err)
	}
	if _, err := s.List(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context = %v, want context.Canceled", err)
	}
	if err := s.Delete(cancelled, id); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete with a cancelled context = %v, want context.Canceled", err)
	}
	if got := load(t, s, id); got.ID() != state.ID() {
		t.Errorf("after a cancelled Delete: Load = state %s, want %s", got.ID(), state.ID())
	}
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	if err := s.Save(expired, ids.New(), state); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Save with an expired deadline = %v, want context.DeadlineExceeded", err)
	}
}

// testConcurrentSessions: many sessions saved and read in parallel each
// end with their own latest state.
func testConcurrentSessions(t *testing.T, s agent.CheckpointStore) {
	const sessions, saves = 16, 6
	base := SampleState()
	var wg sync.WaitGroup
	want := make([]*agent.State, sessions)
	names := make([]string, sessions)
	errs := make(chan error, sessions*saves*2)
	for i := range sessions {
		names[i] = fmt.Sprintf("concurrent-%02d", i)
		wg.Go(func() {
			ctx := t.Context()
			for j := 1; j <= saves; j++ {
				st := base.WithStep(j).WithMetadata("session", float64(i))
				if err := s.Save(ctx, names[i], st); err != nil {
					errs <- fmt.Errorf("Save(%s, step %d): %w", names[i], j, err)
					return
				}
				got, err := s.Load(ctx, names[i])
				if err != nil {
					errs <- fmt.Errorf("Load(%s) after step %d: %w", names[i], j, err)
					return
				}
				if got.ID() != st.ID() {
					errs <- fmt.Errorf("Load(%s) after step %d = state %s (step %d), want %s", names[i], j, got.ID(), got.Step(), st.ID())
				}
				want[i] = st
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for i, id := range names {
		got := load(t, s, id)
		if !bytes.Equal(mustJSON(t, got), mustJSON(t, want[i])) {
			t.Errorf("session %s ended with state %s step %d, want %s step %d", id, got.ID(), got.Step(), want[i].ID(), saves)
		}
		if v, _ := got.Value("session"); v != float64(i) {
			t.Errorf("session %s holds another session's state (%v)", id, v)
		}
	}
	if got := list(t, s); !slices.Equal(got, names) {
		t.Errorf("List = %q, want %q", got, names)
	}
}

// testConcurrentSaves: saves of one session racing each other leave one of
// the saved states, whole, with its own metadata.
func testConcurrentSaves(t *testing.T, s agent.CheckpointStore) {
	const writers, saves = 6, 4
	id := ids.New()
	base := SampleState()
	var mu sync.Mutex
	saved := map[string]int{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for j := range saves {
				st := base.WithStep(1 + w*saves + j)
				mu.Lock()
				saved[st.ID()] = st.Step()
				mu.Unlock()
				if err := s.Save(t.Context(), id, st); err != nil {
					t.Errorf("Save: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := load(t, s, id)
	step, ok := saved[got.ID()]
	if !ok || step != got.Step() {
		t.Fatalf("Load = state %s step %d: not one of the saved states", got.ID(), got.Step())
	}
	if m := loadMeta(t, s, id); m.Step != got.Step() {
		t.Errorf("metadata step %d does not match the checkpoint's step %d", m.Step, got.Step())
	}
}

// testReaders: while a session is saved step after step, readers never see
// a partial checkpoint, nor metadata ahead of the checkpoint.
func testReaders(t *testing.T, s agent.CheckpointStore) {
	const steps, readers = 12, 2
	id := ids.New()
	base := SampleState()
	save(t, s, id, base.WithStep(1))
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			ctx := t.Context()
			for {
				select {
				case <-done:
					return
				default:
				}
				m, err := s.LoadMetadata(ctx, id)
				if err != nil {
					t.Errorf("LoadMetadata during saves: %v", err)
					return
				}
				st, err := s.Load(ctx, id)
				if err != nil {
					t.Errorf("Load during saves: %v", err)
					return
				}
				if st.Step() < m.Step {
					t.Errorf("metadata names step %d but the checkpoint read after it is step %d", m.Step, st.Step())
					return
				}
				time.Sleep(100 * time.Microsecond) // leave the writer some CPU
			}
		})
	}
	for step := 2; step <= steps; step++ {
		save(t, s, id, base.WithStep(step))
	}
	close(done)
	wg.Wait()
}
