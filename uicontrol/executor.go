package uicontrol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/agentry-dev/agentry/internal/uiapwire"
)

// The app side of the Action Runtime: the Executor of the draft (§2.1),
// which receives action.request, asks its policy, obtains a confirmation
// or hands off when the policy says so, runs the action and reports it.

// ActionFunc runs one action on the app side. It runs on its own
// goroutine; ctx ends when the action is cancelled (action.cancel) or
// times out (timeoutMs), or the session terminates, and the function
// should then return promptly: the action's result is what it returns.
// progress reports progress to the agent (action.progress); it may be
// called until the function returns. The result is any JSON value (nil:
// none). An error ends the action FAILED — an *Error is sent as it is,
// any other as internal_error with its text kept local — or CANCELLED
// when the action was cancelled or the error is ErrActionCancelled.
type ActionFunc func(ctx context.Context, s *AppSession, req *ActionRequest, progress func(ActionProgress)) (any, error)

type actionEntry struct {
	risk Risk
	run  ActionFunc
}

// HandleAction registers run as the action id, with its declared risk
// (which the policy sees; an empty risk counts as high). Registering an
// id twice panics.
func (a *App) HandleAction(id string, risk Risk, run ActionFunc) {
	if id == "" || run == nil {
		panic("uicontrol: HandleAction: empty action id or nil function")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.actions[id]; dup {
		panic("uicontrol: HandleAction: action " + id + " registered twice")
	}
	a.actions[id] = &actionEntry{risk: risk, run: run}
}

// idempotencyWindow is how many finished idempotency keys a session
// remembers.
const idempotencyWindow = 1024

// sessionActions is a session's running actions and idempotency keys.
type sessionActions struct {
	mu      sync.Mutex
	running map[string]*runningAction // by action.request id
	keys    map[string]*keyRecord
	order   []string // keys of finished, kept records, oldest first
}

type runningAction struct {
	cancel context.CancelCauseFunc
	state  atomic.Value // ActionState
}

// keyRecord is the outcome of the request that first used an idempotency
// key: done is closed once result or err is set.
type keyRecord struct {
	fingerprint string
	done        chan struct{}
	result      *ActionResult
	err         *Error
}

// errCancelRequested is the cause of an action context ended by
// action.cancel.
var errCancelRequested = errors.New("action.cancel received")

// claim looks the request's idempotency key up: the record of the request
// that used it first (first == false), or a new record the caller must
// settle.
func (x *sessionActions) claim(req *ActionRequest) (rec *keyRecord, first bool, err *Error) {
	fp := fingerprint(req)
	x.mu.Lock()
	defer x.mu.Unlock()
	if r, ok := x.keys[req.IdempotencyKey]; ok {
		if r.fingerprint != fp {
			return nil, false, newErrorf(CodeBadRequest, "idempotencyKey %q was used for a different request", req.IdempotencyKey).
				with("field", "payload.idempotencyKey")
		}
		return r, false, nil
	}
	if x.keys == nil {
		x.keys = map[string]*keyRecord{}
	}
	r := &keyRecord{fingerprint: fp, done: make(chan struct{})}
	x.keys[req.IdempotencyKey] = r
	return r, true, nil
}

// settle records the outcome of the request that claimed key. keep says
// the action ran, so that a later request with the key gets this outcome;
// otherwise the key is released (requests already waiting on the record
// still get the outcome).
func (x *sessionActions) settle(key string, rec *keyRecord, result *ActionResult, err *Error, keep bool) {
	if rec == nil {
		return
	}
	x.mu.Lock()
	rec.result, rec.err = result, err
	if keep {
		x.order = append(x.order, key)
		for len(x.order) > idempotencyWindow {
			delete(x.keys, x.order[0])
			x.order = x.order[1:]
		}
	} else if x.keys[key] == rec {
		delete(x.keys, key)
	}
	x.mu.Unlock()
	close(rec.done)
}

func (x *sessionActions) register(id string, r *runningAction) {
	x.mu.Lock()
	if x.running == nil {
		x.running = map[string]*runningAction{}
	}
	x.running[id] = r
	x.mu.Unlock()
}

func (x *sessionActions) unregister(id string) {
	x.mu.Lock()
	delete(x.running, id)
	x.mu.Unlock()
}

func (x *sessionActions) lookup(id string) *runningAction {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.running[id]
}

// fingerprint identifies what a request asks for, so that a key reused
// for a different request is refused: the action, its arguments and its
// target, with JSON normalised (member order, spacing; numbers keep
// their text, so that no two numbers compare equal by rounding).
func fingerprint(req *ActionRequest) string {
	norm := func(v any) any {
		b, err := json.Marshal(rawOrValue(v))
		if err != nil {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var out any
		_ = dec.Decode(&out)
		return out
	}
	var target any
	if req.Target != nil {
		t := *req.Target
		t.Ref = nil
		target = []any{norm(t), norm(req.Target.Ref)}
	}
	b, _ := json.Marshal([]any{req.ActionID, norm(req.Args), target})
	return string(b)
}

// action processes a request of the action.* namespace.
func (c *appConn) action(env *Envelope) {
	s := c.session
	if _, ok := s.sel.extension(ExtensionAction); !ok {
		c.replyError(env, newErrorf(CodeUnsupportedExtension, "%s needs the extension %s, which this session did not select",
			env.Type, ExtensionAction).with("extension", ExtensionAction))
		return
	}
	switch env.Type {
	case uiapwire.TypeActionRequest:
		c.actionRequest(env)
	case uiapwire.TypeActionCancel:
		c.actionCancel(env)
	default:
		c.replyError(env, newErrorf(CodeUnknownMessageType, "unknown message type %q", env.Type))
	}
}

func (c *appConn) actionRequest(env *Envelope) {
	s, a := c.session, c.app
	req, perr := decodeActionRequest(env.Payload)
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	req.RequestID = env.ID
	a.mu.Lock()
	entry := a.actions[req.ActionID]
	a.mu.Unlock()
	if entry == nil {
		c.replyError(env, newErrorf(CodeCapabilityUnavailable, "action %q is not available", req.ActionID).with("actionId", req.ActionID))
		return
	}
	var rec *keyRecord
	if req.IdempotencyKey != "" {
		var first bool
		if rec, first, perr = s.acts.claim(req); perr != nil {
			c.replyError(env, perr)
			return
		}
		if !first {
			l := c.l
			a.wg.Go(func() { s.answerRepeat(l, env, rec) })
			return
		}
	}
	ctx, cancel := context.WithCancelCause(s.ctx)
	run := &runningAction{cancel: cancel}
	run.state.Store(ActionReceived)
	s.acts.register(env.ID, run)
	l := c.l
	a.wg.Go(func() {
		defer cancel(nil)
		result, ran, err := s.runAction(ctx, l, req, entry, run)
		s.acts.unregister(env.ID) // before the answer: a later cancel finds nothing running
		var out *Envelope
		if err != nil {
			out = s.stamp().errorFor(env, err)
		} else if out, _ = s.stamp().reply(env, uiapwire.TypeActionResult, result); out == nil {
			err = NewError(CodeInternalError, "internal error")
			out = s.stamp().errorFor(env, err)
		}
		if req.IdempotencyKey != "" {
			s.acts.settle(req.IdempotencyKey, rec, result, err, ran)
		}
		_ = s.sendOn(l, out)
	})
}

// answerRepeat answers a request whose idempotency key was used before
// with the first request's outcome, once there is one: the action does
// not run again.
func (s *AppSession) answerRepeat(l *link, env *Envelope, rec *keyRecord) {
	select {
	case <-rec.done:
	case <-s.ctx.Done():
		return
	}
	var out *Envelope
	if rec.err != nil {
		out = s.stamp().errorFor(env, rec.err)
	} else {
		r := *rec.result
		r.RequestID, r.Deduplicated = env.ID, true
		var err error
		if out, err = s.stamp().reply(env, uiapwire.TypeActionResult, &r); err != nil {
			out = s.stamp().errorFor(env, NewError(CodeInternalError, "internal error"))
		}
	}
	_ = s.sendOn(l, out)
}

// runAction takes an accepted request through its lifecycle and returns
// its action.result, or the error refusing it. ran reports whether the
// action itself (or the human it was handed to) was run, so that its
// idempotency key stays used.
func (s *AppSession) runAction(ctx context.Context, l *link, req *ActionRequest, entry *actionEntry, run *runningAction) (result *ActionResult, ran bool, refused *Error) {
	a := s.app
	if req.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, req.Timeout)
		defer stop()
	}
	risk := entry.risk
	if risk == "" {
		risk = RiskHigh
	}
	decision, perr := s.decide(ctx, req, risk)
	if perr != nil {
		return nil, false, perr
	}
	start := ActionExecuting
	switch decision.Decision {
	case DecisionAllow:
	case DecisionConfirm:
		start = ActionAwaitingConfirmation
	case DecisionHandoff:
		if a.opts.Handoff == nil {
			return nil, false, policyRefusal(decision, "the action must be handed to a human, and this app has none to hand it to")
		}
		start = ActionWaitingForUser
	default:
		return nil, false, policyRefusal(decision, "the app's policy denies this action")
	}

	// Accepted: from here on the request is answered by action.result.
	result = &ActionResult{RequestID: req.RequestID, ActionID: req.ActionID, IdempotencyKey: req.IdempotencyKey}
	ext := policyExtFor(s.sel, decision)
	run.state.Store(start)
	_ = s.emitWith(s.ctx, uiapwire.TypeActionStarted, &ActionProgress{RequestID: req.RequestID, ActionID: req.ActionID, State: start}, ext)

	if decision.Decision == DecisionConfirm {
		ok, err := s.confirm(ctx, l, req, risk, decision, ext)
		if !ok {
			s.finishResult(ctx, result, err)
			return result, false, nil
		}
		run.state.Store(ActionExecuting)
		_ = s.emitWith(s.ctx, uiapwire.TypeActionProgress, &ActionProgress{RequestID: req.RequestID, ActionID: req.ActionID, State: ActionExecuting}, nil)
	}

	var done atomic.Bool
	progress := func(p ActionProgress) {
		if done.Load() {
			return
		}
		p.RequestID, p.ActionID = req.RequestID, req.ActionID
		if !p.State.valid() || p.State.terminal() || p.State == ActionReceived {
			p.State = start
			if start == ActionAwaitingConfirmation {
				p.State = ActionExecuting
			}
		}
		if !(p.Progress >= 0 && p.Progress <= 1) { // NaN too
			p.Progress = 0
		}
		p.Data = rawOrValue(p.Data)
		run.state.Store(p.State)
		if err := s.emitWith(s.ctx, uiapwire.TypeActionProgress, &p, nil); err != nil {
			a.log.Debug("uicontrol: action progress not sent", "action", req.ActionID, "err", err)
		}
	}
	value, err := func() (v any, err error) {
		defer func() {
			if p := recover(); p != nil {
				a.log.Error("uicontrol: action panicked", "action", req.ActionID, "panic", p)
				err = NewError(CodeInternalError, "internal error")
			}
		}()
		if decision.Decision == DecisionHandoff {
			return a.opts.Handoff(ctx, s, req, decision.Reason)
		}
		return entry.run(ctx, s, req, progress)
	}()
	done.Store(true)
	if err == nil {
		b, merr := json.Marshal(rawOrValue(value))
		if merr != nil {
			a.log.Error("uicontrol: action result does not encode", "action", req.ActionID, "err", merr)
			err = merr
		} else if string(b) != "null" {
			result.Result = b
		}
	}
	s.finishResult(ctx, result, err)
	return result, true, nil
}

// finishResult sets a result's terminal state from the error the action
// ended with (nil: SUCCEEDED).
func (s *AppSession) finishResult(ctx context.Context, r *ActionResult, err error) {
	switch {
	case err == nil:
		r.State = ActionSucceeded
	case errors.Is(err, ErrActionCancelled) || errors.Is(context.Cause(ctx), errCancelRequested):
		r.State = ActionCancelled
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The action may have taken effect before it noticed: a timeout is
		// not blindly retryable.
		r.State, r.Error = ActionFailed, NewError(CodeTimeout, "the action timed out; it may have taken effect")
	case ctx.Err() != nil: // the session is ending
		r.State = ActionCancelled
	default:
		r.State, r.Error = ActionFailed, wireError(err)
		if r.Error.Code == CodeInternalError {
			s.app.log.Error("uicontrol: action failed", "action", r.ActionID, "err", err)
		}
	}
}

// decide asks the app's policy about a request.
func (s *AppSession) decide(ctx context.Context, req *ActionRequest, risk Risk) (d PolicyDecision, err *Error) {
	policy := s.app.opts.Policy
	if policy == nil {
		policy = DefaultPolicy
	}
	defer func() {
		if p := recover(); p != nil {
			s.app.log.Error("uicontrol: policy panicked", "action", req.ActionID, "panic", p)
			err = NewError(CodeInternalError, "internal error")
		}
	}()
	return policy(ctx, s, req, risk), nil
}

// policyRefusal is the error refusing an action by policy; details say
// which decision refused it (also when the policy extension is not
// selected: the decision is enforced either way).
func policyRefusal(d PolicyDecision, fallback string) *Error {
	msg := d.Reason
	if msg == "" {
		msg = fallback
	}
	decision := d.Decision
	if decision != DecisionHandoff {
		decision = DecisionDeny
	}
	return NewError(CodePermissionDenied, msg).with("decision", string(decision))
}

// confirm asks the controller to confirm the action (action.confirm) and
// reports whether it did. When it did not, err says why the action ends:
// the action's context, or a permission_denied naming the refusal.
func (s *AppSession) confirm(ctx context.Context, l *link, req *ActionRequest, risk Risk, d PolicyDecision, ext map[string]json.RawMessage) (bool, error) {
	p := &ActionConfirmation{RequestID: req.RequestID, ActionID: req.ActionID, Target: req.Target, Risk: risk, Reason: d.Reason}
	if raw, ok := req.Args.(json.RawMessage); ok {
		p.Args = raw
	}
	e, err := s.stamp().envelope(KindRequest, uiapwire.TypeActionConfirm, p)
	if err != nil {
		return false, err
	}
	e.Requires, e.Ext = []string{ExtensionAction}, ext
	refused := func(why string) error {
		return NewError(CodePermissionDenied, why).with("decision", string(DecisionConfirm))
	}
	r, err := l.call(ctx, e, nil)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil:
		return false, refused("the action was not confirmed: the connection was lost")
	case r.Kind == KindError:
		return false, refused("the action was not confirmed: " + remoteError(r).Message)
	case r.Type != uiapwire.TypeActionConfirmed:
		return false, refused(fmt.Sprintf("the action was not confirmed: action.confirm was answered with %s", r.Type))
	}
	c, perr := decodeActionConfirmed(r.Payload)
	switch {
	case perr != nil:
		return false, refused("the action was not confirmed: " + perr.Message)
	case !c.Confirmed:
		why := "the action was not confirmed"
		if c.Reason != "" {
			why += ": " + c.Reason
		}
		return false, refused(why)
	}
	return true, nil
}

// actionCancel answers action.cancel: the action is asked to stop (its
// context ends) and its action.result follows the answer.
func (c *appConn) actionCancel(env *Envelope) {
	s := c.session
	p, perr := decodeActionCancel(env.Payload)
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	run := s.acts.lookup(p.RequestID)
	if run == nil {
		c.replyError(env, newErrorf(CodeStateConflict, "no action of request %q is running", p.RequestID).with("requestId", p.RequestID))
		return
	}
	// The answer goes out before the action can end, so that it precedes
	// the action.result.
	c.reply(env, uiapwire.TypeActionCancelled, &actionCancelAck{RequestID: p.RequestID, State: run.state.Load().(ActionState)})
	run.cancel(errCancelRequested)
}
