package uicontrol

import (
	"encoding/json"
	"errors"
	"math"
	"time"
)

// The extensions this package implements beyond Core (§12).
const (
	// ExtensionAction carries the Action Runtime draft (action.request,
	// action.started, action.progress, action.result, action.cancel and
	// the confirmation round trip). The draft's own extension ID could not
	// be read; this one is ours (docs/spec-notes/uiap.md). An App always
	// supports it; an Agent offers it when AgentOptions.Extensions lists
	// it.
	ExtensionAction = "uiap.action"
	// extensionPolicy is the Policy Extension; "uicp.policy" is accepted
	// as its alias (DESIGN §5). When it is selected the app's policy
	// decisions travel in ext["uiap.policy"].
	extensionPolicy = "uiap.policy"
)

// ActionState is the state of an action in the Action Runtime (§4 of the
// draft): exactly one at a time.
type ActionState string

// The runtime states of the Action Runtime draft.
const (
	ActionReceived              ActionState = "RECEIVED"
	ActionResolvingTarget       ActionState = "RESOLVING_TARGET"
	ActionCheckingPreconditions ActionState = "CHECKING_PRECONDITIONS"
	ActionAwaitingConfirmation  ActionState = "AWAITING_CONFIRMATION"
	ActionExecuting             ActionState = "EXECUTING"
	ActionVerifying             ActionState = "VERIFYING"
	ActionWaitingForUser        ActionState = "WAITING_FOR_USER"
	ActionRecovering            ActionState = "RECOVERING"
	ActionSucceeded             ActionState = "SUCCEEDED"
	ActionFailed                ActionState = "FAILED"
	ActionCancelled             ActionState = "CANCELLED"
)

// terminal reports whether s ends an action's lifecycle.
func (s ActionState) terminal() bool {
	return s == ActionSucceeded || s == ActionFailed || s == ActionCancelled
}

func (s ActionState) valid() bool {
	switch s {
	case ActionReceived, ActionResolvingTarget, ActionCheckingPreconditions, ActionAwaitingConfirmation,
		ActionExecuting, ActionVerifying, ActionWaitingForUser, ActionRecovering,
		ActionSucceeded, ActionFailed, ActionCancelled:
		return true
	}
	return false
}

// ErrActionCancelled is what Agent.CallAction returns (with the result)
// when the action ended CANCELLED. An ActionFunc or HandoffFunc returns it
// to end its action CANCELLED (a human declined, for instance).
var ErrActionCancelled = errors.New("uicontrol: action cancelled")

// ActionTarget names the UI element an action applies to (ActionTarget
// of the draft). Ref is a TargetRef of the capability model, kept as the
// JSON it was sent as; resolving it is the action handler's job.
type ActionTarget struct {
	Ref                json.RawMessage `json:"ref,omitempty"`
	ExpectedRole       string          `json:"expectedRole,omitempty"`
	ExpectedName       string          `json:"expectedName,omitempty"`
	ExpectedScopeID    string          `json:"expectedScopeId,omitempty"`
	ExpectedDocumentID string          `json:"expectedDocumentId,omitempty"`
	AllowAmbiguous     bool            `json:"allowAmbiguous,omitempty"`
}

// ActionRequest is the payload of action.request (ActionRequestPayload
// of the draft). An agent fills it for Agent.CallAction; an app's
// ActionFunc receives it decoded, with Args, Verification and
// Presentation as json.RawMessage and RequestID set.
type ActionRequest struct {
	// ActionID names the action to run, as the capability document's
	// actions declare it ("cart.add").
	ActionID string
	// Target is the UI element the action applies to, if any.
	Target *ActionTarget
	// Args are the action's arguments: a JSON object (nil: none).
	Args any
	// PreferredExecutionModes lists execution modes by preference
	// ("appAction", "semanticDom", ...).
	PreferredExecutionModes []string
	// Verification and Presentation are the draft's VerificationSpec and
	// PresentationHints: JSON objects, passed through.
	Verification any
	Presentation any
	// Timeout bounds the action on the app side (timeoutMs, whole
	// milliseconds); 0 means none. Confirmation and handoff count.
	Timeout time.Duration
	// IdempotencyKey, if set, makes a repeated request with the same key
	// in the same session return the first one's result instead of
	// running the action again.
	IdempotencyKey string
	Metadata       map[string]any
	// RequestID is the id of the action.request message; set on the app
	// side, not sent.
	RequestID string
}

type wireActionRequest struct {
	ActionID                string         `json:"actionId"`
	Target                  *ActionTarget  `json:"target,omitempty"`
	Args                    any            `json:"args,omitempty"`
	PreferredExecutionModes []string       `json:"preferredExecutionModes,omitempty"`
	Verification            any            `json:"verification,omitempty"`
	Presentation            any            `json:"presentation,omitempty"`
	TimeoutMs               int64          `json:"timeoutMs,omitempty"`
	IdempotencyKey          string         `json:"idempotencyKey,omitempty"`
	Metadata                map[string]any `json:"metadata,omitempty"`
}

// MarshalJSON writes the request with the draft's member names.
func (r ActionRequest) MarshalJSON() ([]byte, error) {
	w := wireActionRequest{ActionID: r.ActionID, Target: r.Target, Args: rawOrValue(r.Args),
		PreferredExecutionModes: r.PreferredExecutionModes, Verification: rawOrValue(r.Verification),
		Presentation: rawOrValue(r.Presentation), IdempotencyKey: r.IdempotencyKey, Metadata: r.Metadata}
	if r.Timeout > 0 {
		w.TimeoutMs = max(r.Timeout.Milliseconds(), 1)
	}
	return json.Marshal(w)
}

// rawOrValue turns an empty json.RawMessage into nil, so that omitempty
// omits it.
func rawOrValue(v any) any {
	if r, ok := v.(json.RawMessage); ok && len(r) == 0 {
		return nil
	}
	return v
}

// DecodeArgs decodes the request's arguments into v (absent arguments
// are {}).
func (r *ActionRequest) DecodeArgs(v any) error {
	switch a := r.Args.(type) {
	case nil:
		return json.Unmarshal([]byte("{}"), v)
	case json.RawMessage:
		if len(a) == 0 {
			return json.Unmarshal([]byte("{}"), v)
		}
		return json.Unmarshal(a, v)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, v)
	}
}

// ActionProgress is the payload of action.started and action.progress
// (ours: the draft names the messages but its payloads could not be
// read). An ActionFunc reports progress with one; the runtime fills
// RequestID and ActionID and, when it is empty or terminal, State.
type ActionProgress struct {
	// RequestID is the id of the action.request this is about.
	RequestID string      `json:"requestId"`
	ActionID  string      `json:"actionId"`
	State     ActionState `json:"state"`
	// Progress is the fraction done, in [0, 1]; 0 means unknown.
	Progress float64 `json:"progress,omitempty"`
	Message  string  `json:"message,omitempty"`
	// Data is any JSON value the action reports (json.RawMessage when
	// received).
	Data any `json:"data,omitempty"`
	// Started is set (on the agent side) for action.started.
	Started bool `json:"-"`
	// Policy is the app's policy decision, when the policy extension is
	// selected and the message carries it (action.started).
	Policy *PolicyDecision `json:"-"`
}

// ActionResult is the payload of action.result, the response to
// action.request: the action's terminal state with its result or error.
type ActionResult struct {
	RequestID string      `json:"requestId"`
	ActionID  string      `json:"actionId"`
	State     ActionState `json:"state"`
	// Result is the action's result (any JSON value) when it SUCCEEDED.
	Result json.RawMessage `json:"result,omitempty"`
	// Error says why the action FAILED.
	Error          *Error `json:"error,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Deduplicated is set on the result of a request whose idempotency
	// key was used before: the action did not run again.
	Deduplicated bool `json:"deduplicated,omitempty"`
}

// actionCancel is the payload of action.cancel.
type actionCancel struct {
	RequestID string `json:"requestId"`
	Reason    string `json:"reason,omitempty"`
}

// actionCancelAck is the payload of action.cancelled: the action was
// running, in State, and has been asked to stop; its action.result
// follows.
type actionCancelAck struct {
	RequestID string      `json:"requestId"`
	State     ActionState `json:"state"`
}

// ActionConfirmation is the payload of action.confirm: the app asks the
// controller to confirm explicitly that the action may run.
type ActionConfirmation struct {
	RequestID string          `json:"requestId"`
	ActionID  string          `json:"actionId"`
	Args      json.RawMessage `json:"args,omitempty"`
	Target    *ActionTarget   `json:"target,omitempty"`
	Risk      Risk            `json:"risk,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	// Policy is the decision that asked for the confirmation, when the
	// policy extension is selected (from ext).
	Policy *PolicyDecision `json:"-"`
}

// actionConfirmed is the payload of action.confirmed, the answer to
// action.confirm.
type actionConfirmed struct {
	RequestID string `json:"requestId,omitempty"`
	Confirmed bool   `json:"confirmed"`
	Reason    string `json:"reason,omitempty"`
}

// maxTimeoutMs is the largest timeoutMs that fits a time.Duration.
const maxTimeoutMs = math.MaxInt64 / int64(time.Millisecond)

// idString reads a member that holds an ID: 1..128 characters.
func idString(f *fields, name string, required bool) string {
	raw, ok := f.get(name, required)
	if !ok {
		return ""
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || !runeLen(s, maxIDLength) {
		f.fail(name, "must be a string of 1..128 characters")
		return ""
	}
	return s
}

// objectRaw reads an object member as JSON text.
func objectRaw(f *fields, name string) json.RawMessage {
	raw, ok := f.get(name, false)
	if !ok {
		return nil
	}
	if raw[0] != '{' {
		f.fail(name, "must be an object")
		return nil
	}
	return raw
}

// anyRaw reads a member of any JSON type as JSON text.
func anyRaw(f *fields, name string) json.RawMessage {
	raw, _ := f.get(name, false)
	return raw
}

func actionState(f *fields, name string) ActionState {
	s := ActionState(f.str(name, true))
	if f.err == nil && !s.valid() {
		f.fail(name, "must be an Action Runtime state")
	}
	return s
}

func actionTarget(f *fields) *ActionTarget {
	g := f.sub("target", false)
	if g == nil {
		return nil
	}
	t := &ActionTarget{Ref: anyRaw(g, "ref"), ExpectedRole: g.str("expectedRole", false),
		ExpectedName: g.str("expectedName", false), ExpectedScopeID: g.str("expectedScopeId", false),
		ExpectedDocumentID: g.str("expectedDocumentId", false), AllowAmbiguous: g.boolean("allowAmbiguous")}
	if g.err != nil {
		f.err = g.err
		return nil
	}
	return t
}

func decodeActionRequest(raw json.RawMessage) (*ActionRequest, *Error) {
	f := payloadFields(raw, "payload")
	p := &ActionRequest{ActionID: f.str("actionId", true), Target: actionTarget(f)}
	if args := objectRaw(f, "args"); args != nil {
		p.Args = args
	}
	p.PreferredExecutionModes = f.strs("preferredExecutionModes", false)
	if v := objectRaw(f, "verification"); v != nil {
		p.Verification = v
	}
	if v := objectRaw(f, "presentation"); v != nil {
		p.Presentation = v
	}
	ms := f.integer("timeoutMs")
	if ms > maxTimeoutMs {
		f.fail("timeoutMs", "too large")
	}
	p.Timeout = time.Duration(ms) * time.Millisecond
	p.IdempotencyKey = idString(f, "idempotencyKey", false)
	p.Metadata = f.object("metadata")
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeActionProgress(raw json.RawMessage) (*ActionProgress, *Error) {
	f := payloadFields(raw, "payload")
	p := &ActionProgress{RequestID: idString(f, "requestId", true), ActionID: f.str("actionId", true),
		State: actionState(f, "state"), Message: f.str("message", false)}
	if r, ok := f.get("progress", false); ok {
		if json.Unmarshal(r, &p.Progress) != nil || r[0] == '"' || p.Progress < 0 || p.Progress > 1 {
			f.fail("progress", "must be a number in [0, 1]")
		}
	}
	if d := anyRaw(f, "data"); d != nil {
		p.Data = d
	}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeActionResult(raw json.RawMessage) (*ActionResult, *Error) {
	f := payloadFields(raw, "payload")
	p := &ActionResult{RequestID: idString(f, "requestId", true), ActionID: f.str("actionId", true),
		State: actionState(f, "state"), Result: anyRaw(f, "result")}
	if f.err == nil && !p.State.terminal() {
		f.fail("state", "must be SUCCEEDED, FAILED or CANCELLED")
	}
	if r, ok := f.get("error", false); ok {
		e, perr := decodeErrorPayload(r)
		if perr != nil {
			f.fail("error", "must be an error payload")
		}
		p.Error = e
	}
	p.IdempotencyKey = idString(f, "idempotencyKey", false)
	p.Deduplicated = f.boolean("deduplicated")
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeActionCancel(raw json.RawMessage) (*actionCancel, *Error) {
	f := payloadFields(raw, "payload")
	p := &actionCancel{RequestID: idString(f, "requestId", true), Reason: f.str("reason", false)}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeActionCancelled(raw json.RawMessage) (*actionCancelAck, *Error) {
	f := payloadFields(raw, "payload")
	p := &actionCancelAck{RequestID: idString(f, "requestId", true), State: actionState(f, "state")}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeActionConfirm(raw json.RawMessage) (*ActionConfirmation, *Error) {
	f := payloadFields(raw, "payload")
	p := &ActionConfirmation{RequestID: idString(f, "requestId", true), ActionID: f.str("actionId", true),
		Args: objectRaw(f, "args"), Target: actionTarget(f), Risk: Risk(f.str("risk", false)), Reason: f.str("reason", false)}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeActionConfirmed(raw json.RawMessage) (*actionConfirmed, *Error) {
	f := payloadFields(raw, "payload")
	p := &actionConfirmed{RequestID: idString(f, "requestId", false)}
	if _, ok := f.get("confirmed", true); ok {
		p.Confirmed = f.boolean("confirmed")
	}
	p.Reason = f.str("reason", false)
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}
