package govern

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// Delivery is what Execute delivered.
type Delivery struct {
	// Envelope is the deliver envelope (outcome success).
	Envelope Envelope
	// Output is what fn returned and the verifiers passed.
	Output any
	// Verdict is the passing verification.
	Verdict *Verdict
	// Run is the finished run.
	Run *Run
}

// Work is the body of a governed run for Execute: it plans and executes —
// every tool call through run.Invoke — and returns the candidate output.
// repair is nil on the first attempt and the failed verdict on a repair
// attempt.
type Work func(ctx context.Context, run *Run, repair *Verdict) (output any, err error)

// Execute runs fn as one governed run: Start, then fn, Verify, and on a
// failed verdict the bounded repair loop (verify → execute, fn again with
// the verdict) until a verdict passes — then Deliver — or the budget is
// spent. Every other way out ends in fail_safe with its reason codes: an
// error from fn (its reasons, else ToolFailed), a panic in fn
// (InternalError), a cancelled ctx (Cancelled). A run that failed safe is
// returned as an *Error carrying the uncertain envelope.
func (g *Governor) Execute(ctx context.Context, runOpts *RunOptions, fn Work) (*Delivery, error) {
	var o RunOptions
	if runOpts != nil {
		o = *runOpts
	}
	run, err := g.Start(ctx, &o)
	if err != nil {
		return nil, err
	}
	return run.work(ctx, fn)
}

func (r *Run) work(ctx context.Context, fn Work) (*Delivery, error) {
	var repair *Verdict
	for {
		if err := r.Advance(ctx, Plan); err != nil && !errors.Is(err, ErrIllegalTransition) {
			return nil, r.failWith(ctx, err, InternalError)
		}
		out, err := safeWork(ctx, r, repair, fn)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err != nil {
			return nil, r.failWith(ctx, err, ToolFailed)
		}
		v, err := r.Verify(ctx, out)
		if err != nil {
			return nil, r.failWith(ctx, err, InternalError)
		}
		if v.Passed {
			env, err := r.Deliver(ctx, out)
			if err != nil {
				return nil, r.failWith(ctx, err, InternalError)
			}
			return &Delivery{Envelope: *env, Output: out, Verdict: v, Run: r}, nil
		}
		if err := r.Repair(ctx, Execute, "verification failed"); err != nil {
			return nil, err // the run failed safe; err carries the envelope
		}
		repair = v
	}
}

// safeWork calls fn, turning a panic into an error with InternalError.
func safeWork(ctx context.Context, r *Run, repair *Verdict, fn Work) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Reasons: []Reason{InternalError}, Detail: fmt.Sprintf("panic: %v\n%s", p, truncateDetail(string(debug.Stack())))}
		}
	}()
	return fn(ctx, r, repair)
}

// failWith ends the run in fail_safe for err and returns the *Error to
// hand to the caller: err's reasons (Cancelled for a cancelled context,
// else def when err carries none) and the uncertain envelope.
func (r *Run) failWith(ctx context.Context, err error, def Reason) error {
	return r.failWithCause(ctx, err, def, nil)
}

// failWithCause is failWith recording cause, what made the run fail, on
// its fail_safe transition — when def is the reason (a cancellation, say,
// is not the cause's doing).
func (r *Run) failWithCause(ctx context.Context, err error, def Reason, cause *Cause) error {
	reasons := ReasonsOf(err)
	switch {
	case errors.Is(err, context.Canceled) || (ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled)):
		reasons = append([]Reason{Cancelled}, reasons...)
	case errors.Is(err, context.DeadlineExceeded):
		reasons = append([]Reason{ToolTimeout}, reasons...)
	}
	if len(reasons) == 0 {
		reasons = []Reason{def}
	} else {
		cause = nil
	}
	if _, ferr := r.fail(ctx, truncateDetail(err.Error()), cause, reasons...); ferr != nil {
		if errors.Is(ferr, ErrRunClosed) {
			e := r.Envelope()
			return &Error{Reasons: ReasonsOf(err), Detail: err.Error(), Err: err, Envelope: &e}
		}
		return errors.Join(err, ferr)
	}
	r.mu.Lock()
	env := r.envelopeLocked(true)
	r.mu.Unlock()
	return &Error{Reasons: reasonsOf(&env), Detail: err.Error(), Err: err, Envelope: &env}
}
