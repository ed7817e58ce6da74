package uicontrol

import (
	"context"
	"errors"
	"sync"

	"github.com/agentry-dev/agentry/internal/uiapwire"
)

// The agent side of the Action Runtime: the Controller of the draft
// (§2.2), which sends action.request and action.cancel and answers the
// app's confirmation requests.

// ConfirmFunc answers the app's request to confirm an action
// (action.confirm, when its policy decided confirm): typically by asking
// the human the agent acts for. It runs on its own goroutine; ctx ends
// when the session terminates. An error is sent to the app as the
// answer (an *Error as it is, any other as internal_error); the app then
// treats the action as not confirmed.
type ConfirmFunc func(ctx context.Context, c *ActionConfirmation) (confirmed bool, err error)

// progressQueueLimit bounds the progress reports queued for one call
// whose consumer is slow; further ones are dropped.
const progressQueueLimit = 256

// actionCall is an action.request awaiting its action.result.
type actionCall struct {
	mu     sync.Mutex
	queue  []*ActionProgress
	notify chan struct{} // signalled when queue grows
}

func (c *actionCall) push(p *ActionProgress) bool {
	c.mu.Lock()
	ok := len(c.queue) < progressQueueLimit
	if ok {
		c.queue = append(c.queue, p)
	}
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return ok
}

func (c *actionCall) drain(f func(*ActionProgress)) {
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	if f != nil {
		for _, p := range q {
			f(p)
		}
	}
}

// actionLink returns the link to send an action message on: the session
// must be ACTIVE and have selected the Action Runtime.
func (a *Agent) actionLink() (*link, error) {
	l, err := a.activeLink()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	_, ok := a.sel.extension(ExtensionAction)
	a.mu.Unlock()
	if !ok {
		return nil, newErrorf(CodeUnsupportedExtension, "the session did not select the extension %s (offer it in AgentOptions.Extensions)",
			ExtensionAction).with("extension", ExtensionAction)
	}
	return l, nil
}

// CallAction asks the app to run an action (action.request) and waits for
// its action.result. progress, if not nil, is called on the calling
// goroutine with action.started and each action.progress, in order,
// before CallAction returns.
//
// It returns the result and nil when the action SUCCEEDED; the result and
// its *Error when it FAILED; the result and ErrActionCancelled when it was
// CANCELLED. A request the app refused (an unknown action, a policy deny,
// rate_limited, ...) returns the app's *Error and no result. When ctx
// ends first, the app is asked to cancel the action (action.cancel) and
// CallAction returns ctx's error.
//
// CallAction never sends a request twice: after an error that leaves the
// outcome unknown (a lost transport, ctx) a repeat is safe only with the
// same req.IdempotencyKey, which makes the app answer with the first
// request's result instead of running the action again. The session must
// have selected ExtensionAction.
func (a *Agent) CallAction(ctx context.Context, req *ActionRequest, progress func(*ActionProgress)) (*ActionResult, error) {
	l, err := a.actionLink()
	if err != nil {
		return nil, err
	}
	e, err := a.stamp().envelope(KindRequest, uiapwire.TypeActionRequest, req)
	if err != nil {
		return nil, err
	}
	// Refuse locally what the app would refuse as malformed.
	if _, perr := decodeActionRequest(e.Payload); perr != nil {
		return nil, perr
	}
	e.Requires = []string{ExtensionAction}
	call := &actionCall{notify: make(chan struct{}, 1)}
	a.mu.Lock()
	if a.actions == nil {
		a.actions = map[string]*actionCall{}
	}
	a.actions[e.ID] = call
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.actions, e.ID)
		a.mu.Unlock()
	}()
	w, release, err := l.start(ctx, e, nil)
	if err != nil {
		return nil, err
	}
	defer release()
	for {
		var r *Envelope
		select {
		case r = <-w.ch:
		case <-call.notify:
			call.drain(progress)
			continue
		case <-l.done:
			if r, err = l.late(w); err != nil {
				call.drain(progress)
				return nil, err
			}
		case <-ctx.Done():
			id := e.ID
			a.wg.Go(func() { _ = a.cancelOn(l.ctx, l, id, "the caller gave up") })
			return nil, ctx.Err()
		}
		// Progress reports precede their result on the connection, and the
		// receiver queued them before delivering it.
		call.drain(progress)
		return actionOutcome(r)
	}
}

// actionOutcome reads the answer to an action.request.
func actionOutcome(r *Envelope) (*ActionResult, error) {
	if r.Kind == KindError {
		return nil, remoteError(r)
	}
	if r.Type != uiapwire.TypeActionResult {
		return nil, newErrorf(CodeInvalidMessage, "action.request answered with %s", r.Type)
	}
	res, perr := decodeActionResult(r.Payload)
	if perr != nil {
		return nil, perr
	}
	switch res.State {
	case ActionSucceeded:
		return res, nil
	case ActionCancelled:
		return res, ErrActionCancelled
	}
	if res.Error != nil {
		return res, res.Error
	}
	return res, NewError(CodeInternalError, "the action failed")
}

// CancelAction asks the app to cancel the running action that the
// action.request with id requestID started (ActionProgress.RequestID
// names it). The app answers at once; the action's result, CANCELLED
// unless it finished first, then reaches its CallAction. An action that
// is not running (finished, or never started) is state_conflict.
func (a *Agent) CancelAction(ctx context.Context, requestID, reason string) error {
	l, err := a.actionLink()
	if err != nil {
		return err
	}
	return a.cancelOn(ctx, l, requestID, reason)
}

func (a *Agent) cancelOn(ctx context.Context, l *link, requestID, reason string) error {
	e, err := a.stamp().envelope(KindRequest, uiapwire.TypeActionCancel, &actionCancel{RequestID: requestID, Reason: reason})
	if err != nil {
		return err
	}
	e.Requires = []string{ExtensionAction}
	r, err := l.call(ctx, e, nil)
	if err != nil {
		return err
	}
	if r.Kind == KindError {
		return remoteError(r)
	}
	if r.Type != uiapwire.TypeActionCancelled {
		return newErrorf(CodeInvalidMessage, "action.cancel answered with %s", r.Type)
	}
	if _, perr := decodeActionCancelled(r.Payload); perr != nil {
		return perr
	}
	return nil
}

// actionEvent routes action.started and action.progress to the call
// they report on; it reports whether the payload was valid.
func (a *Agent) actionEvent(env *Envelope) *Error {
	p, perr := decodeActionProgress(env.Payload)
	if perr != nil {
		return perr
	}
	p.Started = env.Type == uiapwire.TypeActionStarted
	p.Policy = policyExt(env)
	a.mu.Lock()
	call := a.actions[p.RequestID]
	a.mu.Unlock()
	if call != nil && !call.push(p) {
		a.log.Debug("uicontrol: action progress dropped (slow consumer)", "requestId", p.RequestID)
	}
	return nil
}

// confirmAction answers action.confirm with the ConfirmFunc's answer
// (not confirmed when there is none).
func (a *Agent) confirmAction(l *link, env *Envelope) {
	p, perr := decodeActionConfirm(env.Payload)
	if perr != nil {
		a.replyError(l, env, perr)
		return
	}
	p.Policy = policyExt(env)
	answer := &actionConfirmed{RequestID: p.RequestID, Reason: "no one to confirm it"}
	if confirm := a.opts.Confirm; confirm != nil {
		ok, err := func() (ok bool, err error) {
			defer func() {
				if r := recover(); r != nil {
					a.log.Error("uicontrol: Confirm panicked", "panic", r)
					err = errors.New("panic")
				}
			}()
			return confirm(a.ctx, p)
		}()
		if err != nil {
			a.replyError(l, env, wireError(err))
			return
		}
		answer.Confirmed, answer.Reason = ok, ""
		if !ok {
			answer.Reason = "declined"
		}
	}
	a.reply(l, env, uiapwire.TypeActionConfirmed, answer)
}
