package govern_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// TestUAICP_5_2_VerifierMustBeRegistered: a class requiring a verifier
// that is not registered does not configure.
func TestUAICP_5_2_VerifierMustBeRegistered(t *testing.T) {
	pass := govern.CheckVerifier("ok", func(context.Context, govern.VerifyInput) []govern.Check {
		return []govern.Check{{CheckID: "c", Result: govern.CheckPass}}
	})
	bad := []govern.Options{
		{Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"missing"}}}},
		{Verifiers: []govern.Verifier{pass}, Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"ok", "missing"}}}},
		{Verifiers: []govern.Verifier{pass, pass}},
		{Verifiers: []govern.Verifier{govern.NewVerifier("", nil)}},
		{Classes: []govern.TaskClass{{Name: ""}}},
		{Classes: []govern.TaskClass{{Name: "k"}, {Name: "k"}}},
		{Classes: []govern.TaskClass{{Name: "k", Floor: 7}}},
		{Classes: []govern.TaskClass{{Name: "k", RequiredEvidence: []govern.EvidenceType{"screenshot"}}}},
		{Pinned: map[string]govern.Tier{"t": 0}},
	}
	for i, o := range bad {
		o.Logger = quietLogger
		if _, err := govern.New(bg, &o); err == nil {
			t.Errorf("options %d: New succeeded", i)
		}
	}
}

// TestUAICP_5_2_VerifierFailuresFailClosed runs one required verifier of
// each failing kind: the verdict fails (VERIFICATION_FAILED, with
// VERIFIER_ERROR where the verifier itself misbehaved), the reports are
// journaled and valid, and Deliver stays unreachable.
func TestUAICP_5_2_VerifierFailuresFailClosed(t *testing.T) {
	report := func(r *govern.Report) func(context.Context, govern.VerifyInput) (*govern.Report, error) {
		return func(context.Context, govern.VerifyInput) (*govern.Report, error) { c := *r; return &c, nil }
	}
	passCheck := []govern.Check{{CheckID: "c", Result: govern.CheckPass}}
	cases := []struct {
		name           string
		verify         func(context.Context, govern.VerifyInput) (*govern.Report, error)
		verifierError  bool
		wantReportBody string // a substring of the failing check's details
	}{
		{name: "fails", verify: report(&govern.Report{Status: govern.ReportFail, Checks: []govern.Check{{CheckID: "c", Result: govern.CheckFail}}})},
		{name: "pass with a failing check", verify: report(&govern.Report{Status: govern.ReportPass, Checks: []govern.Check{
			{CheckID: "a", Result: govern.CheckPass}, {CheckID: "b", Result: govern.CheckFail}}})},
		{name: "partial", verify: report(&govern.Report{Status: govern.ReportPartial, Checks: passCheck})},
		{name: "no report", verifierError: true, wantReportBody: "no report",
			verify: func(context.Context, govern.VerifyInput) (*govern.Report, error) { return nil, nil }},
		{name: "error", verifierError: true, wantReportBody: "database down",
			verify: func(context.Context, govern.VerifyInput) (*govern.Report, error) {
				return nil, errors.New("database down")
			}},
		{name: "error with a passing report", verifierError: true,
			verify: func(context.Context, govern.VerifyInput) (*govern.Report, error) {
				return &govern.Report{Status: govern.ReportPass, Checks: passCheck}, errors.New("half done")
			}},
		{name: "panic", verifierError: true, wantReportBody: "panicked",
			verify: func(context.Context, govern.VerifyInput) (*govern.Report, error) { panic("verifier bug") }},
		{name: "timeout", verifierError: true,
			verify: func(ctx context.Context, _ govern.VerifyInput) (*govern.Report, error) {
				<-ctx.Done()
				return &govern.Report{Status: govern.ReportPass, Checks: passCheck}, nil
			}},
		{name: "other request", verifierError: true, wantReportBody: "report is for request",
			verify: report(&govern.Report{RequestID: "4b9e2a4e-3f6c-4c59-9a43-0a1c4f1f9c11", Status: govern.ReportPass, Checks: passCheck})},
		{name: "no checks", verifierError: true, wantReportBody: "no checks",
			verify: report(&govern.Report{Status: govern.ReportPass})},
		{name: "bad status", verifierError: true, wantReportBody: "status",
			verify: report(&govern.Report{Status: "ok", Checks: passCheck})},
		{name: "bad check result", verifierError: true, wantReportBody: "malformed check",
			verify: report(&govern.Report{Status: govern.ReportPass, Checks: []govern.Check{{CheckID: "c", Result: "maybe"}}})},
		{name: "check without id", verifierError: true, wantReportBody: "malformed check",
			verify: report(&govern.Report{Status: govern.ReportPass, Checks: []govern.Check{{Result: govern.CheckPass}}})},
		{name: "cites unknown evidence", verifierError: true, wantReportBody: "cites evidence",
			verify: report(&govern.Report{Status: govern.ReportPass, Checks: passCheck, EvidenceIDs: []string{"made-up"}})},
	}
	for _, tc := range cases {
		// In a synctest bubble the timeout case's 1 ms budget expires only
		// once the verifier blocks on its context: the verifier always
		// runs, however loaded the machine.
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				v := govern.NewVerifier("v", func(ctx context.Context, in govern.VerifyInput) (*govern.Report, error) {
					calls.Add(1)
					return tc.verify(ctx, in)
				})
				timeout := time.Minute
				if tc.name == "timeout" {
					timeout = time.Millisecond
				}
				g := newGov(t, govern.Options{Verifiers: []govern.Verifier{v}, VerifierTimeout: timeout,
					Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"v"}}}})
				r := start(t, g, govern.RunOptions{TaskClass: "k"})
				invoke(t, r, readOnly("lookup"), govern.Call{ID: "c1"}, &tool{})
				verdict, err := r.Verify(bg, "out")
				if err != nil {
					t.Fatal(err)
				}
				checkVerdict(t, verdict)
				if verdict.Passed {
					t.Fatal("verdict passed")
				}
				if n := calls.Load(); n != 1 {
					t.Errorf("verifier called %d times", n)
				}
				if !slices.Contains(verdict.Reasons, govern.VerificationFailed) {
					t.Errorf("reasons %v, want VERIFICATION_FAILED", verdict.Reasons)
				}
				if got := slices.Contains(verdict.Reasons, govern.VerifierError); got != tc.verifierError {
					t.Errorf("reasons %v: VERIFIER_ERROR present = %v, want %v", verdict.Reasons, got, tc.verifierError)
				}
				rep := verdict.Reports[len(verdict.Reports)-1]
				if rep.VerifierID != "v" || rep.RequestID != r.RequestID() || rep.Passed() {
					t.Errorf("verifier report %+v", rep)
				}
				if tc.wantReportBody != "" && !strings.Contains(rep.Checks[0].Details, tc.wantReportBody) {
					t.Errorf("report details %q, want %q in them", rep.Checks[0].Details, tc.wantReportBody)
				}
				if _, err := r.Deliver(bg, "out"); !errors.Is(err, govern.ErrNotVerified) {
					t.Errorf("Deliver: err = %v, want ErrNotVerified", err)
				}
				nver := 0
				for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
					if rec.Kind == recordkind.Verification {
						nver++
						if rec.Outcome != govern.Success && rec.Outcome != govern.Failure {
							t.Errorf("verification record outcome %s", rec.Outcome)
						}
					}
				}
				if nver != 2 {
					t.Errorf("%d verification records, want the gate's and the verifier's", nver)
				}
				env, err := r.Fail(bg, "verifier failed", verdict.Reasons...)
				if err != nil {
					t.Fatal(err)
				}
				wantEnvReasons(t, env, govern.VerificationFailed)
				if _, err := r.Deliver(bg, "out"); !errors.Is(err, govern.ErrRunClosed) {
					t.Errorf("Deliver after fail: %v", err)
				}
			})
		})
	}
}

// TestUAICP_5_2_PassingVerifiers: every required verifier sees the run's
// evidence and the candidate output; when all pass, the run delivers and
// the deliver envelope names the reports it rests on.
func TestUAICP_5_2_PassingVerifiers(t *testing.T) {
	var seen govern.VerifyInput
	cites := govern.NewVerifier("cites", func(ctx context.Context, in govern.VerifyInput) (*govern.Report, error) {
		seen = in
		if len(in.Evidence) > 0 && len(in.Evidence[0].Payload) > 0 {
			in.Evidence[0].Payload[0] = '!' // must not reach the run's copy
		}
		var ids []string
		for _, e := range in.Evidence {
			ids = append(ids, e.EvidenceID)
		}
		return &govern.Report{Status: govern.ReportPass, EvidenceIDs: ids, Checks: []govern.Check{
			{CheckID: "has-evidence", Result: govern.CheckPass}, {CheckID: "optional", Result: govern.CheckSkip}}}, nil
	})
	output := govern.CheckVerifier("output", func(ctx context.Context, in govern.VerifyInput) []govern.Check {
		res := govern.CheckFail
		if string(in.Output) == `{"answer":42}` {
			res = govern.CheckPass
		}
		return []govern.Check{{CheckID: "answer", Result: res}}
	})
	g := newGov(t, govern.Options{Verifiers: []govern.Verifier{cites, output},
		Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"cites", "output"}, RequiredEvidence: []govern.EvidenceType{govern.ToolResult}}}})
	r := start(t, g, govern.RunOptions{TaskClass: "k"})
	inv := invoke(t, r, readOnly("lookup"), govern.Call{ID: "c1"}, &tool{})
	out := map[string]any{"answer": 42}
	env := verifyPass(t, r, out)
	if seen.RequestID != r.RequestID() || seen.TraceID != r.TraceID() || seen.TaskClass != "k" || len(seen.Evidence) != 1 ||
		seen.Evidence[0].EvidenceID != inv.Evidence[0].EvidenceID {
		t.Errorf("verifier input %+v", seen)
	}
	ids, _ := env.Metadata[govern.MetaReportIDs].([]string)
	if len(ids) != 3 {
		t.Errorf("deliver envelope report ids %v, want the gate's and two verifiers'", env.Metadata[govern.MetaReportIDs])
	}
	// Evidence a verifier mutates in its input does not change the run's.
	for _, e := range r.Evidence() {
		if !e.CheckHash() {
			t.Errorf("evidence %s no longer matches its hash", e.EvidenceID)
		}
	}
}
