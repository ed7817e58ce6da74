package govern_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// TestUAICP_5_4_AuditTrail drives runs through every kind of record and
// checks that each carries what §5.4 requires (newGov's audit does the
// field checks on all of them) and names the right kind of actor: the
// agent for its run, a human for an approval, the system for recovery.
func TestUAICP_5_4_AuditTrail(t *testing.T) {
	j := govern.NewMemoryJournal()
	log := &rollbackLog{fail: map[string]bool{"w2": true}}
	opts := baseOpts(t, log)
	opts.Journal = j
	opts.Classes = []govern.TaskClass{{Name: "k", RequiredEvidence: []govern.EvidenceType{govern.TestReport}}}
	opts.Policy = govern.PolicyFunc(func(_ context.Context, in govern.PolicyInput) (govern.Decision, error) {
		if in.Tool == "forbidden" {
			return govern.Decision{Effect: govern.Deny}, nil
		}
		return govern.Decision{Effect: govern.Allow}, nil
	})
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{TaskClass: "k"})
	child := start(t, g, govern.RunOptions{Parent: r})
	verifyPass(t, child, "c")
	invoke(t, r, readOnly("get"), govern.Call{ID: "r1"}, &tool{})
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "w1"}, &tool{})
	if _, err := r.Invoke(bg, withRollback(lowRisk("put")), govern.Call{ID: "w2"}, (&tool{err: errors.New("x")}).fn); err == nil {
		t.Fatal("failing tool succeeded")
	}
	if _, err := r.Invoke(bg, lowRisk("forbidden"), govern.Call{ID: "b1"}, notCalled(t)); err == nil {
		t.Fatal("denied call succeeded")
	}
	if _, err := r.AddEvidence(bg, govern.Evidence{EvidenceType: govern.TestReport, Source: "ci", Payload: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	_, err := r.Invoke(bg, highRisk("wire"), govern.Call{ID: "h1"}, notCalled(t))
	req := approvalOf(t, g, err)
	if err := r.Pause(bg, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); err != nil {
		t.Fatal(err)
	}
	r2, err := g.Attach(bg, r.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Resume(bg); err != nil {
		t.Fatal(err)
	}
	invoke(t, r2, highRisk("wire"), govern.Call{ID: "h1"}, &tool{})
	if v, err := r2.Verify(bg, "out"); err != nil || !v.Passed {
		t.Fatal(v, err)
	}
	if _, err := r2.Fail(bg, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	// And a run closed by recovery.
	abandoned := start(t, g, govern.RunOptions{})
	invoke(t, abandoned, withRollback(lowRisk("put")), govern.Call{ID: "a1"}, &tool{})
	if _, err := newGov(t, opts).Recover(bg); err != nil {
		t.Fatal(err)
	}

	seen := map[govern.RecordKind]bool{}
	for _, rec := range records(t, j) {
		seen[rec.Kind] = true
		want := govern.ActorAgent
		switch {
		case rec.Kind == recordkind.ApprovalDecided || rec.Kind == recordkind.TokenUsed:
			want = govern.ActorHuman
			if rec.Actor.ID != "alice" {
				t.Errorf("decision by %q", rec.Actor.ID)
			}
		case rec.RequestID == abandoned.RequestID() && rec.Seq > lastSeqBefore(t, j, abandoned.RequestID(), recordkind.Commit):
			want = govern.ActorSystem
		}
		if rec.Actor.Kind != want {
			t.Errorf("record %d (%s): actor %+v, want kind %s", rec.Seq, rec.Kind, rec.Actor, want)
		}
		if want == govern.ActorAgent && rec.Actor.ID != agentID {
			t.Errorf("record %d (%s): actor %q", rec.Seq, rec.Kind, rec.Actor.ID)
		}
	}
	for _, k := range []govern.RecordKind{recordkind.RunStarted, recordkind.Transition, recordkind.Intent, recordkind.Commit, recordkind.Failed,
		recordkind.Blocked, recordkind.Evidence, recordkind.Verification, recordkind.ApprovalRequested, recordkind.ApprovalDecided,
		recordkind.TokenUsed, recordkind.Paused, recordkind.Resumed, recordkind.RollbackStarted, recordkind.RollbackDone, recordkind.RollbackFailed, recordkind.Child} {
		if !seen[k] {
			t.Errorf("no %s record in the trail", k)
		}
	}
}

// lastSeqBefore returns the seq of the last record of kind in a run.
func lastSeqBefore(t *testing.T, j govern.Journal, requestID string, kind govern.RecordKind) uint64 {
	t.Helper()
	var seq uint64
	for _, rec := range runRecords(t, j, requestID) {
		if rec.Kind == kind {
			seq = rec.Seq
		}
	}
	return seq
}

// sliceJournal serves fixed records, to show VerifyChain a tampered
// journal.
type sliceJournal []govern.Record

func (s sliceJournal) Append(context.Context, bool, ...*govern.Record) error {
	return errors.New("read only")
}
func (s sliceJournal) Close() error { return nil }
func (s sliceJournal) Records(_ context.Context, from uint64) iter.Seq2[govern.Record, error] {
	return func(yield func(govern.Record, error) bool) {
		for _, r := range s {
			if r.Seq >= from && !yield(r, nil) {
				return
			}
		}
	}
}

// TestUAICP_5_4_ChainDetectsTampering: an edited, deleted, inserted or
// reordered record breaks the hash chain.
func TestUAICP_5_4_ChainDetectsTampering(t *testing.T) {
	g := newGov(t, govern.Options{})
	r := start(t, g, govern.RunOptions{})
	invoke(t, r, lowRisk("put"), govern.Call{ID: "w1"}, &tool{})
	verifyPass(t, r, "out")
	recs := records(t, g.Journal())
	if n, err := govern.VerifyChain(bg, sliceJournal(recs)); err != nil || n != uint64(len(recs)) {
		t.Fatalf("untouched copy: %d %v", n, err)
	}
	tamper := map[string]func([]govern.Record) []govern.Record{
		"edited outcome": func(rs []govern.Record) []govern.Record { rs[3].Outcome = govern.Success; return rs },
		"edited data":    func(rs []govern.Record) []govern.Record { rs[3].Data = json.RawMessage(`{}`); return rs },
		"edited actor":   func(rs []govern.Record) []govern.Record { rs[1].Actor.ID = "someone else"; return rs },
		"deleted":        func(rs []govern.Record) []govern.Record { return slices.Delete(rs, 2, 3) },
		"deleted last":   func(rs []govern.Record) []govern.Record { return rs[:len(rs)-1] }, // undetectable by the chain alone
		"reordered":      func(rs []govern.Record) []govern.Record { rs[2], rs[3] = rs[3], rs[2]; return rs },
		"inserted": func(rs []govern.Record) []govern.Record {
			extra := rs[2]
			return slices.Insert(rs, 2, extra)
		},
	}
	for name, f := range tamper {
		got := f(slices.Clone(recs))
		_, err := govern.VerifyChain(bg, sliceJournal(got))
		if name == "deleted last" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		var ce *govern.ChainError
		if !errors.Is(err, govern.ErrChainBroken) || !errors.As(err, &ce) {
			t.Errorf("%s: VerifyChain = %v, want ErrChainBroken", name, err)
		}
	}
}
