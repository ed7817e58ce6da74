package govern_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// haltJournal passes appends to the journal under it until one holds a
// record that halt matches, then fails every later append: the process
// died right after that append. Every effect of a run is preceded by a
// synced append, so the dead process does nothing more — but for a tool
// already past its intent, which checks dead() to die before its effect
// when the test wants it to.
type haltJournal struct {
	govern.Journal
	halt func(r *govern.Record) bool

	mu     sync.Mutex
	halted bool
}

var errHalted = errors.New("the process died")

func (j *haltJournal) Append(ctx context.Context, sync bool, recs ...*govern.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.halted {
		return errHalted
	}
	if err := j.Journal.Append(ctx, sync, recs...); err != nil {
		return err
	}
	for _, r := range recs {
		if j.halt != nil && j.halt(r) {
			j.halted = true
		}
	}
	return nil
}

// nth matches the nth record that match matches.
func nth(n int, match func(r *govern.Record) bool) func(r *govern.Record) bool {
	seen := 0
	return func(r *govern.Record) bool {
		if match(r) {
			seen++
		}
		return seen == n
	}
}

func (j *haltJournal) dead() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.halted
}

// TestUAICP_7_RecoverInterruptedResume: the recovery rule for a run whose
// resume after its approvals a crash interrupted. The run waits for two
// approvals (a refund, approved; a wipe, denied). When the crash leaves
// nothing in doubt and nothing beyond the redo of those calls, Recover
// pauses the run again and ResumeAgent continues it: the refund runs
// exactly once (replayed if it committed), the denial is replayed to the
// model, and the run delivers. When the refund is in doubt, or the agent
// already went beyond the redo (another write), the run fails safe and its
// writes are rolled back (rollbacks are idempotent: an in-doubt refund
// that never started is "reverted" too).
func TestUAICP_7_RecoverInterruptedResume(t *testing.T) {
	type want struct {
		status   string // "deliver" or "fail_safe"
		applied  []string
		reverted []string
	}
	isCall := func(kind govern.RecordKind, callID string) func(r *govern.Record) bool {
		return func(r *govern.Record) bool { return r.Kind == kind && r.CallID == callID }
	}
	cases := []struct {
		name string
		// beyond makes the model write a note after the redo.
		beyond bool
		halt   func(r *govern.Record) bool
		// dieBeforeEffect: the refund finds the process dead after its
		// intent and does nothing.
		dieBeforeEffect bool
		want            want
	}{
		{name: "after the decisions", halt: nth(2, func(r *govern.Record) bool { return r.Kind == recordkind.ApprovalDecided }),
			want: want{"deliver", []string{"o-1"}, nil}},
		{name: "after run_resumed", halt: func(r *govern.Record) bool { return r.Kind == recordkind.Resumed },
			want: want{"deliver", []string{"o-1"}, nil}},
		{name: "after the refund's intent, the refund done", halt: isCall(recordkind.Intent, "c-refund"),
			want: want{"fail_safe", []string{"o-1"}, []string{"o-1"}}},
		{name: "after the refund's intent, the refund not started", halt: isCall(recordkind.Intent, "c-refund"), dieBeforeEffect: true,
			want: want{"fail_safe", nil, []string{"o-1"}}},
		{name: "after the refund's commit", halt: isCall(recordkind.Commit, "c-refund"),
			want: want{"deliver", []string{"o-1"}, nil}},
		{name: "after the wipe's refusal", halt: isCall(recordkind.Blocked, "c-wipe"),
			want: want{"deliver", []string{"o-1"}, nil}},
		{name: "while verifying the answer", halt: func(r *govern.Record) bool { return r.Kind == recordkind.Verification },
			want: want{"deliver", []string{"o-1"}, nil}},
		{name: "beyond the redo: after another write", beyond: true, halt: isCall(recordkind.Commit, "c-note"),
			want: want{"fail_safe", []string{"o-1", "note"}, []string{"note", "o-1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &haltJournal{Journal: govern.NewMemoryJournal()}
			f := newAgentFixture(t, func(o *govern.Options) {
				o.Journal, o.Logger = j, quietLogger
				o.Classes = []govern.TaskClass{{Name: "support", RequiredEvidence: []govern.EvidenceType{govern.ToolResult}}}
			})
			var refunds, wipes, notes atomic.Int32
			refund := refundTool(f.ledger, &refunds)
			inner := refund.Run
			refund.Run = func(ctx context.Context, args map[string]any) (any, error) {
				if tc.dieBeforeEffect && j.dead() {
					return nil, errHalted
				}
				return inner(ctx, args)
			}
			wipe := govern.Declare(llm.Tool{Name: "wipe", Parameters: llm.Schema{"type": "object"}, Run: func(context.Context, map[string]any) (any, error) {
				wipes.Add(1)
				return "wiped", nil
			}}, govern.Declaration{Tier: govern.WriteHighRisk, Rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
				return &govern.RollbackAction{Type: "ledger.revert", Target: "wipe"}, nil
			}})
			note := govern.Declare(llm.Tool{Name: "note", Parameters: llm.Schema{"type": "object"}, Run: func(context.Context, map[string]any) (any, error) {
				notes.Add(1)
				f.ledger.apply("note")
				return "noted", nil
			}}, govern.Declaration{Tier: govern.WriteLowRisk, Rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
				return &govern.RollbackAction{Type: "ledger.revert", Target: "note"}, nil
			}})
			// The model reads the conversation, so that it answers the
			// same after a restart.
			var denial atomic.Value
			model := func() *scripted.Model {
				return scripted.NewFunc(func(ctx context.Context, req *llm.Request) (scripted.Step, error) {
					results := map[string]llm.ToolResult{}
					for _, m := range req.Messages {
						if tr, ok := m.(*llm.ToolResultMessage); ok {
							for _, r := range tr.Results {
								results[r.ToolCallID] = r
							}
						}
					}
					switch _, noted := results["c-note"]; {
					case len(results) == 0:
						return scripted.Step{ToolCalls: []llm.ToolCall{call("c-refund", "refund", map[string]any{"order": "o-1"}), call("c-wipe", "wipe", nil)}}, nil
					case tc.beyond && !noted:
						return scripted.Step{ToolCalls: []llm.ToolCall{call("c-note", "note", nil)}}, nil
					}
					if w := results["c-wipe"]; w.IsError {
						denial.Store(fmt.Sprint(w.Result))
					}
					return scripted.Step{Text: "refunded o-1"}, nil
				})
			}
			o := govern.AgentOptions{Name: "support", TaskClass: "support"}
			a := newGovernedAgent(t, f.g, model(), o, refund, wipe, note)
			_, err := a.Generate(bg, llm.Text("refund o-1 and wipe"), nil)
			var ge *govern.Error
			if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) {
				t.Fatalf("Generate: %v", err)
			}
			id := ge.Envelope.RequestID
			approvals, _ := f.g.Approvals(bg, true)
			j.halt = tc.halt
			for _, ap := range approvals {
				if ap.Tool == "refund" {
					f.approve(t, ap.ID)
				} else if _, err := f.g.Decide(bg, ap.ID, govern.ApprovalInput{Approver: "bob", Reason: "no wiping"}); err != nil {
					t.Fatal(err)
				}
			}
			if !j.dead() {
				_, err = govern.ResumeAgent(bg, f.g, a, id)
				if !j.dead() {
					t.Fatalf("the process did not die: %v", err)
				}
			}

			// Restart on the journal as it was left.
			j.mu.Lock()
			j.halted, j.halt = false, nil
			j.mu.Unlock()
			f.restart(t)
			rep, err := f.g.Recover(bg)
			if err != nil {
				t.Fatal(err)
			}
			a = newGovernedAgent(t, f.g, model(), o, refund, wipe, note)
			status := ""
			switch {
			case slices.Contains(rep.Closed, id):
				status = "fail_safe"
				r, err := f.g.Attach(bg, id)
				if err != nil || !slices.Contains(r.Reasons(), govern.RecoveredInDoubt) {
					t.Errorf("closed run: reasons %v, %v", r.Reasons(), err)
				}
			case slices.Contains(rep.Resumable, id) || slices.Contains(rep.Paused, id):
				if again, err := f.g.Recover(bg); err != nil || !slices.Contains(again.Paused, id) {
					t.Errorf("a second Recover: %+v, %v; want the run left paused", again, err)
				}
				res, err := govern.ResumeAgent(bg, f.g, a, id)
				if err != nil {
					t.Fatalf("ResumeAgent after the restart: %v", err)
				}
				env, _ := govern.EnvelopeOf(res.State)
				status = string(env.State)
				if d, _ := denial.Load().(string); !strings.Contains(d, "APPROVAL_DENIED") || !strings.Contains(d, "no wiping") {
					t.Errorf("the model was told %q of the wipe, want its denial", d)
				}
			default:
				t.Fatalf("Recover did not report the run: %+v", rep)
			}
			f.ledger.mu.Lock()
			got := want{status, f.ledger.applied, f.ledger.reverted}
			f.ledger.mu.Unlock()
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if wipes.Load() != 0 {
				t.Errorf("the denied wipe ran %d times", wipes.Load())
			}
			if n := refunds.Load(); n > 1 {
				t.Errorf("the refund ran %d times", n)
			}
		})
	}
}

// TestUAICP_7_RefusedCalls: a run lists the calls the governor refused
// and that did not run since — denied by policy, by an approver (with who
// denied), an invalid approval token — but not a call waiting for its
// approval, nor one refused and then run; the list comes from the journal,
// so a new governor attaching the run reports the same.
func TestUAICP_7_RefusedCalls(t *testing.T) {
	opts := baseOpts(t, nil)
	opts.Journal = govern.NewMemoryJournal()
	opts.Policy = govern.PolicyFunc(func(_ context.Context, in govern.PolicyInput) (govern.Decision, error) {
		if in.Tool == "drop" {
			return govern.Decision{Effect: govern.Deny, Rule: "no-drops"}, nil
		}
		return govern.Decision{Effect: govern.Allow}, nil
	})
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{})
	_, err := r.Invoke(bg, withRollback(lowRisk("drop")), govern.Call{ID: "c-drop"}, notCalled(t))
	wantReasons(t, err, govern.PolicyBlocked)
	_, err = r.Invoke(bg, highRisk("pay"), govern.Call{ID: "c-pay", Args: map[string]any{"n": 1}}, notCalled(t))
	pay := approvalOf(t, g, err)
	_, err = r.Invoke(bg, highRisk("wire"), govern.Call{ID: "c-wire", Args: map[string]any{"n": 2}}, notCalled(t))
	wire := approvalOf(t, g, err)
	_, err = r.Invoke(bg, highRisk("send"), govern.Call{ID: "c-send", Args: map[string]any{"n": 3}}, notCalled(t))
	approvalOf(t, g, err) // send waits for its approval: not refused
	// pay: a token by mallory is refused, then alice's runs it.
	_, err = r.Invoke(bg, highRisk("pay"), govern.Call{ID: "c-pay", Args: map[string]any{"n": 1}, Approval: sign(t, mallory, claimsFor(mallory, pay))}, notCalled(t))
	wantReasons(t, err, govern.ApprovalInvalid)
	invoke(t, r, highRisk("pay"), govern.Call{ID: "c-pay", Args: map[string]any{"n": 1}, Approval: sign(t, alice, claimsFor(alice, pay))}, &tool{})
	// wire: denied by bob.
	if _, err := g.Decide(bg, wire.ID, govern.ApprovalInput{Approver: "bob", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Invoke(bg, highRisk("wire"), govern.Call{ID: "c-wire", Args: map[string]any{"n": 2}}, notCalled(t))
	wantReasons(t, err, govern.ApprovalDenied)

	want := []govern.RefusedCall{
		{Tool: "drop", CallID: "c-drop", Reasons: []govern.Reason{govern.PolicyBlocked}, Detail: "denied by policy rule no-drops"},
		{Tool: "wire", CallID: "c-wire", ApprovalID: wire.ID, Reasons: []govern.Reason{govern.ApprovalDenied}, Detail: "denied by bob: not today", Approver: "bob"},
	}
	if diff := cmp.Diff(want, r.RefusedCalls()); diff != "" {
		t.Errorf("refused calls (-want +got):\n%s", diff)
	}
	r2, err := newGov(t, opts).Attach(bg, r.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, r2.RefusedCalls()); diff != "" {
		t.Errorf("refused calls after a restart (-want +got):\n%s", diff)
	}
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
}
