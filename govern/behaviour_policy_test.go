package govern_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/google/go-cmp/cmp"
)

// TestUAICP_5_3_ReadOnlyAutoAllowed: read_only calls run without asking
// the policy and without an intent record.
func TestUAICP_5_3_ReadOnlyAutoAllowed(t *testing.T) {
	spy := &spyPolicy{decide: func(govern.PolicyInput) (govern.Decision, error) {
		t.Error("the policy was asked about a read_only call")
		return govern.Decision{Effect: govern.Deny}, nil
	}}
	g := newGov(t, govern.Options{Policy: spy})
	r := start(t, g, govern.RunOptions{})
	f := &tool{}
	inv := invoke(t, r, readOnly("lookup"), govern.Call{ID: "c1", Args: map[string]any{"id": 7}}, f)
	if f.n() != 1 || spy.calls() != 0 || inv.Tier != govern.ReadOnly {
		t.Fatalf("tool ran %d times, policy asked %d times, tier %s", f.n(), spy.calls(), inv.Tier)
	}
	if got := inv.Envelope.Metadata[govern.MetaRiskTier]; got != "read_only" {
		t.Errorf("envelope risk tier %v", got)
	}
	if diff := cmp.Diff([]govern.RecordKind{recordkind.RunStarted, recordkind.Transition, recordkind.Transition, recordkind.Commit},
		kinds(runRecords(t, g.Journal(), r.RequestID()))); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	verifyPass(t, r, "out")
}

// TestUAICP_5_3_LowRiskPolicy: write_low_risk calls are allowed with
// policy checks; anything but an allow — a denial, an error, a panic, an
// invalid effect — keeps the tool from running (fail closed), and
// needs_review opens an approval request.
func TestUAICP_5_3_LowRiskPolicy(t *testing.T) {
	cases := []struct {
		name     string
		decide   func(govern.PolicyInput) (govern.Decision, error)
		runs     bool
		reasons  []govern.Reason
		decision govern.Effect // the envelope's policy decision of a refused call
	}{
		{name: "allow", runs: true, decide: func(govern.PolicyInput) (govern.Decision, error) {
			return govern.Decision{Effect: govern.Allow, Rule: "ok"}, nil
		}},
		{name: "deny", reasons: []govern.Reason{govern.PolicyBlocked}, decision: govern.Deny, decide: func(govern.PolicyInput) (govern.Decision, error) {
			return govern.Decision{Effect: govern.Deny, Rule: "no"}, nil
		}},
		{name: "needs_review", reasons: []govern.Reason{govern.ApprovalRequired, govern.NeedsReview}, decision: govern.Review,
			decide: func(govern.PolicyInput) (govern.Decision, error) {
				return govern.Decision{Effect: govern.Review, Rule: "look"}, nil
			}},
		{name: "error", reasons: []govern.Reason{govern.PolicyBlocked}, decision: govern.Deny, decide: func(govern.PolicyInput) (govern.Decision, error) {
			return govern.Decision{Effect: govern.Allow}, errors.New("policy engine unreachable")
		}},
		{name: "invalid effect", reasons: []govern.Reason{govern.PolicyBlocked}, decision: govern.Deny, decide: func(govern.PolicyInput) (govern.Decision, error) {
			return govern.Decision{Effect: "maybe"}, nil
		}},
		{name: "empty effect", reasons: []govern.Reason{govern.PolicyBlocked}, decision: govern.Deny, decide: func(govern.PolicyInput) (govern.Decision, error) {
			return govern.Decision{}, nil
		}},
		{name: "panic", reasons: []govern.Reason{govern.PolicyBlocked}, decision: govern.Deny, decide: func(govern.PolicyInput) (govern.Decision, error) {
			panic("policy bug")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spy := &spyPolicy{decide: tc.decide}
			g := newGov(t, govern.Options{Policy: spy, Keyring: keyring(t, alice)})
			r := start(t, g, govern.RunOptions{})
			f := &tool{}
			args := map[string]any{"amount": 5, "to": "acct-1"}
			inv, err := r.Invoke(bg, lowRisk("transfer"), govern.Call{ID: "c1", Args: args}, f.fn)
			if spy.calls() != 1 {
				t.Fatalf("policy asked %d times", spy.calls())
			}
			in := spy.inputs[0]
			if in.Tool != "transfer" || in.Tier != govern.WriteLowRisk || in.RequestID != r.RequestID() || in.TraceID != r.TraceID() ||
				in.Identity.AgentID != agentID || fmt.Sprint(in.Args) != fmt.Sprint(args) {
				t.Errorf("policy input %+v", in)
			}
			if tc.runs {
				if err != nil || f.n() != 1 {
					t.Fatalf("allowed call: err %v, ran %d times", err, f.n())
				}
				checkInvocation(t, inv)
				if inv.Envelope.Metadata[govern.MetaPolicyDecision] != "allow" {
					t.Errorf("envelope policy decision %v", inv.Envelope.Metadata[govern.MetaPolicyDecision])
				}
				verifyPass(t, r, "out")
				return
			}
			if f.n() != 0 {
				t.Fatalf("refused call ran %d times", f.n())
			}
			wantReasons(t, err, tc.reasons...)
			ge := govErr(t, err)
			if ge.Envelope == nil || ge.Envelope.Metadata[govern.MetaPolicyDecision] != string(tc.decision) {
				t.Fatalf("refusal envelope %+v, want policy decision %s", ge.Envelope, tc.decision)
			}
			wantEnvReasons(t, ge.Envelope, tc.reasons...)
			if tc.decision == govern.Review {
				// The review is an approval request; an approval runs it once.
				req := approvalOf(t, g, err)
				if !slices.Contains(req.Reasons, govern.NeedsReview) || req.Tier != govern.WriteLowRisk {
					t.Errorf("approval request %+v", req)
				}
				if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req))}); err != nil {
					t.Fatal(err)
				}
				invoke(t, r, lowRisk("transfer"), govern.Call{ID: "c1", Args: args}, f)
				if f.n() != 1 {
					t.Errorf("approved call ran %d times", f.n())
				}
				verifyPass(t, r, "out")
				return
			}
			blocked := 0
			for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
				switch rec.Kind {
				case recordkind.Blocked:
					blocked++
					if rec.Outcome != govern.Failure || !slices.Contains(rec.Reasons, govern.PolicyBlocked) {
						t.Errorf("blocked record %+v", rec)
					}
				case recordkind.Intent, recordkind.Commit:
					t.Errorf("a refused call has a %s record", rec.Kind)
				}
			}
			if blocked != 1 {
				t.Errorf("%d blocked records", blocked)
			}
			if _, err := r.Fail(bg, "blocked", govern.PolicyBlocked); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUAICP_5_3_HighRiskWithoutToken: a write_high_risk call without an
// approval does not run; it is refused with APPROVAL_REQUIRED and a
// pending envelope whose policy decision is needs_review.
func TestUAICP_5_3_HighRiskWithoutToken(t *testing.T) {
	spy := &spyPolicy{}
	opts := baseOpts(t, nil)
	opts.Policy = spy
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{})
	f := &tool{}
	_, err := r.Invoke(bg, highRisk("delete_db"), govern.Call{ID: "c1", Args: map[string]any{"db": "prod"}}, f.fn)
	if f.n() != 0 {
		t.Fatalf("tool ran %d times", f.n())
	}
	wantReasons(t, err, govern.ApprovalRequired)
	ge := govErr(t, err)
	env := ge.Envelope
	if env == nil {
		t.Fatal("no envelope")
	}
	if env.Outcome != govern.Pending || env.State != govern.Execute || env.Metadata[govern.MetaPolicyDecision] != string(govern.Review) ||
		env.Metadata[govern.MetaRiskTier] != "write_high_risk" || env.Metadata[govern.MetaApprovalID] != ge.ApprovalID || env.Rollback == nil {
		t.Errorf("envelope %+v", env)
	}
	if spy.calls() != 1 || spy.inputs[0].Tier != govern.WriteHighRisk {
		t.Errorf("policy inputs %+v", spy.inputs)
	}
	for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
		if rec.Kind == recordkind.Intent {
			t.Error("intent journaled for a refused call")
		}
	}
	if _, err := r.Fail(bg, "no approval", govern.ApprovalRequired); err != nil {
		t.Fatal(err)
	}
}

// TestUAICP_5_3_HighRiskRollbackMetadata: a write_high_risk call needs
// rollback metadata with a handler for its type, even with a valid
// approval token in hand.
func TestUAICP_5_3_HighRiskRollbackMetadata(t *testing.T) {
	cases := []struct {
		name     string
		rollback func(context.Context, govern.Call) (*govern.RollbackAction, error)
	}{
		{name: "none"},
		{name: "nil action", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) { return nil, nil }},
		{name: "no handler for its type", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Type: "unregistered", Target: "x"}, nil
		}},
		{name: "no type", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Target: "x"}, nil
		}},
		{name: "error", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
			return nil, errors.New("cannot compute")
		}},
		{name: "panic", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) { panic("rollback bug") }},
		// The envelope schema allows only an object or a string as
		// rollback_action.payload: other payloads cannot be carried.
		{name: "number payload", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Type: undoType, Target: "x", Payload: 42}, nil
		}},
		{name: "array payload", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Type: undoType, Target: "x", Payload: []string{"a"}}, nil
		}},
		{name: "null payload", rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Type: undoType, Target: "x", Payload: json.RawMessage("null")}, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGov(t, baseOpts(t, nil))
			r := start(t, g, govern.RunOptions{})
			// A valid token for the same call with rollback metadata.
			args := map[string]any{"id": 1}
			_, err := r.Invoke(bg, highRisk("drop"), govern.Call{ID: "c1", Args: args}, notCalled(t))
			req := approvalOf(t, g, err)
			tok := sign(t, alice, claimsFor(alice, req))
			f := &tool{}
			spec := govern.ToolSpec{Name: "drop", Tier: govern.WriteHighRisk, Rollback: tc.rollback}
			_, err = r.Invoke(bg, spec, govern.Call{ID: "c1", Args: args, Approval: tok}, f.fn)
			if f.n() != 0 {
				t.Fatalf("tool ran %d times", f.n())
			}
			wantReasons(t, err, govern.RollbackRequired)
			if _, err := r.Fail(bg, "no rollback", govern.RollbackRequired); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUAICP_5_3_HighRiskWithTokenAndRollback: with both, the tool runs
// exactly once, and its intent is durable in the journal before it runs.
func TestUAICP_5_3_HighRiskWithTokenAndRollback(t *testing.T) {
	for _, via := range []string{"Decide", "Call.Approval"} {
		t.Run(via, func(t *testing.T) {
			g := newGov(t, baseOpts(t, nil))
			r := start(t, g, govern.RunOptions{})
			spec := highRisk("wire_money")
			call := govern.Call{ID: "c1", Args: map[string]any{"amount": 1000000}}
			_, err := r.Invoke(bg, spec, call, notCalled(t))
			req := approvalOf(t, g, err)
			tok := sign(t, alice, claimsFor(alice, req))
			if via == "Decide" {
				if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
					t.Fatal(err)
				}
			} else {
				call.Approval = tok
			}
			f := &tool{body: func(ctx context.Context) error {
				found := false
				for _, rec := range records(t, g.Journal()) {
					if rec.Kind == recordkind.Intent && rec.CallID == "c1" {
						var in govern.CallIntent
						if err := json.Unmarshal(rec.Data, &in); err != nil {
							t.Error(err)
						}
						found = in.ApprovalID == req.ID && in.Approver == "alice" && in.Rollback != nil && in.Tier == govern.WriteHighRisk
					}
					if rec.Kind == recordkind.Commit && rec.CallID == "c1" {
						t.Error("commit journaled before the tool returned")
					}
				}
				if !found {
					t.Error("no invocation_intent with the approval and rollback in the journal while the tool runs")
				}
				return nil
			}}
			inv := invoke(t, r, spec, call, f)
			if f.n() != 1 {
				t.Fatalf("tool ran %d times", f.n())
			}
			if inv.Envelope.Rollback == nil || inv.Envelope.Rollback.Type != undoType || inv.Tier != govern.WriteHighRisk {
				t.Errorf("invocation envelope %+v", inv.Envelope)
			}
			// Asked again with the same call ID, it is replayed, not re-run.
			again, err := r.Invoke(bg, spec, call, f.fn)
			if err != nil || !again.Replayed || f.n() != 1 {
				t.Fatalf("second invoke: %v replayed=%v ran=%d", err, again != nil && again.Replayed, f.n())
			}
			checkInvocation(t, again)
			verifyPass(t, r, "wired")
		})
	}
}

// TestUAICP_5_3_EffectiveTier: a call runs under the strictest of its
// declared tier, the pinned tier and the task floor; a tool declaring
// none counts as write_high_risk. Checked on EffectiveTier and on the
// gating the API really applies, for all 64 combinations.
func TestUAICP_5_3_EffectiveTier(t *testing.T) {
	tiers := []govern.Tier{0, govern.ReadOnly, govern.WriteLowRisk, govern.WriteHighRisk}
	pinned := map[string]govern.Tier{}
	var classes []govern.TaskClass
	for _, p := range tiers {
		if p != 0 {
			for _, d := range tiers {
				pinned[fmt.Sprintf("tool-d%d-p%d", d, p)] = p
			}
		}
		classes = append(classes, govern.TaskClass{Name: fmt.Sprintf("floor%d", p), Floor: p})
	}
	spy := &spyPolicy{}
	g := newGov(t, govern.Options{Policy: spy, Pinned: pinned, Classes: classes})
	for _, floor := range tiers {
		r := start(t, g, govern.RunOptions{TaskClass: fmt.Sprintf("floor%d", floor)})
		for _, declared := range tiers {
			for _, pin := range tiers {
				want := max(declared, pin, floor)
				if declared == 0 {
					want = govern.WriteHighRisk
				}
				if got := govern.EffectiveTier(declared, pin, floor); got != want {
					t.Errorf("EffectiveTier(%s, %s, %s) = %s, want %s", declared, pin, floor, got, want)
				}
				name := fmt.Sprintf("tool-d%d-p%d", declared, pin)
				before := spy.calls()
				f := &tool{}
				inv, err := r.Invoke(bg, govern.ToolSpec{Name: name, Tier: declared}, govern.Call{}, f.fn)
				asked := spy.calls() - before
				switch want {
				case govern.ReadOnly:
					if err != nil || inv.Tier != govern.ReadOnly || asked != 0 || f.n() != 1 {
						t.Errorf("%s floor %s: read_only gating: err %v, asked %d, ran %d", name, floor, err, asked, f.n())
					}
				case govern.WriteLowRisk:
					if err != nil || inv.Tier != govern.WriteLowRisk || asked != 1 || spy.inputs[before].Tier != want || f.n() != 1 {
						t.Errorf("%s floor %s: write_low_risk gating: err %v, asked %d, ran %d", name, floor, err, asked, f.n())
					}
				case govern.WriteHighRisk:
					// No rollback metadata: refused before any approval.
					if !errors.Is(err, govern.RollbackRequired) || asked != 1 || spy.inputs[before].Tier != want || f.n() != 0 {
						t.Errorf("%s floor %s: write_high_risk gating: err %v, asked %d, ran %d", name, floor, err, asked, f.n())
						continue
					}
					env := govErr(t, err).Envelope
					wantDeclared := declared.String()
					if env.Metadata[govern.MetaRiskTier] != "write_high_risk" || env.Metadata[govern.MetaDeclaredTier] != wantDeclared {
						t.Errorf("%s: envelope tiers %v / %v", name, env.Metadata[govern.MetaRiskTier], env.Metadata[govern.MetaDeclaredTier])
					}
				}
			}
		}
		if _, err := r.Fail(bg, "done"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUAICP_5_3_UnknownToolIsHighRisk: a tool declaring no tier gets the
// full write_high_risk gating: approval and rollback.
func TestUAICP_5_3_UnknownToolIsHighRisk(t *testing.T) {
	g := newGov(t, baseOpts(t, nil))
	r := start(t, g, govern.RunOptions{})
	spec := withRollback(govern.ToolSpec{Name: "mystery"})
	_, err := r.Invoke(bg, spec, govern.Call{ID: "c1"}, notCalled(t))
	req := approvalOf(t, g, err)
	if req.Tier != govern.WriteHighRisk {
		t.Errorf("approval request tier %s", req.Tier)
	}
	if env := govErr(t, err).Envelope; env.Metadata[govern.MetaDeclaredTier] != "unknown" {
		t.Errorf("declared tier %v, want unknown", env.Metadata[govern.MetaDeclaredTier])
	}
	if _, err := r.Invoke(bg, govern.ToolSpec{Name: "mystery"}, govern.Call{ID: "c2"}, notCalled(t)); !errors.Is(err, govern.RollbackRequired) {
		t.Errorf("unknown tool without rollback: %v", err)
	}
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
}

// TestUAICP_5_3_PinnedAboveDeclared: a tool that declares read_only but
// is pinned higher is gated as the pinned tier; pinning lower than
// declared changes nothing.
func TestUAICP_5_3_PinnedAboveDeclared(t *testing.T) {
	opts := baseOpts(t, nil)
	spy := &spyPolicy{}
	opts.Policy = spy
	opts.Pinned = map[string]govern.Tier{"innocent": govern.WriteHighRisk, "careful": govern.ReadOnly}
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{})
	if _, err := r.Invoke(bg, readOnly("innocent"), govern.Call{ID: "c1"}, notCalled(t)); !errors.Is(err, govern.RollbackRequired) {
		t.Errorf("pinned high, no rollback: %v", err)
	}
	inv := approveAndRun(t, g, r, withRollback(readOnly("innocent")), govern.Call{ID: "c2"})
	if inv.Tier != govern.WriteHighRisk {
		t.Errorf("tier %s", inv.Tier)
	}
	f := &tool{}
	inv = invoke(t, r, lowRisk("careful"), govern.Call{ID: "c3"}, f)
	if inv.Tier != govern.WriteLowRisk || spy.calls() != 4 {
		t.Errorf("pinned lower than declared: tier %s, policy asked %d times", inv.Tier, spy.calls())
	}
	verifyPass(t, r, "out")
}

// approveAndRun approves a call whose approval request is pending and
// runs it.
func approveAndRun(t *testing.T, g *govern.Governor, r *govern.Run, spec govern.ToolSpec, call govern.Call) *govern.Invocation {
	t.Helper()
	approve(t, g, r, spec, call, alice)
	f := &tool{}
	inv := invoke(t, r, spec, call, f)
	if f.n() != 1 {
		t.Fatalf("approved call ran %d times", f.n())
	}
	return inv
}

// TestUAICP_5_3_TierViolation: a tool running as read_only that writes
// through its handle — announced with govern.BeforeWrite, or an HTTP
// write through govern.Transport — is stopped before the write, the call
// fails with TIER_VIOLATION and the run fails safe, rolling back the
// run's earlier writes.
func TestUAICP_5_3_TierViolation(t *testing.T) {
	var mu sync.Mutex
	received := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		received[req.Method]++
		mu.Unlock()
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	client := &http.Client{Transport: govern.Transport(srv.Client().Transport)}
	do := func(ctx context.Context, method string) error {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+"/records", strings.NewReader(`{"x":1}`))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	count := func(method string) int {
		mu.Lock()
		defer mu.Unlock()
		return received[method]
	}

	cases := []struct {
		name string
		body func(ctx context.Context) error
	}{
		{"BeforeWrite", func(ctx context.Context) error { return govern.BeforeWrite(ctx, "UPDATE accounts") }},
		{"BeforeWrite ignored", func(ctx context.Context) error { _ = govern.BeforeWrite(ctx, "UPDATE accounts"); return nil }},
		{"HTTP POST", func(ctx context.Context) error { return do(ctx, http.MethodPost) }},
		{"HTTP DELETE ignored", func(ctx context.Context) error { _ = do(ctx, http.MethodDelete); return nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &rollbackLog{}
			g := newGov(t, baseOpts(t, log))
			r := start(t, g, govern.RunOptions{})
			invoke(t, r, withRollback(lowRisk("prepare")), govern.Call{ID: "w1"}, &tool{})
			posts, deletes := count(http.MethodPost), count(http.MethodDelete)
			f := &tool{body: tc.body}
			_, err := r.Invoke(bg, readOnly("sneaky"), govern.Call{ID: "c1"}, f.fn)
			wantReasons(t, err, govern.TierViolation)
			if f.n() != 1 {
				t.Errorf("tool ran %d times", f.n())
			}
			if count(http.MethodPost) != posts || count(http.MethodDelete) != deletes {
				t.Error("the server received the write")
			}
			if r.Phase() != govern.FailSafe || !slices.Contains(r.Reasons(), govern.TierViolation) {
				t.Errorf("run phase %s reasons %v, want fail_safe with TIER_VIOLATION", r.Phase(), r.Reasons())
			}
			if diff := cmp.Diff([]string{"w1"}, log.targets()); diff != "" {
				t.Errorf("rollbacks (-want +got):\n%s", diff)
			}
			var failed bool
			for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
				if rec.Kind == recordkind.Failed && rec.CallID == "c1" && slices.Contains(rec.Reasons, govern.TierViolation) {
					failed = true
				}
				if rec.Kind == recordkind.Commit && rec.CallID == "c1" {
					t.Error("the violating call committed")
				}
			}
			if !failed {
				t.Error("no invocation_failed record with TIER_VIOLATION")
			}
			if env := r.Envelope(); env.Outcome != govern.Uncertain {
				t.Errorf("envelope outcome %s", env.Outcome)
			} else {
				wantEnvReasons(t, &env, govern.TierViolation)
			}
		})
	}
	t.Run("reads and declared writes pass", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		gets, posts := count(http.MethodGet), count(http.MethodPost)
		invoke(t, r, readOnly("reader"), govern.Call{ID: "c1"}, &tool{body: func(ctx context.Context) error { return do(ctx, http.MethodGet) }})
		invoke(t, r, lowRisk("writer"), govern.Call{ID: "c2"}, &tool{body: func(ctx context.Context) error {
			if err := govern.BeforeWrite(ctx, "UPDATE"); err != nil {
				return err
			}
			return do(ctx, http.MethodPost)
		}})
		if count(http.MethodGet) != gets+1 || count(http.MethodPost) != posts+1 {
			t.Errorf("server saw GET %d→%d POST %d→%d", gets, count(http.MethodGet), posts, count(http.MethodPost))
		}
		if err := govern.BeforeWrite(bg, "outside a call"); err != nil {
			t.Errorf("BeforeWrite outside a call: %v", err)
		}
		verifyPass(t, r, "out")
	})
}

// TestUAICP_5_3_RulePolicy checks the YAML rule policy: each matcher,
// each condition op, first match wins, the default.
func TestUAICP_5_3_RulePolicy(t *testing.T) {
	const doc = `
default: deny
rules:
  - name: by-tool
    tools: ["refund_*", "void"]
    effect: allow
  - name: by-tier
    tiers: [write_high_risk]
    effect: needs_review
    reason: high risk needs eyes
  - name: by-agent
    agents: ["agent:ops-*"]
    effect: allow
  - name: by-owner
    owners: [org:acme]
    effect: allow
  - name: by-control-class
    control_classes: [human-directed]
    effect: allow
  - name: by-task-class
    task_classes: ["billing*"]
    effect: allow
  - name: combined
    tools: [pay]
    control_classes: [autonomous]
    when:
      - {arg: amount, op: le, value: 100}
    effect: allow
  - tools: [cond]
    when: [{arg: n, op: eq, value: 1}]
    effect: allow
  - name: nested
    tools: [cond]
    when: [{arg: customer.tier, op: in, value: [gold, platinum]}, {arg: n, op: ge, value: 2}]
    effect: needs_review
`
	p, err := govern.ParseRulePolicy([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	base := govern.PolicyInput{Tool: "other", Tier: govern.WriteLowRisk, Identity: govern.Identity{AgentID: "agent:x", OwnerID: "org:x", ControlClass: govern.HumanSupervised}}
	with := func(f func(*govern.PolicyInput)) govern.PolicyInput { in := base; f(&in); return in }
	args := func(a map[string]any) govern.PolicyInput {
		return with(func(in *govern.PolicyInput) { in.Tool, in.Args = "cond", a })
	}
	cases := []struct {
		name   string
		in     govern.PolicyInput
		effect govern.Effect
		rule   string
	}{
		{"default", base, govern.Deny, "default"},
		{"tool pattern", with(func(in *govern.PolicyInput) { in.Tool = "refund_card" }), govern.Allow, "by-tool"},
		{"tool literal", with(func(in *govern.PolicyInput) { in.Tool = "void" }), govern.Allow, "by-tool"},
		{"tool pattern no match", with(func(in *govern.PolicyInput) { in.Tool = "my_refund_card" }), govern.Deny, "default"},
		{"first match wins", with(func(in *govern.PolicyInput) { in.Tool, in.Tier = "refund_x", govern.WriteHighRisk }), govern.Allow, "by-tool"},
		{"tier", with(func(in *govern.PolicyInput) { in.Tier = govern.WriteHighRisk }), govern.Review, "by-tier"},
		{"agent", with(func(in *govern.PolicyInput) { in.Identity.AgentID = "agent:ops-7" }), govern.Allow, "by-agent"},
		{"owner", with(func(in *govern.PolicyInput) { in.Identity.OwnerID = "org:acme" }), govern.Allow, "by-owner"},
		{"control class", with(func(in *govern.PolicyInput) { in.Identity.ControlClass = govern.HumanDirected }), govern.Allow, "by-control-class"},
		{"task class", with(func(in *govern.PolicyInput) { in.TaskClass = "billing-eu" }), govern.Allow, "by-task-class"},
		{"combined all hold", with(func(in *govern.PolicyInput) {
			in.Tool, in.Identity.ControlClass, in.Args = "pay", govern.Autonomous, map[string]any{"amount": 100}
		}), govern.Allow, "combined"},
		{"combined condition fails", with(func(in *govern.PolicyInput) {
			in.Tool, in.Identity.ControlClass, in.Args = "pay", govern.Autonomous, map[string]any{"amount": 100.5}
		}), govern.Deny, "default"},
		{"combined class fails", with(func(in *govern.PolicyInput) { in.Tool, in.Args = "pay", map[string]any{"amount": 1} }), govern.Deny, "default"},
		{"unnamed rule", args(map[string]any{"n": 1.0}), govern.Allow, "rule 8"},
		{"string is not a number", args(map[string]any{"n": "1"}), govern.Deny, "default"},
		{"all conditions hold", args(map[string]any{"n": 2, "customer": map[string]any{"tier": "gold"}}), govern.Review, "nested"},
		{"one condition fails", args(map[string]any{"n": 2, "customer": map[string]any{"tier": "silver"}}), govern.Deny, "default"},
		{"condition on a missing arg", args(map[string]any{"customer": map[string]any{"tier": "gold"}}), govern.Deny, "default"},
		{"path through a non-object", args(map[string]any{"n": 2, "customer": "gold"}), govern.Deny, "default"},
	}
	for _, tc := range cases {
		d, err := p.Decide(bg, tc.in)
		if err != nil || d.Effect != tc.effect || d.Rule != tc.rule {
			t.Errorf("%s: decision %+v %v, want %s by %q", tc.name, d, err, tc.effect, tc.rule)
		}
	}
	if d, _ := p.Decide(bg, with(func(in *govern.PolicyInput) { in.Tier = govern.WriteHighRisk })); !slices.Equal(d.Reasons, []string{"high risk needs eyes"}) {
		t.Errorf("reasons %v", d.Reasons)
	}

	// The ops one at a time, each rule alone.
	ops := []struct {
		cond string
		args map[string]any
		want bool
	}{
		{`{arg: n, op: eq, value: 3}`, map[string]any{"n": 3}, true},
		{`{arg: n, op: eq, value: 3}`, map[string]any{"n": 3.5}, false},
		{`{arg: s, op: eq, value: "a"}`, map[string]any{"s": "a"}, true},
		{`{arg: b, op: eq, value: true}`, map[string]any{"b": true}, true},
		{`{arg: n, op: ne, value: 3}`, map[string]any{"n": 4}, true},
		{`{arg: n, op: ne, value: 3}`, map[string]any{}, false},
		{`{arg: n, op: gt, value: 3}`, map[string]any{"n": 3.1}, true},
		{`{arg: n, op: ge, value: 3}`, map[string]any{"n": 3}, true},
		{`{arg: n, op: ge, value: 3}`, map[string]any{"n": 2.9}, false},
		{`{arg: n, op: lt, value: 3}`, map[string]any{"n": 2}, true},
		{`{arg: n, op: lt, value: 3}`, map[string]any{"n": 3}, false},
		{`{arg: n, op: le, value: 3}`, map[string]any{"n": 3}, true},
		{`{arg: n, op: le, value: 3}`, map[string]any{"n": 4}, false},
		{`{arg: s, op: in, value: [a, 2]}`, map[string]any{"s": "a"}, true},
		{`{arg: s, op: in, value: [a, 2]}`, map[string]any{"s": 2.0}, true},
		{`{arg: s, op: in, value: [a, 2]}`, map[string]any{"s": "c"}, false},
		{`{arg: a.b.c, op: exists}`, map[string]any{"a": map[string]any{"b": map[string]any{"c": nil}}}, true},
		{`{arg: a.b.c, op: exists}`, map[string]any{"a": map[string]any{"b": 1}}, false},
		{`{arg: a, op: absent}`, map[string]any{"b": 1}, true},
		{`{arg: a, op: absent}`, map[string]any{"a": nil}, false},
		{`{arg: s, op: matches, value: "db-*"}`, map[string]any{"s": "db-prod"}, true},
		{`{arg: s, op: matches, value: "db-*"}`, map[string]any{"s": "xdb-prod"}, false},
		{`{arg: s, op: matches, value: "db-*"}`, map[string]any{"s": 7}, false},
	}
	for _, op := range ops {
		p, err := govern.ParseRulePolicy([]byte("rules:\n  - effect: allow\n    when: [" + op.cond + "]\n"))
		if err != nil {
			t.Errorf("%s: %v", op.cond, err)
			continue
		}
		d, _ := p.Decide(bg, govern.PolicyInput{Tool: "t", Tier: govern.WriteLowRisk, Args: op.args})
		if got := d.Rule == "rule 1"; got != op.want {
			t.Errorf("%s on %v: matched %v, want %v", op.cond, op.args, got, op.want)
		}
	}

	// An empty default allows.
	if p, err := govern.ParseRulePolicy([]byte("rules: []\n")); err != nil {
		t.Error(err)
	} else if d, _ := p.Decide(bg, base); d.Effect != govern.Allow {
		t.Errorf("empty default: %+v", d)
	}
}

// TestUAICP_5_3_RulePolicyValidation: bad policy files are refused with
// an error naming the problem.
func TestUAICP_5_3_RulePolicyValidation(t *testing.T) {
	cases := map[string]string{
		"bad default":           "default: maybe\n",
		"bad effect":            "rules: [{effect: perhaps}]\n",
		"missing effect":        "rules: [{name: x, tools: [a]}]\n",
		"unknown tier":          "rules: [{effect: allow, tiers: [write_medium]}]\n",
		"bad control class":     "rules: [{effect: allow, control_classes: [robot]}]\n",
		"bad tool pattern":      "rules: [{effect: allow, tools: ['[']}]\n",
		"bad agent pattern":     "rules: [{effect: allow, agents: ['a[']}]\n",
		"condition without arg": "rules: [{effect: allow, when: [{op: eq, value: 1}]}]\n",
		"unknown op":            "rules: [{effect: allow, when: [{arg: a, op: like, value: 1}]}]\n",
		"exists with value":     "rules: [{effect: allow, when: [{arg: a, op: exists, value: 1}]}]\n",
		"eq without value":      "rules: [{effect: allow, when: [{arg: a, op: eq}]}]\n",
		"in without list":       "rules: [{effect: allow, when: [{arg: a, op: in, value: 1}]}]\n",
		"matches non-string":    "rules: [{effect: allow, when: [{arg: a, op: matches, value: 1}]}]\n",
		"matches bad pattern":   "rules: [{effect: allow, when: [{arg: a, op: matches, value: '['}]}]\n",
		"gt non-number":         "rules: [{effect: allow, when: [{arg: a, op: gt, value: ten}]}]\n",
		"unknown field":         "rules: [{effect: allow, tool: [a]}]\n",
		"unknown top field":     "defaults: allow\n",
		"not yaml":              "rules: [\n",
		"wrong type":            "rules: {effect: allow}\n",
	}
	for name, doc := range cases {
		if _, err := govern.ParseRulePolicy([]byte(doc)); err == nil {
			t.Errorf("%s: ParseRulePolicy accepted %q", name, doc)
		}
	}
}

// TestUAICP_5_3_RulePolicyGovernsCalls: a RulePolicy as the governor's
// policy decides real calls.
func TestUAICP_5_3_RulePolicyGovernsCalls(t *testing.T) {
	p, err := govern.ParseRulePolicy([]byte(`
rules:
  - name: big-refunds
    tools: ["refund_*"]
    when: [{arg: amount, op: gt, value: 1000}]
    effect: needs_review
  - name: no-deletes
    tools: ["delete_*"]
    effect: deny
`))
	if err != nil {
		t.Fatal(err)
	}
	opts := baseOpts(t, nil)
	opts.Policy = p
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{})
	f := &tool{}
	invoke(t, r, lowRisk("refund_card"), govern.Call{ID: "small", Args: map[string]any{"amount": 10}}, f)
	_, err = r.Invoke(bg, lowRisk("refund_card"), govern.Call{ID: "big", Args: map[string]any{"amount": 5000}}, f.fn)
	wantReasons(t, err, govern.ApprovalRequired, govern.NeedsReview)
	if env := govErr(t, err).Envelope; env.Metadata[govern.MetaPolicyRule] != "big-refunds" {
		t.Errorf("policy rule %v", env.Metadata[govern.MetaPolicyRule])
	}
	_, err = r.Invoke(bg, lowRisk("delete_user"), govern.Call{ID: "del"}, f.fn)
	wantReasons(t, err, govern.PolicyBlocked)
	if f.n() != 1 {
		t.Errorf("tool ran %d times", f.n())
	}
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
}

// TestUAICP_5_3_RollbackPayloads: rollback payloads the envelope can
// carry — none, an object, a string — are accepted and shown on the
// call's envelope.
func TestUAICP_5_3_RollbackPayloads(t *testing.T) {
	g := newGov(t, baseOpts(t, nil))
	r := start(t, g, govern.RunOptions{})
	for i, p := range []any{nil, "row 7", map[string]any{"id": 7}, json.RawMessage(`{"id":8}`)} {
		spec := govern.ToolSpec{Name: "put", Tier: govern.WriteLowRisk, Rollback: func(context.Context, govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Type: undoType, Target: "t", Payload: p}, nil
		}}
		inv := invoke(t, r, spec, govern.Call{ID: fmt.Sprintf("c%d", i)}, &tool{})
		if inv.Envelope.Rollback == nil {
			t.Errorf("payload %v: no rollback_action on the envelope", p)
		}
	}
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
}

// TestUAICP_7_ToolFailures: a tool that errors, panics, overruns
// Options.ToolTimeout or is cancelled fails its call with the matching
// reason; the failure is journaled and yields no evidence. Each case runs
// in a synctest bubble: the 1 ms tool timeout fires only once every
// goroutine of the bubble is blocked, so under load it never overtakes a
// tool that errs, panics or is cancelled.
func TestUAICP_7_ToolFailures(t *testing.T) {
	cases := []struct {
		name   string
		fn     func(ctx context.Context, cancel context.CancelFunc) (any, error)
		reason govern.Reason
	}{
		{"error", func(context.Context, context.CancelFunc) (any, error) { return nil, errors.New("404") }, govern.ToolFailed},
		{"panic", func(context.Context, context.CancelFunc) (any, error) { panic("tool bug") }, govern.ToolFailed},
		{"timeout", func(ctx context.Context, _ context.CancelFunc) (any, error) { <-ctx.Done(); return nil, ctx.Err() }, govern.ToolTimeout},
		{"cancelled", func(ctx context.Context, cancel context.CancelFunc) (any, error) { cancel(); return nil, ctx.Err() }, govern.Cancelled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGov(t, govern.Options{ToolTimeout: time.Millisecond})
				r := start(t, g, govern.RunOptions{})
				ctx, cancel := context.WithCancel(bg)
				defer cancel()
				_, err := r.Invoke(ctx, lowRisk("call"), govern.Call{ID: "c1"}, func(ctx context.Context) (any, error) { return tc.fn(ctx, cancel) })
				wantReasons(t, err, tc.reason)
				if ge := govErr(t, err); ge.Tool != "call" || ge.CallID != "c1" {
					t.Errorf("error names %s/%s", ge.Tool, ge.CallID)
				}
				if len(r.Evidence()) != 0 {
					t.Errorf("a failed call yielded evidence")
				}
				recs := runRecords(t, g.Journal(), r.RequestID())
				if last := recs[len(recs)-1]; last.Kind != recordkind.Failed || !slices.Contains(last.Reasons, tc.reason) || last.Outcome != govern.Failure {
					t.Errorf("last record %+v", last)
				}
				if _, err := r.Fail(bg, "done", tc.reason); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
