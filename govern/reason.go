package govern

import (
	"errors"
	"strings"
)

// Reason is a machine-readable reason code, carried by fail-safe
// envelopes (metadata "uaicp.reasons"), journal records and errors. A
// Reason is itself an error, so errors.Is(err, govern.ApprovalInvalid)
// tests whether err carries that code.
type Reason string

// The reason codes UAICP names as the minimum (§7 and the baseline checks).
const (
	EvidenceMissing    Reason = "EVIDENCE_MISSING"
	VerificationFailed Reason = "VERIFICATION_FAILED"
	PolicyBlocked      Reason = "POLICY_BLOCKED"
	ApprovalRequired   Reason = "APPROVAL_REQUIRED"
	IdentityInvalid    Reason = "IDENTITY_INVALID"
	ToolTimeout        Reason = "TOOL_TIMEOUT"
	RollbackRequired   Reason = "ROLLBACK_REQUIRED"
)

// The reason codes agentry adds; docs/governance.md has the full table.
const (
	// ApprovalInvalid: an approval token failed verification (untrusted
	// key, bad signature, wrong algorithm, edited or foreign claims,
	// expired, replayed, self-approval, or not a token at all).
	ApprovalInvalid Reason = "APPROVAL_INVALID"
	// ApprovalDenied: an approver denied the call.
	ApprovalDenied Reason = "APPROVAL_DENIED"
	// EvidenceInvalid: evidence whose hash does not match its payload or
	// that belongs to another request or trace; it counts as missing.
	EvidenceInvalid Reason = "EVIDENCE_INVALID"
	// VerifierError: a required verifier errored, panicked, timed out or
	// returned a malformed report (fail closed).
	VerifierError Reason = "VERIFIER_ERROR"
	// RepairsExhausted: verification still failed after MaxRepairs
	// repairs.
	RepairsExhausted Reason = "REPAIRS_EXHAUSTED"
	// TierViolation: a call attempted a write its effective tier does not
	// allow.
	TierViolation Reason = "TIER_VIOLATION"
	// ToolFailed: a tool returned an error or panicked.
	ToolFailed Reason = "TOOL_FAILED"
	// ModelFailed: the model failed — its provider returned an error or
	// could not be reached — or the agent loop around it did (an
	// *llm.Error, such as its step limit).
	ModelFailed Reason = "MODEL_FAILED"
	// NeedsReview: the policy asked for human review.
	NeedsReview Reason = "NEEDS_REVIEW"
	// RollbackFailed: a rollback action failed; the run needs review.
	RollbackFailed Reason = "ROLLBACK_FAILED"
	// RecoveredInDoubt: recovery closed a run a crash left open.
	RecoveredInDoubt Reason = "RECOVERED_IN_DOUBT"
	// ChildFailed: a child run (parent_trace_id) ended in fail_safe.
	ChildFailed Reason = "CHILD_FAILED"
	// Cancelled: the run's context was cancelled.
	Cancelled Reason = "CANCELLED"
	// InternalError: a panic or an internal failure (such as the journal)
	// ended the run.
	InternalError Reason = "INTERNAL_ERROR"
)

// Error returns the code.
func (r Reason) Error() string { return string(r) }

// Error is a governance refusal or failure: the reason codes and a detail
// for operators. errors.Is matches each of its reasons and its cause.
type Error struct {
	Reasons []Reason
	// Detail says what happened, for logs and the audit journal.
	Detail string
	// Tool and CallID name the call, when the error is about one.
	Tool, CallID string
	// ApprovalID is set with ApprovalRequired: the pending request.
	ApprovalID string
	// Envelope is the envelope of the refusal (a refused call: state
	// execute, outcome pending while it awaits approval, else failure) or
	// of the run that failed safe (outcome uncertain); nil otherwise.
	Envelope *Envelope
	Err      error
}

// Error returns "govern: " followed by the reasons, comma-separated, the
// tool in parentheses when set and the detail when set.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("govern: ")
	for i, r := range e.Reasons {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(r))
	}
	if e.Tool != "" {
		b.WriteString(" (" + e.Tool + ")")
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// Is reports whether target is one of e's reasons.
func (e *Error) Is(target error) bool {
	r, ok := target.(Reason)
	if !ok {
		return false
	}
	for _, x := range e.Reasons {
		if x == r {
			return true
		}
	}
	return false
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func refuse(detail string, reasons ...Reason) *Error {
	return &Error{Reasons: reasons, Detail: detail}
}

// ReasonsOf returns the reason codes err carries (through wrapping), or
// nil.
func ReasonsOf(err error) []Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reasons
	}
	var r Reason
	if errors.As(err, &r) {
		return []Reason{r}
	}
	return nil
}

// Errors that are not reason codes: misuse of the API.
var (
	// ErrIllegalTransition: the state machine has no such edge
	// (the error carries the phases).
	ErrIllegalTransition = errors.New("govern: illegal transition")
	// ErrRunClosed: the run reached a terminal phase.
	ErrRunClosed = errors.New("govern: run is closed")
	// ErrNotVerified: Deliver without a passing verification.
	ErrNotVerified = errors.New("govern: deliver needs a passing verification")
	// ErrUnknownRun: no run with that request ID in the journal.
	ErrUnknownRun = errors.New("govern: unknown run")
	// ErrUnknownApproval: no approval request with that ID.
	ErrUnknownApproval = errors.New("govern: unknown approval request")
	// ErrAlreadyDecided: the approval request was already decided.
	ErrAlreadyDecided = errors.New("govern: approval request already decided")
	// ErrDuplicate is returned by Journal.Append when a record's Unique key
	// was appended before.
	ErrDuplicate = errors.New("govern: duplicate unique journal key")
)
