package agent_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/google/go-cmp/cmp"
)

// A state's ID (drawn when it is first asked for while IDs are random) is
// a UUIDv4 of its own, the same however often and from however many
// goroutines it is asked for, random even when a test Source is installed
// between the state's making and the question, and the one its JSON
// carries; a state made under a test Source gets its ID from the Source
// when it is made, in the order the states are made.
func TestUAP_6_StateIDs(t *testing.T) {
	a, b := agent.Initial(), agent.Initial().WithMessage(llm.NewUserMessage(llm.Text("hi")))
	c := b.WithStep(2)
	restore := ids.Set(&fixedIDs{})
	ida := a.ID() // asked for under the test Source: still random
	restore()
	seen := map[string]bool{}
	for _, s := range []*agent.State{a, b, c} {
		id := s.ID()
		if !ids.Valid(id) || seen[id] {
			t.Fatalf("ID %q: not a UUIDv4 of its own", id)
		}
		seen[id] = true
	}
	if ida != a.ID() {
		t.Errorf("ID changed: %q, then %q", ida, a.ID())
	}

	d := c.WithStep(3)
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() { got[i] = d.ID() })
	}
	wg.Wait()
	for _, id := range got {
		if id != got[0] || !ids.Valid(id) || seen[id] {
			t.Fatalf("concurrent first IDs %q", got)
		}
	}

	b2, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	back, err := agent.FromJSON(b2)
	if err != nil {
		t.Fatal(err)
	}
	var into agent.State
	if err := json.Unmarshal(b2, &into); err != nil {
		t.Fatal(err)
	}
	if back.ID() != d.ID() || into.ID() != d.ID() {
		t.Errorf("IDs from JSON %q, %q; want %q", back.ID(), into.ID(), d.ID())
	}
	if back.WithStep(4).ID() == d.ID() {
		t.Error("a state made from a loaded one has the loaded one's ID")
	}

	var zero agent.State
	var none *agent.State
	if zero.ID() != "" || none.ID() != "" {
		t.Errorf("zero state's ID %q, nil state's %q", zero.ID(), none.ID())
	}
	var j struct{ ID string }
	if b, _ := json.Marshal(none); json.Unmarshal(b, &j) != nil || j.ID != "" {
		t.Errorf("nil state's JSON %s", b)
	}

	restore = ids.Set(&fixedIDs{})
	e := agent.Initial()
	f := e.WithStep(1)
	restore()
	if diff := cmp.Diff([]string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}, []string{e.ID(), f.ID()}); diff != "" {
		t.Errorf("IDs under a test Source (-want +got):\n%s", diff)
	}
}
