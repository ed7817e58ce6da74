package govern_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/google/go-cmp/cmp"
)

var allPhases = []govern.Phase{govern.Intake, govern.Plan, govern.Execute, govern.Verify, govern.Deliver, govern.FailSafe}

// TestUAICP_4_CanTransitionTable pins all 36 (from, to) pairs of the §4
// state machine: the forward chain, the §4.1 repair edges and fail_safe
// from every non-terminal phase; nothing leaves deliver or fail_safe.
func TestUAICP_4_CanTransitionTable(t *testing.T) {
	edges := map[[2]govern.Phase]bool{
		{govern.Intake, govern.Plan}:      true,
		{govern.Intake, govern.FailSafe}:  true,
		{govern.Plan, govern.Execute}:     true,
		{govern.Plan, govern.FailSafe}:    true,
		{govern.Execute, govern.Verify}:   true,
		{govern.Execute, govern.FailSafe}: true,
		{govern.Verify, govern.Deliver}:   true,
		{govern.Verify, govern.Plan}:      true, // repair
		{govern.Verify, govern.Execute}:   true, // repair
		{govern.Verify, govern.FailSafe}:  true,
	}
	n := 0
	for _, from := range allPhases {
		for _, to := range allPhases {
			n++
			if got, want := govern.CanTransition(from, to), edges[[2]govern.Phase{from, to}]; got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if n != 36 {
		t.Fatalf("checked %d pairs, want 36", n)
	}
	for _, p := range allPhases {
		if p.Terminal() != (p == govern.Deliver || p == govern.FailSafe) {
			t.Errorf("%s.Terminal() = %v", p, p.Terminal())
		}
		for _, bogus := range []govern.Phase{"", "done", "DELIVER"} {
			if govern.CanTransition(p, bogus) || govern.CanTransition(bogus, p) {
				t.Errorf("CanTransition accepts the unknown phase %q", bogus)
			}
		}
	}
}

// TestUAICP_4_RunTakesTheMachineOrder checks the transitions a run
// really journals, in order, for a delivered run, a repaired run and a
// failed one.
func TestUAICP_4_RunTakesTheMachineOrder(t *testing.T) {
	t.Run("deliver", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		d, err := g.Execute(bg, &govern.RunOptions{Identity: testIdentity()}, func(ctx context.Context, r *govern.Run, _ *govern.Verdict) (any, error) {
			if _, err := r.Invoke(ctx, readOnly("lookup"), govern.Call{ID: "c1"}, (&tool{}).fn); err != nil {
				return nil, err
			}
			return "answer", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		checkWire(t, d.Envelope)
		want := []string{"intake→plan", "plan→execute", "execute→verify", "verify→deliver"}
		if diff := cmp.Diff(want, transitions(t, g.Journal(), d.Run.RequestID())); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
		recs := runRecords(t, g.Journal(), d.Run.RequestID())
		if recs[0].Kind != recordkind.RunStarted || recs[len(recs)-1].Kind != recordkind.Transition || recs[len(recs)-1].To != govern.Deliver {
			t.Errorf("records %v: want run_started first and the deliver transition last", kinds(recs))
		}
		if d.Envelope.State != govern.Deliver || d.Envelope.Outcome != govern.Success {
			t.Errorf("envelope state %s outcome %s", d.Envelope.State, d.Envelope.Outcome)
		}
	})
	t.Run("repair", func(t *testing.T) {
		attempts := 0
		v := govern.NewVerifier("second-time", func(ctx context.Context, in govern.VerifyInput) (*govern.Report, error) {
			attempts++
			res := govern.CheckFail
			if attempts > 1 {
				res = govern.CheckPass
			}
			return &govern.Report{Status: govern.ReportStatus(res), Checks: []govern.Check{{CheckID: "c", Result: res}}}, nil
		})
		g := newGov(t, govern.Options{Verifiers: []govern.Verifier{v}, Classes: []govern.TaskClass{{Name: "k", RequiredVerifiers: []string{"second-time"}}}})
		d, err := g.Execute(bg, &govern.RunOptions{Identity: testIdentity(), TaskClass: "k"}, func(context.Context, *govern.Run, *govern.Verdict) (any, error) {
			return "x", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"intake→plan", "plan→execute", "execute→verify", "verify→execute", "execute→verify", "verify→deliver"}
		if diff := cmp.Diff(want, transitions(t, g.Journal(), d.Run.RequestID())); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
	})
	t.Run("fail_safe", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		if err := r.Advance(bg, govern.Plan); err != nil {
			t.Fatal(err)
		}
		env, err := r.Fail(bg, "model gave up", govern.VerificationFailed)
		if err != nil {
			t.Fatal(err)
		}
		checkWire(t, env)
		if diff := cmp.Diff([]string{"intake→plan", "plan→fail_safe"}, transitions(t, g.Journal(), r.RequestID())); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
		if env.State != govern.FailSafe || env.Outcome != govern.Uncertain {
			t.Errorf("envelope state %s outcome %s, want fail_safe uncertain", env.State, env.Outcome)
		}
	})
}

// TestUAICP_4_1_IllegalTransitions checks that the API cannot take an
// edge the machine does not have, nor an edge whose condition does not
// hold; a refused step leaves the phase as it was.
func TestUAICP_4_1_IllegalTransitions(t *testing.T) {
	t.Run("deliver before verify", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		for _, p := range []govern.Phase{govern.Intake, govern.Plan, govern.Execute} {
			if p != govern.Intake {
				if err := r.Advance(bg, p); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.Deliver(bg, "out"); !errors.Is(err, govern.ErrNotVerified) {
				t.Errorf("Deliver in %s: err = %v, want ErrNotVerified", p, err)
			}
			if r.Phase() != p {
				t.Errorf("phase %s after a refused Deliver, want %s", r.Phase(), p)
			}
		}
	})
	t.Run("deliver other output than verified", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		if v, err := r.Verify(bg, "verified"); err != nil || !v.Passed {
			t.Fatal(v, err)
		}
		if _, err := r.Deliver(bg, "something else"); !errors.Is(err, govern.ErrNotVerified) {
			t.Errorf("err = %v, want ErrNotVerified", err)
		}
		if r.Phase() != govern.Verify {
			t.Errorf("phase %s", r.Phase())
		}
	})
	t.Run("verify with a call in flight", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		entered, release := make(chan struct{}), make(chan struct{})
		done := make(chan error)
		go func() {
			_, err := r.Invoke(bg, readOnly("slow"), govern.Call{ID: "c1"}, func(ctx context.Context) (any, error) {
				close(entered)
				<-release
				return "ok", nil
			})
			done <- err
		}()
		<-entered
		if _, err := r.Verify(bg, "out"); !errors.Is(err, govern.ErrIllegalTransition) {
			t.Errorf("Verify with a call running: err = %v, want ErrIllegalTransition", err)
		}
		if r.Phase() != govern.Execute {
			t.Errorf("phase %s, want execute", r.Phase())
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if v, err := r.Verify(bg, "out"); err != nil || !v.Passed {
			t.Fatalf("Verify after the call: %v %v", v, err)
		}
	})
	t.Run("invoke in verify", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		if _, err := r.Verify(bg, "out"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Invoke(bg, readOnly("t"), govern.Call{}, notCalled(t)); !errors.Is(err, govern.ErrIllegalTransition) {
			t.Errorf("Invoke in verify: err = %v, want ErrIllegalTransition", err)
		}
	})
	t.Run("verify twice without repair", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		if _, err := r.Verify(bg, "out"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Verify(bg, "out"); !errors.Is(err, govern.ErrIllegalTransition) {
			t.Errorf("second Verify: err = %v, want ErrIllegalTransition", err)
		}
	})
	for _, term := range []govern.Phase{govern.Deliver, govern.FailSafe} {
		t.Run("invoke after "+string(term), func(t *testing.T) {
			g := newGov(t, govern.Options{})
			r := closedRun(t, g, term)
			for _, spec := range []govern.ToolSpec{readOnly("r"), lowRisk("w"), highRisk("h")} {
				if _, err := r.Invoke(bg, spec, govern.Call{ID: "late"}, notCalled(t)); !errors.Is(err, govern.ErrRunClosed) {
					t.Errorf("Invoke(%s) after %s: err = %v, want ErrRunClosed", spec.Name, term, err)
				}
			}
		})
	}
	t.Run("repair without a failed verdict", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		if err := r.Repair(bg, govern.Plan, "no verdict yet"); !errors.Is(err, govern.ErrIllegalTransition) {
			t.Errorf("Repair in intake: err = %v, want ErrIllegalTransition", err)
		}
		if err := r.Advance(bg, govern.Execute); err != nil {
			t.Fatal(err)
		}
		if err := r.Repair(bg, govern.Execute, "no verdict yet"); !errors.Is(err, govern.ErrIllegalTransition) {
			t.Errorf("Repair in execute: err = %v, want ErrIllegalTransition", err)
		}
		if v, err := r.Verify(bg, "out"); err != nil || !v.Passed {
			t.Fatal(v, err)
		}
		if err := r.Repair(bg, govern.Execute, "but it passed"); !errors.Is(err, govern.ErrIllegalTransition) {
			t.Errorf("Repair after a passing verdict: err = %v, want ErrIllegalTransition", err)
		}
		if r.Phase() != govern.Verify || r.Repairs() != 0 {
			t.Errorf("phase %s repairs %d after refused repairs", r.Phase(), r.Repairs())
		}
		if r.CanRepair() {
			t.Error("CanRepair after a passing verdict")
		}
		verifyDeliverOnly(t, r, "out")
	})
	t.Run("repair to a phase that is not plan or execute", func(t *testing.T) {
		g := newGov(t, govern.Options{Classes: []govern.TaskClass{{Name: "k", RequiredEvidence: []govern.EvidenceType{govern.TestReport}}}})
		r := start(t, g, govern.RunOptions{TaskClass: "k"})
		if v, err := r.Verify(bg, "out"); err != nil || v.Passed {
			t.Fatal(v, err)
		}
		for _, to := range []govern.Phase{govern.Intake, govern.Verify, govern.Deliver, govern.FailSafe} {
			if err := r.Repair(bg, to, "x"); !errors.Is(err, govern.ErrIllegalTransition) {
				t.Errorf("Repair to %s: err = %v, want ErrIllegalTransition", to, err)
			}
		}
		if r.Phase() != govern.Verify {
			t.Errorf("phase %s", r.Phase())
		}
	})
	t.Run("advance", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		for _, to := range []govern.Phase{govern.Intake, govern.Verify, govern.Deliver, govern.FailSafe, "bogus"} {
			if err := r.Advance(bg, to); !errors.Is(err, govern.ErrIllegalTransition) {
				t.Errorf("Advance(%s) in intake: err = %v, want ErrIllegalTransition", to, err)
			}
		}
		if err := r.Advance(bg, govern.Execute); err != nil {
			t.Fatal(err)
		}
		if err := r.Advance(bg, govern.Plan); !errors.Is(err, govern.ErrIllegalTransition) {
			t.Errorf("Advance back to plan: err = %v, want ErrIllegalTransition", err)
		}
		if err := r.Advance(bg, govern.Execute); err != nil {
			t.Errorf("Advance to the phase it is in: %v", err)
		}
		if diff := cmp.Diff([]string{"intake→plan", "plan→execute"}, transitions(t, g.Journal(), r.RequestID())); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
	})
}

// verifyDeliverOnly delivers a run already verified with a passing
// verdict.
func verifyDeliverOnly(t *testing.T, r *govern.Run, out any) {
	t.Helper()
	env, err := r.Deliver(bg, out)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	checkWire(t, env)
}

// closedRun returns a run of g that reached term.
func closedRun(t *testing.T, g *govern.Governor, term govern.Phase) *govern.Run {
	t.Helper()
	r := start(t, g, govern.RunOptions{})
	switch term {
	case govern.Deliver:
		verifyPass(t, r, "out")
	case govern.FailSafe:
		env, err := r.Fail(bg, "test", govern.VerificationFailed)
		if err != nil {
			t.Fatal(err)
		}
		checkWire(t, env)
	}
	if r.Phase() != term {
		t.Fatalf("phase %s, want %s", r.Phase(), term)
	}
	return r
}

// TestUAICP_4_1_TerminalStatesAbsorb checks that deliver and fail_safe
// absorb: every method of a closed run reports ErrRunClosed and changes
// nothing, also on the run attached again from the journal; a closed run
// neither takes children nor lends its request_id to a new run.
func TestUAICP_4_1_TerminalStatesAbsorb(t *testing.T) {
	for _, term := range []govern.Phase{govern.Deliver, govern.FailSafe} {
		t.Run(string(term), func(t *testing.T) {
			g := newGov(t, baseOpts(t, nil))
			r := closedRun(t, g, term)
			before := len(records(t, g.Journal()))
			attached, err := g.Attach(bg, r.RequestID())
			if err != nil {
				t.Fatalf("Attach a closed run: %v", err)
			}
			for _, run := range []*govern.Run{r, attached} {
				ops := map[string]func() error{
					"Advance(plan)":    func() error { return run.Advance(bg, govern.Plan) },
					"Advance(execute)": func() error { return run.Advance(bg, govern.Execute) },
					"AddEvidence": func() error {
						_, err := run.AddEvidence(bg, govern.Evidence{Source: "s", Payload: []byte(`1`)})
						return err
					},
					"Invoke": func() error {
						_, err := run.Invoke(bg, readOnly("t"), govern.Call{}, notCalled(t))
						return err
					},
					"Verify": func() error { _, err := run.Verify(bg, "out"); return err },
					"Deliver": func() error {
						_, err := run.Deliver(bg, "out")
						return err
					},
					"Repair": func() error { return run.Repair(bg, govern.Execute, "x") },
					"Fail":   func() error { _, err := run.Fail(bg, "again"); return err },
					"Pause":  func() error { return run.Pause(bg, nil) },
					"Resume": func() error { _, err := run.Resume(bg); return err },
				}
				for name, op := range ops {
					if err := op(); !errors.Is(err, govern.ErrRunClosed) {
						t.Errorf("%s on a %s run: err = %v, want ErrRunClosed", name, term, err)
					}
				}
				if _, ok := run.Chunk("late"); ok {
					t.Errorf("Chunk on a %s run succeeded", term)
				}
				if run.Phase() != term {
					t.Errorf("phase %s, want %s", run.Phase(), term)
				}
				if env := run.Envelope(); env.State != term {
					t.Errorf("envelope state %s", env.State)
				} else {
					checkWire(t, env)
				}
			}
			if _, err := g.Start(bg, &govern.RunOptions{Identity: testIdentity(), Parent: r}); !errors.Is(err, govern.ErrRunClosed) {
				t.Errorf("Start with a %s parent: err = %v, want ErrRunClosed", term, err)
			}
			if _, err := g.Start(bg, &govern.RunOptions{Identity: testIdentity(), RequestID: r.RequestID()}); err == nil {
				t.Errorf("Start reused the request_id of a %s run", term)
			}
			if after := len(records(t, g.Journal())); after != before {
				t.Errorf("the journal grew from %d to %d records on a closed run", before, after)
			}
		})
	}
}

// TestUAICP_4_1_ExecuteFailsSafe checks that Execute ends every abnormal
// way out of the work function in fail_safe, returning a *govern.Error
// that carries the uncertain envelope, and that the writes made before
// were rolled back.
func TestUAICP_4_1_ExecuteFailsSafe(t *testing.T) {
	cases := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		work   func(cancel context.CancelFunc) govern.Work
		reason govern.Reason
	}{
		{
			name: "panic", reason: govern.InternalError,
			work: func(context.CancelFunc) govern.Work {
				return func(context.Context, *govern.Run, *govern.Verdict) (any, error) { panic("the model lost its mind") }
			},
		},
		{
			name: "cancelled while working", reason: govern.Cancelled,
			work: func(cancel context.CancelFunc) govern.Work {
				return func(context.Context, *govern.Run, *govern.Verdict) (any, error) { cancel(); return "out", nil }
			},
		},
		{
			name: "work returns the context's error", reason: govern.Cancelled,
			work: func(cancel context.CancelFunc) govern.Work {
				return func(ctx context.Context, _ *govern.Run, _ *govern.Verdict) (any, error) {
					cancel()
					return nil, ctx.Err()
				}
			},
		},
		{
			name: "error without reasons", reason: govern.ToolFailed,
			work: func(context.CancelFunc) govern.Work {
				return func(context.Context, *govern.Run, *govern.Verdict) (any, error) { return nil, errors.New("boom") }
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &rollbackLog{}
			g := newGov(t, baseOpts(t, log))
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			wrote := &tool{}
			var run *govern.Run
			d, err := g.Execute(ctx, &govern.RunOptions{Identity: testIdentity()}, func(ctx context.Context, r *govern.Run, v *govern.Verdict) (any, error) {
				run = r
				if _, err := r.Invoke(ctx, withRollback(lowRisk("write")), govern.Call{ID: "w1"}, wrote.fn); err != nil {
					t.Errorf("write: %v", err)
				}
				return tc.work(cancel)(ctx, r, v)
			})
			if d != nil {
				t.Fatalf("Execute delivered %+v", d)
			}
			wantReasons(t, err, tc.reason)
			ge := govErr(t, err)
			if ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain || ge.Envelope.State != govern.FailSafe {
				t.Fatalf("error envelope %+v, want state fail_safe outcome uncertain", ge.Envelope)
			}
			wantEnvReasons(t, ge.Envelope, tc.reason)
			if run.Phase() != govern.FailSafe || !slices.Contains(run.Reasons(), tc.reason) {
				t.Errorf("run phase %s reasons %v", run.Phase(), run.Reasons())
			}
			if diff := cmp.Diff([]string{"w1"}, log.targets()); diff != "" {
				t.Errorf("rollbacks (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("context cancelled before Execute", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		ctx, cancel := context.WithCancel(bg)
		cancel()
		_, err := g.Execute(ctx, &govern.RunOptions{Identity: testIdentity()}, func(context.Context, *govern.Run, *govern.Verdict) (any, error) {
			return "out", nil
		})
		wantReasons(t, err, govern.Cancelled)
		if ge := govErr(t, err); ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain {
			t.Fatalf("envelope %+v", ge.Envelope)
		}
	})
}

// TestUAICP_4_StartValidates checks what Start refuses.
func TestUAICP_4_StartValidates(t *testing.T) {
	g := newGov(t, govern.Options{})
	id := testIdentity()
	cases := []struct {
		name string
		o    govern.RunOptions
	}{
		{"no agent", govern.RunOptions{Identity: govern.Identity{OwnerID: "o", ControlClass: govern.Autonomous}}},
		{"no owner", govern.RunOptions{Identity: govern.Identity{AgentID: "a", ControlClass: govern.Autonomous}}},
		{"bad control class", govern.RunOptions{Identity: govern.Identity{AgentID: "a", OwnerID: "o", ControlClass: "robotic"}}},
		{"request id not a UUID", govern.RunOptions{Identity: id, RequestID: "req-1"}},
		{"trace id not W3C", govern.RunOptions{Identity: id, TraceID: "ABCDEF0123456789ABCDEF0123456789"}},
		{"trace id all zero", govern.RunOptions{Identity: id, TraceID: "00000000000000000000000000000000"}},
		{"parent trace id not W3C", govern.RunOptions{Identity: id, ParentTraceID: "xyz"}},
	}
	for _, tc := range cases {
		if _, err := g.Start(bg, &tc.o); !errors.Is(err, govern.IdentityInvalid) {
			t.Errorf("%s: err = %v, want IDENTITY_INVALID", tc.name, err)
		}
	}
	if _, err := g.Start(bg, &govern.RunOptions{Identity: id, TaskClass: "nope"}); err == nil {
		t.Error("Start with an unknown task class succeeded")
	}
	r := start(t, g, govern.RunOptions{})
	if _, err := g.Start(bg, &govern.RunOptions{Identity: id, RequestID: r.RequestID()}); err == nil {
		t.Error("two live runs with one request_id")
	}
	if n := len(records(t, g.Journal())); n != 1 {
		t.Errorf("%d records, want only the one run_started", n)
	}
}
