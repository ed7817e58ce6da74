package govern

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// ToolSpec declares a tool to the governor (§5.3: the tier is declared by
// the tool definition and enforced by the orchestrator).
type ToolSpec struct {
	Name string
	// Tier is the declared tier; the zero value means the tool declared
	// none and counts as WriteHighRisk.
	Tier Tier
	// Rollback returns the action that undoes a call, before the call
	// runs. A write_high_risk call needs one (with a handler for its type
	// in Options.Rollbacks); for lower tiers it is optional and executed
	// the same way when the run fails. Use CallFrom(ctx) for an
	// idempotency key.
	Rollback func(ctx context.Context, call Call) (*RollbackAction, error)
}

// Call is one tool call to gate.
type Call struct {
	// ID identifies the call within the run (the model's tool call ID);
	// "" generates one. A call ID that already committed with the same
	// arguments is not run again: Invoke returns the recorded result.
	ID   string
	Args map[string]any
	// Approval is an approval token presented with the call; without one
	// the governor uses an approval decided through Decide, or opens an
	// approval request.
	Approval string
}

// Invocation is a call that ran (or was replayed).
type Invocation struct {
	CallID string
	// Result is what the tool returned; for a replayed call, its recorded
	// JSON decoded.
	Result   any
	Replayed bool
	Tier     Tier
	Evidence []Evidence
	// Envelope records the call (state execute, outcome success, the
	// rollback_action of a write, tier and policy in metadata).
	Envelope Envelope
}

// CallInfo describes the governed call a tool runs in.
type CallInfo struct {
	RequestID, TraceID, CallID, Tool string
	Tier                             Tier
}

type scopeKey struct{}

type callScope struct {
	run  *Run
	info CallInfo

	mu        sync.Mutex
	evidence  []Evidence
	violation string
}

func scopeFrom(ctx context.Context) (*callScope, bool) {
	s, ok := ctx.Value(scopeKey{}).(*callScope)
	return s, ok
}

// CallFrom returns the governed call a tool is running in; ok is false
// outside one.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	s, ok := scopeFrom(ctx)
	if !ok {
		return CallInfo{}, false
	}
	return s.info, true
}

// BeforeWrite is how a tool announces a side effect before it makes it
// (a write "through its handle"). Under a read_only call it refuses with
// TierViolation, and the run fails safe once the call returns; under a
// write tier it returns nil. Outside a governed call it returns nil.
func BeforeWrite(ctx context.Context, what string) error {
	s, ok := scopeFrom(ctx)
	if !ok || s.info.Tier > ReadOnly {
		return nil
	}
	s.mu.Lock()
	if s.violation == "" {
		s.violation = what
	}
	s.mu.Unlock()
	return &Error{Reasons: []Reason{TierViolation}, Tool: s.info.Tool, CallID: s.info.CallID,
		Detail: fmt.Sprintf("%s is a write, and the call runs as read_only", what)}
}

// AddEvidence adds an evidence object from inside a tool call; it joins
// the call's tool_result evidence when the call commits. Outside a
// governed call it returns an error.
func AddEvidence(ctx context.Context, ev Evidence) (Evidence, error) {
	s, ok := scopeFrom(ctx)
	if !ok {
		return Evidence{}, errors.New("govern: AddEvidence outside a governed call")
	}
	ev, err := s.run.sealEvidence(ev, "tool:"+s.info.Tool)
	if err != nil {
		return Evidence{}, err
	}
	s.mu.Lock()
	s.evidence = append(s.evidence, ev)
	s.mu.Unlock()
	return ev.Clone(), nil
}

// Transport returns an http.RoundTripper (base, or http.DefaultTransport
// when nil) that calls BeforeWrite before every request whose method is not
// GET, HEAD, OPTIONS or TRACE: a tool that writes over HTTP through it
// cannot do so under a read_only call.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return effectTransport{base}
}

type effectTransport struct{ base http.RoundTripper }

func (t effectTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
	default:
		if err := BeforeWrite(req.Context(), req.Method+" "+req.URL.Redacted()); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	return t.base.RoundTrip(req)
}

// Invoke gates one tool call and, if it may run, runs fn: the call's
// effective tier (effectiveTier of the declared tier, Options.Pinned and
// the task class floor) decides. read_only calls run at once; writes are
// asked of the Policy (deny: PolicyBlocked; needs_review: an approval is
// needed); write_high_risk calls need rollback metadata (RollbackRequired)
// and an approval token that verifies and is bound to this very call
// (ApprovalInvalid), or an approval request is opened (ApprovalRequired,
// with Error.ApprovalID). A write's intent is journaled durably before fn
// runs, its commit before Invoke returns. fn runs under
// Options.ToolTimeout (ToolTimeout). A refused call returns an *Error and
// fn is not called.
func (r *Run) Invoke(ctx context.Context, spec ToolSpec, call Call, fn func(ctx context.Context) (any, error)) (_ *Invocation, err error) {
	if spec.Name == "" {
		return nil, errors.New("govern: tool has no name")
	}
	if call.ID == "" {
		call.ID = ids.New()
	}
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	argsRaw, err := marshalValue(args)
	if err != nil {
		return nil, fmt.Errorf("govern: tool arguments are not JSON-encodable: %w", err)
	}
	argsHash, err := PayloadHash(argsRaw)
	if err != nil {
		return nil, err
	}
	floor := Tier(0)
	if r.class != nil {
		floor = r.class.Floor
	}
	tier := effectiveTier(spec.Tier, r.g.opts.Pinned[spec.Name], floor)
	traceCall(ctx, r.requestID, tier)
	defer func() { r.g.domain.ToolCall(ctx, tier.String(), callOutcome(err)) }()
	intent := CallIntent{Tier: tier, DeclaredTier: spec.Tier.String(), Args: argsRaw, ArgsHash: argsHash}

	r.mu.Lock()
	if err := r.usableLocked(); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	// A replay acts on nothing: it needs no phase of its own (a run
	// resumed after a crash may already be in verify).
	if cs, ok := r.calls[call.ID]; ok && cs.status == recordkind.Commit && cs.argsHash == argsHash && cs.tool == spec.Name {
		inv := r.replayLocked(call.ID, cs)
		r.mu.Unlock()
		return inv, nil
	}
	if err := r.advanceLocked(ctx, Execute); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if cs, ok := r.calls[call.ID]; ok {
		switch {
		case cs.status == recordkind.Commit:
			r.mu.Unlock()
			return nil, r.block(ctx, spec, call, intent, "call ID already committed with another tool or arguments", PolicyBlocked)
		case cs.status == recordkind.Intent:
			r.mu.Unlock()
			return nil, fmt.Errorf("govern: call %s is already running", call.ID)
		}
	}
	intent.Attempt = r.repairs
	r.inflight++
	// Reserve the call ID while the call is gated, so that a concurrent
	// Invoke of the same ID reports it running instead of running it a
	// second time; a refused call gives the ID back.
	prev, hadPrev := r.calls[call.ID]
	cs := &callState{tool: spec.Name, argsHash: argsHash, status: recordkind.Intent, tier: tier}
	r.calls[call.ID] = cs
	reserved := true
	r.mu.Unlock()
	defer func() {
		if !reserved {
			return
		}
		r.mu.Lock()
		if hadPrev {
			r.calls[call.ID] = prev
		} else {
			delete(r.calls, call.ID)
		}
		r.mu.Unlock()
	}()
	violated := false
	defer func() {
		r.mu.Lock()
		r.inflight--
		r.idle.Broadcast()
		r.mu.Unlock()
		if violated {
			if _, err := r.fail(ctx, fmt.Sprintf("tool %s wrote under read_only", spec.Name), nil, TierViolation); err != nil && !errors.Is(err, ErrRunClosed) {
				r.g.log.Error("govern: failing the run after a tier violation", "request_id", r.requestID, "error", err)
			}
		}
	}()

	var grant grant
	unique, err := r.gate(ctx, spec, call, args, &intent, &grant)
	if err != nil {
		return nil, err
	}
	write := tier > ReadOnly
	var intentRec *Record
	if write {
		intentRec = r.record(recordkind.Intent)
		intentRec.Tool, intentRec.CallID, intentRec.Unique = spec.Name, call.ID, unique
		// A decision made by a token presented with the call is journaled
		// with the intent: one fsync for both (see grant).
		if err := r.appendData(ctx, true, intentRec, intent, grant.decision...); err != nil {
			if errors.Is(err, ErrDuplicate) {
				detail := replayDetail
				if grant.decided != nil {
					detail = "approval token already used, or request " + grant.decided.ID + " decided meanwhile"
				}
				return nil, r.block(ctx, spec, call, intent, detail, ApprovalInvalid)
			}
			return nil, err
		}
	}
	r.mu.Lock()
	reserved = false
	if grant.decided != nil {
		r.approvals[grant.decided.ID] = grant.decided
	}
	r.calls[call.ID] = cs // the reservation, now the call's state
	if write {
		r.wrote = true
		if intent.Rollback != nil {
			r.writes = append(r.writes, &writeState{seq: intentRec.Seq, callID: call.ID, tool: spec.Name, action: intent.Rollback})
		}
		if intent.ApprovalID != "" {
			if r.consumed == nil {
				r.consumed = map[string]bool{}
			}
			r.consumed[intent.ApprovalID] = true
		}
	}
	r.mu.Unlock()

	scope := &callScope{run: r, info: CallInfo{RequestID: r.requestID, TraceID: r.traceID, CallID: call.ID, Tool: spec.Name, Tier: tier}}
	start := time.Now()
	result, runErr, reason := r.execute(ctx, scope, fn)
	dur := time.Since(start).Milliseconds()
	scope.mu.Lock()
	violation, extra := scope.violation, scope.evidence
	scope.mu.Unlock()
	if runErr == nil && violation != "" {
		runErr, reason = fmt.Errorf("wrote (%s) under read_only", violation), TierViolation
	}
	var resRaw json.RawMessage
	var ev Evidence
	if runErr == nil {
		// The result is evidence: a result that cannot be encoded or
		// hashed unambiguously fails the call (journaled like any failure)
		// rather than leaving it "running" forever.
		var err error
		if resRaw, err = marshalValue(result); err != nil {
			runErr, reason = fmt.Errorf("tool result is not JSON: %w", err), EvidenceInvalid
		} else if ev, err = r.sealOwnEvidence(Evidence{EvidenceType: ToolResult, Source: spec.Name, Actor: "tool:" + spec.Name, Payload: resRaw,
			Extra: map[string]any{MetaCallID: call.ID}}, spec.Name); err != nil {
			runErr, reason = err, EvidenceInvalid
			var ge *Error
			if errors.As(err, &ge) {
				runErr = errors.New(ge.Detail)
			}
		}
	}
	if runErr != nil {
		violated = reason == TierViolation
		rec := r.record(recordkind.Failed)
		rec.Tool, rec.CallID, rec.Outcome, rec.Reasons = spec.Name, call.ID, Failure, []Reason{reason}
		if err := r.appendData(ctx, write, rec, CallOutcome{Error: truncateDetail(runErr.Error()), ArgsHash: argsHash, DurationMS: dur}); err != nil {
			return nil, err
		}
		r.mu.Lock()
		cs.status = recordkind.Failed
		r.noteOutcomeLocked(call.ID, &Error{Reasons: []Reason{reason}, Tool: spec.Name, CallID: call.ID, Detail: truncateDetail(runErr.Error())})
		r.mu.Unlock()
		return nil, &Error{Reasons: []Reason{reason}, Tool: spec.Name, CallID: call.ID, Detail: truncateDetail(runErr.Error()), Err: runErr}
	}

	evidence := append([]Evidence{ev}, extra...)
	rec := r.record(recordkind.Commit)
	rec.Tool, rec.CallID, rec.Outcome = spec.Name, call.ID, Success
	if err := r.appendData(ctx, write, rec, CallOutcome{ArgsHash: argsHash, ResultHash: ev.Hash, Evidence: evidence, DurationMS: dur}); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cs.status, cs.result, cs.evidence = recordkind.Commit, resRaw, evidence
	r.forgetRefusalLocked(call.ID)
	delete(r.outcomes, call.ID)
	r.evidence = append(r.evidence, evidence...)
	inv := &Invocation{CallID: call.ID, Result: result, Tier: tier, Evidence: cloneEvidence(evidence)}
	inv.Envelope = r.callEnvelopeLocked(spec.Name, call.ID, intent, Success, nil)
	return inv, nil
}

// gate decides whether the call may run, filling intent (policy,
// rollback, approval). It returns the journal Unique key of the approval
// token consumed, if any.
// grant is what gate found besides the journal key: the decision record a
// token presented with the call makes on its pending approval request, to
// be journaled in the same Append as the intent (both precede the tool and
// nothing acts between them, so one fsync covers both: a high-risk call
// costs two fsyncs, not three), and the request as decided, installed
// once that Append succeeded.
type grant struct {
	decision []*Record
	decided  *ApprovalRequest
}

func (r *Run) gate(ctx context.Context, spec ToolSpec, call Call, args map[string]any, intent *CallIntent, gr *grant) (string, error) {
	tier := intent.Tier
	if tier == ReadOnly {
		return "", nil // §5.3: read_only is auto-allowed
	}
	d, err := r.decide(ctx, spec.Name, tier, args)
	intent.Policy = &d
	if err != nil {
		return "", r.block(ctx, spec, call, *intent, "policy failed: "+err.Error(), PolicyBlocked)
	}
	if d.Effect == Deny {
		return "", r.block(ctx, spec, call, *intent, "denied by policy rule "+d.Rule, PolicyBlocked)
	}
	if spec.Rollback != nil {
		a, err := guardValue(func() (*RollbackAction, error) { return spec.Rollback(ctx, call) })
		switch {
		case err != nil:
			return "", r.block(ctx, spec, call, *intent, "computing the rollback action failed: "+err.Error(), RollbackRequired)
		case a != nil && a.Type == "":
			return "", r.block(ctx, spec, call, *intent, "rollback action has no type", RollbackRequired)
		case a != nil && !carriablePayload(a.Payload):
			return "", r.block(ctx, spec, call, *intent, "rollback payload must be a JSON object or string (message-envelope.schema.json)", RollbackRequired)
		case a != nil:
			if _, ok := r.g.opts.Rollbacks[a.Type]; !ok {
				return "", r.block(ctx, spec, call, *intent, fmt.Sprintf("no rollback handler for type %q", a.Type), RollbackRequired)
			}
			h, err := a.Hash()
			if err != nil {
				return "", r.block(ctx, spec, call, *intent, "rollback action is not JSON: "+err.Error(), RollbackRequired)
			}
			intent.Rollback, intent.RollbackHash = a, h
		}
	}
	if tier == WriteHighRisk && intent.Rollback == nil {
		return "", r.block(ctx, spec, call, *intent, "write_high_risk call without rollback metadata", RollbackRequired)
	}
	if tier != WriteHighRisk && d.Effect != Review {
		return "", nil
	}
	return r.approve(ctx, spec, call, intent, gr)
}

func (r *Run) decide(ctx context.Context, tool string, tier Tier, args map[string]any) (d Decision, err error) {
	in := PolicyInput{RequestID: r.requestID, TraceID: r.traceID, Identity: r.identity, TaskClass: r.className, Tool: tool, Tier: tier, Args: args}
	d, err = guardValue(func() (Decision, error) { return r.g.policy.Decide(ctx, in) })
	if err == nil && !d.Effect.valid() {
		err = fmt.Errorf("policy returned effect %q", d.Effect)
	}
	return d, err
}

// approve finds the approval for a call: a token presented with it, or a
// decision on an approval request of the run; else it opens a request.
func (r *Run) approve(ctx context.Context, spec ToolSpec, call Call, intent *CallIntent, gr *grant) (string, error) {
	want := Binding{RequestID: r.requestID, TraceID: r.traceID, Tool: spec.Name, Tier: intent.Tier.String(),
		ArgsHash: intent.ArgsHash, RollbackHash: intent.RollbackHash, Attempt: intent.Attempt}
	reasons := []Reason{ApprovalRequired}
	if intent.Policy != nil && intent.Policy.Effect == Review {
		reasons = append(reasons, NeedsReview)
	}
	// The intent of an approved call carries the approval's use key: an
	// approval is acted on once, also by two processes resuming one run.
	// The token's own single use (its jti) is journaled with the decision.
	use := func(claims *ApprovalClaims, approvalID string) (string, error) {
		intent.ApprovalID, intent.Approver, intent.TokenID = approvalID, claims.Issuer, claims.ID
		return useKey(approvalID), nil
	}
	if r.parent != nil && call.Approval == "" {
		// A child run cannot pause: its parent's call is in flight, and
		// nothing would resume the child inside it. Its call is refused,
		// as an error the child's model sees; no approval is requested.
		return "", r.block(ctx, spec, call, *intent, "a sub-agent's call cannot wait for a human approval (it runs inside its parent's call): give "+spec.Name+" to the top-level agent", PolicyBlocked)
	}
	if call.Approval != "" {
		claims, err := r.g.keyring.Verify(call.Approval, time.Now())
		if err != nil {
			return "", r.block(ctx, spec, call, *intent, err.(*Error).Detail, ApprovalInvalid)
		}
		r.mu.Lock()
		req, ok := r.approvals[claims.Binding.ApprovalID]
		consumed := r.consumed[claims.Binding.ApprovalID]
		r.mu.Unlock()
		if !ok {
			return "", r.block(ctx, spec, call, *intent, "token answers no approval request of this run", ApprovalInvalid)
		}
		b := want
		b.ApprovalID = req.ID
		if err := checkClaims(claims, b, r.identity); err != nil {
			return "", r.block(ctx, spec, call, *intent, err.(*Error).Detail, ApprovalInvalid)
		}
		if consumed {
			return "", r.block(ctx, spec, call, *intent, "approval already used (replay)", ApprovalInvalid)
		}
		switch req.Status {
		case StatusDenied:
			intent.ApprovalID = req.ID
			return "", r.block(ctx, spec, call, *intent, "approval request "+req.ID+" was denied", ApprovalDenied)
		case StatusPending:
			// The presented token answers the pending request: journal
			// the decision as Decide does — with the intent, in one
			// Append (grant) — so that the request stops counting as
			// pending (Verify, Deliver, Governor.Approvals) and cannot be
			// decided a second time, nor the token used again (their
			// Unique keys).
			d := ApprovalDecision{ApprovalID: req.ID, Approved: true, Approver: claims.Issuer, Token: call.Approval,
				TokenID: claims.ID, DecidedAt: Time{ids.Now()}}
			recs, err := r.g.decisionRecords(cloneApproval(req), d)
			if err != nil {
				return "", &Error{Reasons: []Reason{InternalError}, Detail: "journal record: " + err.Error(), Err: err}
			}
			decided := cloneApproval(req)
			decided.Status, decided.Decision = StatusApproved, &d
			gr.decision, gr.decided = recs, &decided
		}
		return use(claims, req.ID)
	}
	r.mu.Lock()
	var pending, denied, approved *ApprovalRequest
	for _, a := range r.approvals {
		b := want
		b.ApprovalID = a.ID
		if a.Binding() != b {
			continue
		}
		switch {
		case a.Status == StatusPending:
			pending = a
		case a.Status == StatusDenied:
			denied = a
		case a.Status == StatusApproved && !r.consumed[a.ID]:
			approved = a
		}
	}
	r.mu.Unlock()
	switch {
	case approved != nil:
		d := approved.Decision
		// The token was checked when it was presented (Decide); check it
		// again as of then, so that expiry while the run waited to
		// resume does not void a valid approval.
		claims, err := r.g.keyring.Verify(d.Token, d.DecidedAt.Time)
		if err == nil {
			b := want
			b.ApprovalID = approved.ID
			err = checkClaims(claims, b, r.identity)
		}
		if err != nil {
			return "", r.block(ctx, spec, call, *intent, "recorded approval no longer verifies: "+err.Error(), ApprovalInvalid)
		}
		return use(claims, approved.ID)
	case denied != nil:
		intent.ApprovalID = denied.ID
		detail := "denied by " + denied.Decision.Approver
		if denied.Decision.Reason != "" {
			detail += ": " + denied.Decision.Reason
		}
		return "", r.block(ctx, spec, call, *intent, detail, ApprovalDenied)
	case pending != nil:
		intent.ApprovalID = pending.ID
		err := r.block(ctx, spec, call, *intent, "waiting for approval "+pending.ID, reasons...)
		err.(*Error).ApprovalID = pending.ID
		return "", err
	}
	req := &ApprovalRequest{ID: ids.New(), RequestID: r.requestID, TraceID: r.traceID, ParentTraceID: r.parentTraceID,
		Tool: spec.Name, CallID: call.ID, Tier: intent.Tier, Args: intent.Args, ArgsHash: intent.ArgsHash,
		Rollback: intent.Rollback, RollbackHash: intent.RollbackHash, Attempt: intent.Attempt, Requester: r.identity,
		Reasons: reasons, Policy: intent.Policy, CreatedAt: Time{ids.Now()}, Status: StatusPending}
	rec := r.record(recordkind.ApprovalRequested)
	rec.Tool, rec.CallID, rec.Reasons = spec.Name, call.ID, reasons
	if err := r.appendData(ctx, true, rec, req); err != nil {
		return "", err
	}
	r.mu.Lock()
	r.approvals[req.ID] = req
	r.mu.Unlock()
	intent.ApprovalID = req.ID
	intent.Policy = &Decision{Effect: Review, Rule: policyRule(intent.Policy)}
	r.mu.Lock()
	env := r.callEnvelopeLocked(spec.Name, call.ID, *intent, Pending, reasons)
	r.mu.Unlock()
	return "", &Error{Reasons: reasons, Tool: spec.Name, CallID: call.ID, ApprovalID: req.ID, Detail: "approval requested: " + req.ID, Envelope: &env}
}

// block journals a refused call and returns the refusal.
func (r *Run) block(ctx context.Context, spec ToolSpec, call Call, intent CallIntent, detail string, reasons ...Reason) error {
	intent.Detail = detail
	rec := r.record(recordkind.Blocked)
	rec.Tool, rec.CallID, rec.Outcome, rec.Reasons = spec.Name, call.ID, Failure, reasons
	if err := r.appendData(ctx, false, rec, intent); err != nil {
		return err
	}
	outcome, decision := Failure, Deny
	if slices.Contains(reasons, ApprovalRequired) {
		// The upstream adapter contract's high-risk rule: without an
		// approval the gate answers needs_review with APPROVAL_REQUIRED.
		outcome, decision = Pending, Review
	} else if intent.Policy != nil && !slices.Contains(reasons, PolicyBlocked) {
		decision = intent.Policy.Effect
	}
	intent.Policy = &Decision{Effect: decision, Rule: policyRule(intent.Policy)}
	r.mu.Lock()
	env := r.callEnvelopeLocked(spec.Name, call.ID, intent, outcome, reasons)
	r.noteOutcomeLocked(call.ID, &Error{Reasons: reasons, Tool: spec.Name, CallID: call.ID, ApprovalID: intent.ApprovalID, Detail: detail})
	r.mu.Unlock()
	return &Error{Reasons: reasons, Tool: spec.Name, CallID: call.ID, ApprovalID: intent.ApprovalID, Detail: detail, Envelope: &env}
}

// carriablePayload reports whether a rollback payload fits the
// envelope's rollback_action.payload, which the schema allows to be an
// object or a string only (or absent). A payload that does not fit would
// make every envelope of the call invalid, so the write has no usable
// rollback.
func carriablePayload(p any) bool {
	if p == nil {
		return true
	}
	b, err := json.Marshal(p)
	if err != nil {
		return false
	}
	b = bytes.TrimSpace(b)
	return len(b) > 0 && (b[0] == '{' || b[0] == '"')
}

func policyRule(d *Decision) string {
	if d == nil {
		return ""
	}
	return d.Rule
}

// execute runs fn in the call's scope under the tool timeout, turning a
// panic, a timeout and a cancellation into errors with their reason.
func (r *Run) execute(ctx context.Context, scope *callScope, fn func(ctx context.Context) (any, error)) (any, error, Reason) {
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, scopeKey{}, scope), r.g.opts.ToolTimeout)
	defer cancel()
	type outcome struct {
		v   any
		err error
	}
	ch := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- outcome{err: fmt.Errorf("tool panicked: %v\n%s", p, debug.Stack())}
			}
		}()
		v, err := fn(cctx)
		ch <- outcome{v, err}
	}()
	select {
	case o := <-ch:
		switch {
		case o.err == nil:
			return o.v, nil, ""
		case errors.Is(o.err, context.DeadlineExceeded) && ctx.Err() == nil:
			return nil, o.err, ToolTimeout
		case ctx.Err() != nil:
			return nil, o.err, Cancelled
		}
		var ge *Error
		if errors.As(o.err, &ge) && len(ge.Reasons) > 0 && ge.Reasons[0] == TierViolation {
			return nil, o.err, TierViolation
		}
		return nil, o.err, ToolFailed
	case <-cctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err(), Cancelled
		}
		return nil, fmt.Errorf("tool timed out after %s", r.g.opts.ToolTimeout), ToolTimeout
	}
}

func (r *Run) replayLocked(callID string, cs *callState) *Invocation {
	var v any
	_ = json.Unmarshal(cs.result, &v)
	return &Invocation{CallID: callID, Result: v, Replayed: true, Tier: cs.tier, Evidence: cloneEvidence(cs.evidence),
		Envelope: r.callEnvelopeLocked(cs.tool, callID, CallIntent{Tier: cs.tier}, Success, nil)}
}

func (r *Run) callEnvelopeLocked(tool, callID string, intent CallIntent, outcome Outcome, reasons []Reason) Envelope {
	e := Envelope{UAICPVersion: Version, RequestID: r.requestID, TraceID: r.traceID, ParentTraceID: r.parentTraceID,
		State: Execute, Timestamp: Time{ids.Now()}, Identity: r.identity, Outcome: outcome, Rollback: intent.Rollback,
		Metadata: map[string]any{MetaTool: tool, MetaCallID: callID, MetaRiskTier: intent.Tier.String(), MetaActorKind: string(ActorAgent)}}
	if intent.DeclaredTier != "" {
		e.Metadata[MetaDeclaredTier] = intent.DeclaredTier
	}
	if intent.Policy != nil {
		e.Metadata[MetaPolicyDecision] = string(intent.Policy.Effect)
		e.Metadata[MetaPolicyRule] = intent.Policy.Rule
	}
	if intent.ApprovalID != "" {
		e.Metadata[MetaApprovalID] = intent.ApprovalID
	}
	if len(reasons) > 0 {
		e.Metadata[MetaReasons] = reasons
	}
	return e
}

func cloneEvidence(evs []Evidence) []Evidence {
	out := make([]Evidence, len(evs))
	for i, e := range evs {
		out[i] = e.Clone()
	}
	return out
}

func guardValue[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	return f()
}
