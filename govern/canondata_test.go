package govern

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/gowebpki/jcs"
)

// checkCanonicalData: where appendCanonicalData writes data's canonical
// form, it is jcs.Transform of json.Marshal(data) (want, werr).
func checkCanonicalData(t *testing.T, data any, want []byte, werr error) {
	t.Helper()
	got, ok := appendCanonicalData(nil, data)
	if !ok {
		return
	}
	if werr != nil {
		t.Errorf("canonical form %s written where json.Marshal fails: %v", got, werr)
		return
	}
	canon, err := jcs.Transform(want)
	if err != nil {
		t.Errorf("canonical form %s written where jcs refuses %s: %v", got, want, err)
		return
	}
	if !bytes.Equal(got, canon) {
		t.Errorf("canonical form of %s\ndirect %s\njcs    %s", want, got, canon)
	}
}

// TestCanonicalDataMatchesJCS: the Data of a call's intent and outcome is
// written in canonical form directly for the common cases (the other
// cases are checked wherever checkMarshalData is), and the member lists
// it sorts by hand are in order.
func TestCanonicalDataMatchesJCS(t *testing.T) {
	if !slices.IsSorted(evidenceCanonOrder[:]) {
		t.Errorf("evidenceCanonOrder is not sorted: %q", evidenceCanonOrder)
	}
	if got, want := slices.Sorted(slices.Values(evidenceCanonOrder[:])), slices.Sorted(slices.Values(evidenceMembers)); !slices.Equal(got, want) {
		t.Errorf("evidenceCanonOrder = %q, evidenceMembers = %q", got, want)
	}
	ev := sampleEvidence()
	for _, d := range []any{
		CallOutcome{},
		CallOutcome{ArgsHash: "sha256:aa", ResultHash: "sha256:bb", Evidence: []Evidence{ev}, Error: "bad <thing> & \xff", DurationMS: 12},
		CallIntent{Tier: WriteHighRisk, DeclaredTier: "unknown", Args: json.RawMessage(`{"sku":"A-1","order":1042}`),
			ArgsHash: "sha256:aa", Rollback: &RollbackAction{Type: "undo", Target: "o-1", Payload: map[string]any{"note": "<x>", "amount": 30}},
			RollbackHash: "sha256:bb", Attempt: 2, Policy: &Decision{Effect: Review, Rule: "r", Reasons: []string{"big", "\u2028"}},
			ApprovalID: "a-1", Approver: "alice", TokenID: "jti-1", Detail: "detail \"quoted\""},
	} {
		if _, ok := appendCanonicalData(nil, d); !ok {
			t.Errorf("appendCanonicalData did not take %#v", d)
		}
		checkMarshalData(t, d)
	}
	for _, d := range []any{
		CallIntent{Tier: 0},
		CallOutcome{DurationMS: 1<<53 + 1},
		CallOutcome{Evidence: []Evidence{{Extra: map[string]any{"\u00e9": 1}}}},
		TransitionData{},
	} {
		if got, ok := appendCanonicalData(nil, d); ok {
			t.Errorf("appendCanonicalData took %#v: %s", d, got)
		}
		checkMarshalData(t, d)
	}
}

// TestOwnCanonSealsAsJCS: the records of governed calls sealed with the
// canonical Data written with them carry the hash the general path
// computes, and nothing is left in ownCanon once they are appended.
func TestOwnCanonSealsAsJCS(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	g, err := New(ctx, &Options{Journal: j, Rollbacks: map[string]RollbackFunc{"undo": func(context.Context, RollbackAction) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := g.Start(ctx, &RunOptions{Identity: Identity{AgentID: "agent:a", OwnerID: "org:o", ControlClass: Autonomous}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tier := range []Tier{ReadOnly, WriteLowRisk, ReadOnly} {
		spec := ToolSpec{Name: "t", Tier: tier, Rollback: func(ctx context.Context, c Call) (*RollbackAction, error) {
			return &RollbackAction{Type: "undo", Target: c.ID, Payload: map[string]any{"why": "<é>"}}, nil
		}}
		call := Call{ID: "c" + string(rune('0'+i)), Args: map[string]any{"z": 1.5, "a": "\u2028<>", "n": []any{1, true, nil}}}
		if _, err := run.Invoke(ctx, spec, call, func(context.Context) (any, error) {
			return map[string]any{"b": "é", "a": 1e21}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	for rec, err := range j.Records(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		want, err := rec.computeHashJCS()
		if err != nil {
			t.Fatal(err)
		}
		if rec.Hash != want {
			t.Errorf("record %d (%s): hash %s, the general path %s", rec.Seq, rec.Kind, rec.Hash, want)
		}
		if rec.Tool != "" {
			calls++
		}
	}
	if calls != 4 {
		t.Errorf("%d call records, want 4 (3 commits, 1 intent)", calls)
	}
	ownCanon.mu.Lock()
	defer ownCanon.mu.Unlock()
	if len(ownCanon.held) != 0 {
		t.Errorf("ownCanon still holds %d entries", len(ownCanon.held))
	}
}
