package govern_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/google/go-cmp/cmp"
)

func alwaysFails(calls *atomic.Int32) govern.Verifier {
	return govern.CheckVerifier("strict", func(context.Context, govern.VerifyInput) []govern.Check {
		calls.Add(1)
		return []govern.Check{{CheckID: "never", Result: govern.CheckFail}}
	})
}

// repairData returns the TransitionData of a run's transitions of the
// given kind of edge.
func transitionData(t *testing.T, j govern.Journal, requestID string, from, to govern.Phase) []govern.TransitionData {
	t.Helper()
	var out []govern.TransitionData
	for _, rec := range runRecords(t, j, requestID) {
		if rec.Kind == recordkind.Transition && rec.From == from && rec.To == to {
			var d govern.TransitionData
			if len(rec.Data) > 0 {
				if err := json.Unmarshal(rec.Data, &d); err != nil {
					t.Fatal(err)
				}
			}
			out = append(out, d)
		}
	}
	return out
}

// TestUAICP_4_1_RepairLoopBounded: with a verifier that always fails,
// the repair loop stops after exactly the budget — the task class's when
// it sets one, else the options', else 2; negative means
// none — and the run fails safe with VERIFICATION_FAILED and
// REPAIRS_EXHAUSTED. Each repair is journaled with its count.
func TestUAICP_4_1_RepairLoopBounded(t *testing.T) {
	cases := []struct {
		name              string
		optsMax, classMax int
		wantRepairs       int
	}{
		{"default", 0, 0, govern.DefaultMaxRepairs},
		{"options", 1, 0, 1},
		{"options none", -1, 0, 0},
		{"class overrides options", 1, 4, 4},
		{"class none", 3, -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			g := newGov(t, govern.Options{MaxRepairs: tc.optsMax, Verifiers: []govern.Verifier{alwaysFails(&calls)},
				Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"strict"}, MaxRepairs: tc.classMax}}})
			var run *govern.Run
			var verdicts []*govern.Verdict
			_, err := g.Execute(bg, &govern.RunOptions{Identity: testIdentity(), TaskClass: "k"}, func(ctx context.Context, r *govern.Run, repair *govern.Verdict) (any, error) {
				run = r
				verdicts = append(verdicts, repair)
				return "attempt", nil
			})
			wantReasons(t, err, govern.VerificationFailed, govern.RepairsExhausted)
			ge := govErr(t, err)
			if ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain || ge.Envelope.State != govern.FailSafe {
				t.Fatalf("envelope %+v", ge.Envelope)
			}
			wantEnvReasons(t, ge.Envelope, govern.VerificationFailed, govern.RepairsExhausted)
			if int(calls.Load()) != tc.wantRepairs+1 {
				t.Errorf("verifier called %d times, want %d", calls.Load(), tc.wantRepairs+1)
			}
			if run.Repairs() != tc.wantRepairs || run.MaxRepairs() != tc.wantRepairs {
				t.Errorf("repairs %d of %d, want %d", run.Repairs(), run.MaxRepairs(), tc.wantRepairs)
			}
			if len(verdicts) != tc.wantRepairs+1 || verdicts[0] != nil {
				t.Errorf("work called %d times, first repair verdict %v", len(verdicts), verdicts[0])
			}
			for i, v := range verdicts[1:] {
				if v == nil || v.Passed || !slices.Contains(v.Reasons, govern.VerificationFailed) {
					t.Errorf("repair %d got verdict %+v", i+1, v)
				}
			}
			// Journaled: the budget, each repair's count, the final count.
			recs := runRecords(t, g.Journal(), run.RequestID())
			var st govern.RunStart
			if err := json.Unmarshal(recs[0].Data, &st); err != nil || st.MaxRepairs != tc.wantRepairs {
				t.Errorf("run_started max_repairs %d (%v)", st.MaxRepairs, err)
			}
			var counts []int
			for _, d := range transitionData(t, g.Journal(), run.RequestID(), govern.Verify, govern.Execute) {
				counts = append(counts, d.Repairs)
			}
			want := []int{}
			for i := 1; i <= tc.wantRepairs; i++ {
				want = append(want, i)
			}
			if diff := cmp.Diff(want, counts, cmp.Transformer("nilToEmpty", func(s []int) []int {
				if s == nil {
					return []int{}
				}
				return s
			})); diff != "" {
				t.Errorf("journaled repair counts (-want +got):\n%s", diff)
			}
			if fs := transitionData(t, g.Journal(), run.RequestID(), govern.Verify, govern.FailSafe); len(fs) != 1 || fs[0].Repairs != tc.wantRepairs {
				t.Errorf("fail_safe transition data %+v", fs)
			}
			nver := 0
			for _, rec := range recs {
				if rec.Kind == recordkind.Verification {
					nver++
				}
			}
			if nver != 2*(tc.wantRepairs+1) {
				t.Errorf("%d verification records, want %d", nver, 2*(tc.wantRepairs+1))
			}
		})
	}
}

// TestUAICP_4_1_RepairThenPass: a repair that fixes the output delivers.
func TestUAICP_4_1_RepairThenPass(t *testing.T) {
	v := govern.CheckVerifier("is-fixed", func(_ context.Context, in govern.VerifyInput) []govern.Check {
		res := govern.CheckFail
		if string(in.Output) == `"fixed"` {
			res = govern.CheckPass
		}
		return []govern.Check{{CheckID: "fixed", Result: res}}
	})
	g := newGov(t, govern.Options{Verifiers: []govern.Verifier{v}, Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"is-fixed"}}}})
	d, err := g.Execute(bg, &govern.RunOptions{Identity: testIdentity(), TaskClass: "k"}, func(_ context.Context, _ *govern.Run, repair *govern.Verdict) (any, error) {
		if repair == nil {
			return "broken", nil
		}
		return "fixed", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, d.Envelope)
	checkVerdict(t, d.Verdict)
	if d.Output != "fixed" || d.Run.Repairs() != 1 || d.Envelope.Metadata[govern.MetaRepairs] != 1 {
		t.Errorf("delivery output %v repairs %d metadata %v", d.Output, d.Run.Repairs(), d.Envelope.Metadata[govern.MetaRepairs])
	}
	if dd := transitionData(t, g.Journal(), d.Run.RequestID(), govern.Verify, govern.Deliver); len(dd) != 1 || dd[0].Repairs != 1 || dd[0].OutputHash == "" {
		t.Errorf("deliver transition data %+v", dd)
	}
}

// TestUAICP_4_1_RepairByHand drives the loop through the Run API: repair
// edges to plan and to execute, CanRepair, and the budget running out.
func TestUAICP_4_1_RepairByHand(t *testing.T) {
	var calls atomic.Int32
	g := newGov(t, govern.Options{MaxRepairs: 2, Verifiers: []govern.Verifier{alwaysFails(&calls)},
		Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"strict"}}}})
	r := start(t, g, govern.RunOptions{TaskClass: "k"})
	for i, to := range []govern.Phase{govern.Plan, govern.Execute} {
		v, err := r.Verify(bg, "out")
		if err != nil || v.Passed {
			t.Fatalf("Verify %d: %+v %v", i, v, err)
		}
		if !r.CanRepair() {
			t.Fatalf("CanRepair false after %d repairs", i)
		}
		if err := r.Repair(bg, to, "try again"); err != nil {
			t.Fatal(err)
		}
		if r.Phase() != to || r.Repairs() != i+1 {
			t.Fatalf("phase %s repairs %d", r.Phase(), r.Repairs())
		}
	}
	if v, err := r.Verify(bg, "out"); err != nil || v.Passed {
		t.Fatal(v, err)
	}
	if r.CanRepair() {
		t.Error("CanRepair with the budget spent")
	}
	err := r.Repair(bg, govern.Execute, "once more")
	wantReasons(t, err, govern.VerificationFailed, govern.RepairsExhausted)
	if ge := govErr(t, err); ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain {
		t.Fatalf("envelope %+v", ge.Envelope)
	}
	if r.Phase() != govern.FailSafe || calls.Load() != 3 {
		t.Errorf("phase %s, verifier called %d times", r.Phase(), calls.Load())
	}
	want := []string{"intake→plan", "plan→execute", "execute→verify", "verify→plan", "plan→execute", "execute→verify",
		"verify→execute", "execute→verify", "verify→fail_safe"}
	if diff := cmp.Diff(want, transitions(t, g.Journal(), r.RequestID())); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

// TestUAICP_4_1_ApprovalBindsAttempt: approval tokens bind the repair
// attempt. A token for attempt 0 is invalid after a repair, the call asks
// anew for attempt 1, and the stale request of attempt 0 does not keep
// the run from delivering once the new one is approved and the call ran.
func TestUAICP_4_1_ApprovalBindsAttempt(t *testing.T) {
	g := newGov(t, baseOpts(t, nil))
	r := start(t, g, govern.RunOptions{})
	spec := highRisk("migrate")
	call := govern.Call{ID: "c1", Args: map[string]any{"schema": 7}}
	f := &tool{}
	_, err := r.Invoke(bg, spec, call, f.fn)
	req0 := approvalOf(t, g, err)
	if req0.Attempt != 0 {
		t.Fatalf("attempt %d", req0.Attempt)
	}
	tok0 := sign(t, alice, claimsFor(alice, req0))

	v, err := r.Verify(bg, "out")
	if err != nil || v.Passed || !slices.Contains(v.Reasons, govern.ApprovalRequired) {
		t.Fatalf("Verify with a pending approval: %+v %v", v, err)
	}
	if err := r.Repair(bg, govern.Execute, "get the approval"); err != nil {
		t.Fatal(err)
	}
	withOld := call
	withOld.Approval = tok0
	_, err = r.Invoke(bg, spec, withOld, f.fn)
	wantReasons(t, err, govern.ApprovalInvalid)
	_, err = r.Invoke(bg, spec, call, f.fn)
	req1 := approvalOf(t, g, err)
	if req1.ID == req0.ID || req1.Attempt != 1 {
		t.Fatalf("request after the repair: %+v", req1)
	}
	if f.n() != 0 {
		t.Fatalf("tool ran %d times", f.n())
	}
	if _, err := g.Decide(bg, req1.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req1))}); err != nil {
		t.Fatal(err)
	}
	invoke(t, r, spec, call, f)
	if f.n() != 1 {
		t.Fatalf("tool ran %d times", f.n())
	}
	// The attempt-0 request is superseded: not pending, not listed, not
	// decidable.
	if p := r.PendingApprovals(); len(p) != 0 {
		t.Errorf("pending approvals %v after the call ran", p)
	}
	if list, _ := g.Approvals(bg, false); len(list) != 1 || list[0].ID != req1.ID {
		t.Errorf("approvals after the repair: %d, want only the attempt-1 request", len(list))
	}
	if _, err := g.Decide(bg, req0.ID, govern.ApprovalInput{Approve: true, Token: tok0}); !errors.Is(err, govern.ErrUnknownApproval) {
		t.Errorf("deciding the superseded attempt-0 request: err = %v, want ErrUnknownApproval", err)
	}
	verifyPass(t, r, "out")
}
