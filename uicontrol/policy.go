package uicontrol

import (
	"context"
	"encoding/json"
)

// Risk is an action's declared risk, as the capability document's risk
// section states it. The default policy lets low and medium actions run
// and asks for confirmation of any other (an undeclared risk counts as
// high).
type Risk string

// The risk levels this package knows.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// Decision is a decision of the Policy Extension.
type Decision string

// The four decisions of the Policy Extension.
const (
	// DecisionAllow: the action runs.
	DecisionAllow Decision = "allow"
	// DecisionConfirm: the action runs only after the controller
	// confirmed it explicitly (action.confirm → action.confirmed).
	DecisionConfirm Decision = "confirm"
	// DecisionDeny: the action does not run; the request is answered by
	// permission_denied.
	DecisionDeny Decision = "deny"
	// DecisionHandoff: the action is handed to the human, through
	// AppOptions.Handoff, instead of being run by the app's handler.
	DecisionHandoff Decision = "handoff"
)

// PolicyDecision is what a PolicyFunc decides for one action request. It
// travels in ext["uiap.policy"] when the session selected the policy
// extension.
type PolicyDecision struct {
	Decision Decision `json:"decision"`
	// Reason explains the decision to the controller (and the human
	// behind it); it is sent to the peer, so it must not hold secrets.
	Reason string `json:"reason,omitempty"`
}

// PolicyFunc decides, before an action runs, whether it may (Policy
// Extension: "policy MUST be evaluated before every non-trivial
// Action"). It runs on the action's goroutine with the action's context.
// A decision other than the four, the zero PolicyDecision included, is a
// deny: policy fails closed. A panic is answered by internal_error.
type PolicyFunc func(ctx context.Context, s *AppSession, req *ActionRequest, risk Risk) PolicyDecision

// DefaultPolicy is the policy of an App whose options set none: low and
// medium risk actions are allowed, any other risk needs confirmation.
func DefaultPolicy(ctx context.Context, s *AppSession, req *ActionRequest, risk Risk) PolicyDecision {
	if risk == RiskLow || risk == RiskMedium {
		return PolicyDecision{Decision: DecisionAllow}
	}
	return PolicyDecision{Decision: DecisionConfirm, Reason: "high-risk action"}
}

// HandoffFunc hands an action to the human (policy decision handoff): it
// shows the human what the agent asked for and returns once they have
// done it (the action's result, any JSON value), declined it
// (ErrActionCancelled) or failed (any other error). It runs on the
// action's goroutine; ctx ends when the action is cancelled or times
// out, or the session terminates. Meanwhile the action is
// WAITING_FOR_USER.
type HandoffFunc func(ctx context.Context, s *AppSession, req *ActionRequest, reason string) (any, error)

// policyExt returns the policy decision a message carries in its ext
// entry for the policy extension (under either spelling), or nil. Ext
// data is flexible: a malformed entry is ignored.
func policyExt(e *Envelope) *PolicyDecision {
	for id, raw := range e.Ext {
		if canonicalExtension(id) != extensionPolicy {
			continue
		}
		f := payloadFields(raw, "ext")
		d := &PolicyDecision{Decision: Decision(f.str("decision", true)), Reason: f.str("reason", false)}
		if f.err == nil {
			return d
		}
	}
	return nil
}

// policyExtFor returns the ext entry carrying d, spelled as the session
// selected the policy extension, or nil when it is not selected.
func policyExtFor(sel *selection, d PolicyDecision) map[string]json.RawMessage {
	id, ok := sel.extensionID(extensionPolicy)
	if !ok {
		return nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil
	}
	return map[string]json.RawMessage{id: b}
}
