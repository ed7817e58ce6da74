package agent

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/agentry-dev/agentry/llm"
)

// TestStateCopiesEveryField: State.clone and State.UnmarshalJSON copy
// State's fields one by one (its ID is an atomic value, which may not be
// copied with the struct). A field added to State fails here until both
// copy it: the list below is State's fields, and a state with every
// field set keeps all of them (but its ID) through a With call and a JSON
// round trip.
func TestStateCopiesEveryField(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[State]().Fields() {
		fields = append(fields, f.Name)
	}
	if want := []string{"id", "lazyID", "messages", "step", "metadata", "reasoning", "plan", "traces"}; !slices.Equal(fields, want) {
		t.Fatalf("State's fields are %q, this test knows %q: copy the new ones in clone and UnmarshalJSON, then add them here", fields, want)
	}
	s := Initial().
		WithMessages(llm.NewUserMessage(llm.Text("hi"))).
		WithStep(3).
		WithMetadata("k", "v").
		WithReasoning("because").
		WithPlan([]PlanStep{{ID: "p1", Description: "do", DependsOn: []string{}, Status: PlanPending}}).
		WithSubagentTrace(SubagentTrace{SubagentID: "sub-1", SubagentType: "researcher", ParentToolCallID: "call_1", Prompt: "look"})
	same := func(what string, a, b *State) {
		t.Helper()
		if a.Step() != b.Step() || !reflect.DeepEqual(a.Messages(), b.Messages()) || !reflect.DeepEqual(a.Metadata(), b.Metadata()) ||
			!reflect.DeepEqual(a.Reasoning(), b.Reasoning()) || !reflect.DeepEqual(a.Plan(), b.Plan()) || len(a.SubagentTraces()) != len(b.SubagentTraces()) {
			t.Errorf("%s lost a field:\n got %#v\nwant %#v", what, b, a)
		}
	}
	c := s.WithStep(3)
	same("clone", s, c)
	if c.ID() == s.ID() || c.ID() == "" {
		t.Errorf("clone's ID %q, original's %q: want a new one", c.ID(), s.ID())
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	same("JSON round trip", s, &back)
	if back.ID() != s.ID() {
		t.Errorf("JSON round trip: ID %q, want %q", back.ID(), s.ID())
	}
}
