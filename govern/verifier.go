package govern

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
)

// VerifyInput is what a verifier evaluates.
type VerifyInput struct {
	RequestID string
	TraceID   string
	TaskClass string
	// Evidence holds copies of the run's valid evidence objects.
	Evidence []Evidence
	// Output is the candidate deliverable, as JSON.
	Output json.RawMessage
}

// Verifier is a mechanical validator (§2): it evaluates the evidence (and
// the candidate output) against invariants and reports. The governor runs
// the verifiers a task class requires before deliver, and fails closed: a
// verifier that errors, panics, exceeds Options.VerifierTimeout, returns
// no report or a malformed one counts as failing, and a "pass" report with
// a failing check counts as a fail. Implementations must be safe for
// concurrent use.
type Verifier interface {
	// ID names the verifier; task classes require verifiers by ID.
	ID() string
	// Verify returns a report. The governor fills an empty report_id,
	// request_id, verifier_id and generated_at.
	Verify(ctx context.Context, in VerifyInput) (*Report, error)
}

type funcVerifier struct {
	id string
	f  func(ctx context.Context, in VerifyInput) (*Report, error)
}

func (v funcVerifier) ID() string { return v.id }
func (v funcVerifier) Verify(ctx context.Context, in VerifyInput) (*Report, error) {
	return v.f(ctx, in)
}

// NewVerifier returns a Verifier with the given ID calling f.
func NewVerifier(id string, f func(ctx context.Context, in VerifyInput) (*Report, error)) Verifier {
	return funcVerifier{id, f}
}

// CheckVerifier returns a Verifier whose report is made of the checks f
// returns: status pass when none fails.
func CheckVerifier(id string, f func(ctx context.Context, in VerifyInput) []Check) Verifier {
	return NewVerifier(id, func(ctx context.Context, in VerifyInput) (*Report, error) {
		checks := f(ctx, in)
		status := ReportPass
		for _, c := range checks {
			if c.Result == CheckFail {
				status = ReportFail
			}
		}
		return &Report{Status: status, Checks: checks}, nil
	})
}

// TaskClass declares what a class of tasks needs before it may deliver
// (§5.1, §5.2) and the floor of its calls' risk tiers.
type TaskClass struct {
	Name string
	// RequiredEvidence lists evidence types the run must hold valid
	// evidence of.
	RequiredEvidence []EvidenceType
	// RequiredVerifiers lists the IDs of verifiers (Options.Verifiers)
	// that must pass.
	RequiredVerifiers []string
	// Floor is the least strict tier any call of the class runs under.
	Floor Tier
	// MaxRepairs bounds the repair loop: 0 uses Options.MaxRepairs, a
	// negative value allows none.
	MaxRepairs int
}

// runVerifier runs v under timeout, turning every failure into a failing
// report (fail closed). The second result says whether it passed.
func runVerifier(ctx context.Context, v Verifier, in VerifyInput, timeout time.Duration, known map[string]bool) (Report, bool) {
	id := v.ID()
	fail := func(detail string) (Report, bool) {
		return Report{
			ReportID: ids.New(), RequestID: in.RequestID, VerifierID: id, Status: ReportFail,
			Checks:      []Check{{CheckID: string(VerifierError), Result: CheckFail, Details: detail}},
			GeneratedAt: Time{ids.Now()},
		}, false
	}
	vctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type outcome struct {
		r   *Report
		err error
	}
	ch := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- outcome{err: fmt.Errorf("verifier panicked: %v\n%s", p, debug.Stack())}
			}
		}()
		r, err := v.Verify(vctx, in)
		ch <- outcome{r, err}
	}()
	var o outcome
	select {
	case o = <-ch:
	case <-vctx.Done():
		if ctx.Err() != nil {
			return fail("cancelled")
		}
		return fail(fmt.Sprintf("verifier timed out after %s", timeout))
	}
	switch {
	case o.err != nil:
		return fail(truncateDetail(o.err.Error()))
	case o.r == nil:
		return fail("verifier returned no report")
	}
	r := *o.r
	r.Checks = append([]Check(nil), r.Checks...)
	r.EvidenceIDs = append([]string(nil), r.EvidenceIDs...)
	if r.ReportID == "" {
		r.ReportID = ids.New()
	}
	if r.RequestID == "" {
		r.RequestID = in.RequestID
	}
	if r.VerifierID == "" {
		r.VerifierID = id
	}
	if r.GeneratedAt.IsZero() {
		r.GeneratedAt = Time{ids.Now()}
	}
	switch {
	case r.RequestID != in.RequestID:
		return fail(fmt.Sprintf("report is for request %q", r.RequestID))
	case r.Status != ReportPass && r.Status != ReportFail && r.Status != ReportPartial:
		return fail(fmt.Sprintf("report status %q is not pass, fail or partial", r.Status))
	case len(r.Checks) == 0:
		return fail("report has no checks")
	}
	for _, c := range r.Checks {
		if c.CheckID == "" || (c.Result != CheckPass && c.Result != CheckFail && c.Result != CheckSkip) {
			return fail(fmt.Sprintf("malformed check %q with result %q", c.CheckID, c.Result))
		}
	}
	for _, e := range r.EvidenceIDs {
		if !known[e] {
			return fail(fmt.Sprintf("report cites evidence %q the run does not hold", e))
		}
	}
	return r, r.Passed()
}

func truncateDetail(s string) string {
	const n = 2000
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
