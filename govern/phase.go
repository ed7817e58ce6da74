package govern

import "fmt"

// Phase is a state of the UAICP execution state machine (§4).
type Phase string

// The phases of §4. Deliver and FailSafe are the only terminal phases.
const (
	Intake   Phase = "intake"
	Plan     Phase = "plan"
	Execute  Phase = "execute"
	Verify   Phase = "verify"
	Deliver  Phase = "deliver"
	FailSafe Phase = "fail_safe"
)

// Terminal reports whether p absorbs: no transition leaves it.
func (p Phase) Terminal() bool { return p == Deliver || p == FailSafe }

// Valid reports whether p is one of the six phases.
func (p Phase) Valid() bool {
	switch p {
	case Intake, Plan, Execute, Verify, Deliver, FailSafe:
		return true
	}
	return false
}

// canTransition reports whether from → to is an edge of the state machine:
// the forward chain intake → plan → execute → verify → deliver, the repair
// edges verify → plan and verify → execute, and fail_safe from any
// non-terminal phase. Whether an edge is taken also depends on the run
// (deliver needs every invariant, repair needs budget); Run enforces that.
func canTransition(from, to Phase) bool {
	if from.Terminal() || !from.Valid() || !to.Valid() {
		return false
	}
	if to == FailSafe {
		return true
	}
	switch from {
	case Intake:
		return to == Plan
	case Plan:
		return to == Execute
	case Execute:
		return to == Verify
	case Verify:
		return to == Deliver || to == Plan || to == Execute
	}
	return false
}

// transitionError is returned for an edge the state machine does not have.
type transitionError struct {
	From, To Phase
}

// Error returns a message naming the illegal transition's two phases.
func (e *transitionError) Error() string {
	return fmt.Sprintf("govern: illegal transition %s → %s", e.From, e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *transitionError) Is(target error) bool { return target == ErrIllegalTransition }
