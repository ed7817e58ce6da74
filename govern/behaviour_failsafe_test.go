package govern_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// TestUAICP_7_FailSafe: when an invariant is unmet — here the evidence a
// task class requires — the run ends in fail_safe, the response is marked
// uncertain with the missing-evidence reason code, and no unverified side
// effect stays: the writes the run made are rolled back, newest first,
// and no deliver is journaled.
func TestUAICP_7_FailSafe(t *testing.T) {
	log := &rollbackLog{}
	opts := baseOpts(t, log)
	opts.Classes = []govern.TaskClass{{Name: "needs", RequiredEvidence: []govern.EvidenceType{govern.TestReport}}}
	g := newGov(t, opts)
	ctx := context.Background()
	_, err := g.Execute(ctx, &govern.RunOptions{Identity: testIdentity(), TaskClass: "needs"}, func(ctx context.Context, r *govern.Run, _ *govern.Verdict) (any, error) {
		for _, id := range []string{"w1", "w2"} {
			if _, err := r.Invoke(ctx, withRollback(lowRisk("put")), govern.Call{ID: id}, (&tool{}).fn); err != nil {
				return nil, err
			}
		}
		return "answer", nil // but never a test_report
	})
	ge := govErr(t, err)
	if !slices.Contains(ge.Reasons, govern.EvidenceMissing) {
		t.Errorf("reasons %v, want EVIDENCE_MISSING", ge.Reasons)
	}
	env := ge.Envelope
	if env == nil {
		t.Fatal("no fail-safe envelope")
	}
	checkWire(t, env)
	if env.State != govern.FailSafe || env.Outcome != govern.Uncertain {
		t.Errorf("envelope state %s outcome %s, want fail_safe uncertain", env.State, env.Outcome)
	}
	wantEnvReasons(t, env, govern.EvidenceMissing)

	// Every write of every attempt was undone, newest first.
	undone := log.targets()
	recs := runRecords(t, g.Journal(), env.RequestID)
	var written []string
	for _, r := range recs {
		if r.Kind == recordkind.Commit && r.Tool == "put" {
			written = append(written, r.CallID)
		}
		if r.Kind == recordkind.Transition && r.To == govern.Deliver {
			t.Error("a deliver was journaled")
		}
	}
	slices.Reverse(written)
	if len(written) == 0 || !slices.Equal(undone, written) {
		t.Errorf("rolled back %v, want every write newest first %v", undone, written)
	}
}
