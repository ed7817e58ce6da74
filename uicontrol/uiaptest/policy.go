package uiaptest

import (
	"context"
	"errors"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func policyCases() []testCase {
	return []testCase{
		{"UIAP_Policy_Deny", testPolicyDeny},
		{"UIAP_Policy_ConfirmRoundTrip", testPolicyConfirm},
		{"UIAP_Policy_ConfirmRefused", testPolicyConfirmRefused},
		{"UIAP_Policy_ConfirmCancelled", testPolicyConfirmCancelled},
		{"UIAP_Policy_AgentConfirms", testPolicyAgentConfirms},
		{"UIAP_Policy_Handoff", testPolicyHandoff},
		{"UIAP_Policy_HandoffWithoutHuman", testPolicyHandoffNoHuman},
	}
}

// policyExt returns the decision a message carries in its ext entry for
// the policy extension spelled id, or nil.
func policyExt(m msg, id string) msg {
	ext, _ := m["ext"].(msg)
	d, _ := ext[id].(msg)
	return d
}

// deny: the request is refused with permission_denied naming the
// decision; the action never starts.
func testPolicyDeny(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	id := p.action(msg{"actionId": actionDeny})
	pl := p.error(id, uicontrol.CodePermissionDenied)
	if pl["message"] != "denied by the suite's policy" || jsonEqual(h, msg{"decision": "deny"}, pl["details"]) != "" {
		h.Errorf("error = %v", pl)
	}
	// Enforced also when the policy extension was not negotiated.
	p = h.rawAgent(h.app(nil))
	init := actionInitialize()
	init["supportedExtensions"] = []any{msg{"id": extAction, "versions": []any{"0.1"}}}
	p.handshake(init)
	id = p.action(msg{"actionId": actionDeny})
	p.error(id, uicontrol.CodePermissionDenied)
	// A policy that fails closed: a decision it does not know is a deny.
	app := h.app(func(o *uicontrol.AppOptions) {
		o.Policy = func(context.Context, *uicontrol.AppSession, *uicontrol.ActionRequest, uicontrol.Risk) uicontrol.PolicyDecision {
			return uicontrol.PolicyDecision{Decision: "maybe"}
		}
	})
	p = h.rawAgent(app)
	p.handshake(actionInitialize())
	id = p.action(msg{"actionId": actionEcho})
	p.error(id, uicontrol.CodePermissionDenied)
}

// confirm: the app asks the controller (action.confirm, a request) and
// runs the action only after an explicit action.confirmed with
// confirmed: true. The decision travels in ext under the policy
// extension, spelled as the agent offered it (uicp.policy here).
func testPolicyConfirm(h *h) {
	p := h.rawAgent(h.app(nil))
	init := actionInitialize()
	init["supportedExtensions"] = []any{msg{"id": "uicp.policy", "versions": []any{"0.1"}}, msg{"id": extAction, "versions": []any{"0.1"}}}
	p.handshake(init)
	id := p.action(msg{"actionId": actionPay, "args": msg{"amount": 12.5}})
	started := p.event(uiapwire.TypeActionStarted)
	if pl := started["payload"].(msg); pl["requestId"] != id || pl["state"] != string(uicontrol.ActionAwaitingConfirmation) {
		h.Errorf("action.started = %v", pl)
	}
	if d := policyExt(started, "uicp.policy"); d["decision"] != "confirm" {
		h.Errorf("action.started ext = %v", started["ext"])
	}
	req := p.next()
	if req["kind"] != "request" || req["type"] != uiapwire.TypeActionConfirm {
		h.Fatalf("want action.confirm, got %v", req)
	}
	if d := jsonEqual(h, []any{extAction}, req["requires"]); d != "" {
		h.Errorf("action.confirm requires (-want +got):\n%s", d)
	}
	want := msg{"requestId": id, "actionId": actionPay, "args": msg{"amount": 12.5}, "risk": "high", "reason": "high-risk action"}
	if d := jsonEqual(h, want, req["payload"]); d != "" {
		h.Errorf("action.confirm payload (-want +got):\n%s", d)
	}
	if d := policyExt(req, "uicp.policy"); d["decision"] != "confirm" {
		h.Errorf("action.confirm ext = %v", req["ext"])
	}
	p.respond(req, uiapwire.TypeActionConfirmed, msg{"requestId": id, "confirmed": true})
	p.actionEvent(uiapwire.TypeActionProgress, id, actionPay, uicontrol.ActionExecuting)
	res := p.result(id, actionPay, uicontrol.ActionSucceeded)
	if d := jsonEqual(h, msg{"paid": true}, res["result"]); d != "" {
		h.Errorf("result (-want +got):\n%s", d)
	}
}

// confirm refused — by confirmed: false, by an error, by a malformed
// answer: the action does not run and FAILED with permission_denied.
func testPolicyConfirmRefused(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	for name, answer := range map[string]func(req msg){
		"confirmed false": func(req msg) {
			p.respond(req, uiapwire.TypeActionConfirmed, msg{"confirmed": false, "reason": "too expensive"})
		},
		"error": func(req msg) {
			m := p.msg("error", "error", msg{"code": "permission_denied", "message": "the user said no"})
			m["correlationId"] = req["id"]
			p.send(m)
		},
		"confirmed missing": func(req msg) { p.respond(req, uiapwire.TypeActionConfirmed, msg{}) },
		"wrong type":        func(req msg) { p.respond(req, "x.test.whatever", msg{"confirmed": true}) },
	} {
		id := p.action(msg{"actionId": actionPay, "idempotencyKey": "pay"})
		p.actionEvent(uiapwire.TypeActionStarted, id, actionPay, uicontrol.ActionAwaitingConfirmation)
		req := p.next()
		if req["type"] != uiapwire.TypeActionConfirm {
			h.Fatalf("%s: want action.confirm, got %v", name, req)
		}
		answer(req)
		res := p.result(id, actionPay, uicontrol.ActionFailed)
		e := res["error"].(msg)
		if e["code"] != string(uicontrol.CodePermissionDenied) || jsonEqual(h, msg{"decision": "confirm"}, e["details"]) != "" {
			h.Errorf("%s: error = %v", name, e)
		}
		// The action did not run: its idempotency key is free again (the
		// next iteration reuses it and is asked again).
	}
}

// The action's context covers the wait for the confirmation: cancelling
// it ends the action CANCELLED, and a timeout FAILED.
func testPolicyConfirmCancelled(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	id := p.action(msg{"actionId": actionPay})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionPay, uicontrol.ActionAwaitingConfirmation)
	req := p.next()
	c := p.request(uiapwire.TypeActionCancel, msg{"requestId": id})
	if pl := p.response(c, uiapwire.TypeActionCancelled); pl["state"] != string(uicontrol.ActionAwaitingConfirmation) {
		h.Errorf("action.cancelled = %v", pl)
	}
	p.result(id, actionPay, uicontrol.ActionCancelled)
	// A late confirmation is dropped.
	p.respond(req, uiapwire.TypeActionConfirmed, msg{"confirmed": true})

	id = p.action(msg{"actionId": actionPay, "timeoutMs": 1000})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionPay, uicontrol.ActionAwaitingConfirmation)
	if req := p.next(); req["type"] != uiapwire.TypeActionConfirm {
		h.Fatalf("want action.confirm, got %v", req)
	}
	res := p.result(id, actionPay, uicontrol.ActionFailed)
	if e := res["error"].(msg); e["code"] != string(uicontrol.CodeTimeout) {
		h.Errorf("error = %v", e)
	}
}

// The Agent answers action.confirm with AgentOptions.Confirm; without
// one, it does not confirm.
func testPolicyAgentConfirms(h *h) {
	app := h.app(nil)
	var asked []*uicontrol.ActionConfirmation
	opts := actionAgentOptions()
	opts.Confirm = func(ctx context.Context, c *uicontrol.ActionConfirmation) (bool, error) {
		asked = append(asked, c)
		return len(asked) == 1, nil
	}
	a := h.agent(app, opts)
	res, err := a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionPay, Args: map[string]any{"amount": 3}}, nil)
	if err != nil || res.State != uicontrol.ActionSucceeded {
		h.Fatalf("confirmed: %+v, %v", res, err)
	}
	if len(asked) != 1 || asked[0].ActionID != actionPay || asked[0].Risk != uicontrol.RiskHigh || asked[0].RequestID != res.RequestID ||
		string(asked[0].Args) != `{"amount":3}` || asked[0].Policy == nil || asked[0].Policy.Decision != uicontrol.DecisionConfirm {
		h.Errorf("asked %+v", asked)
	}
	res, err = a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionPay}, nil)
	if !errors.Is(err, uicontrol.CodePermissionDenied) || res == nil || res.State != uicontrol.ActionFailed {
		h.Errorf("declined: %+v, %v", res, err)
	}
	opts.Confirm = func(ctx context.Context, c *uicontrol.ActionConfirmation) (bool, error) {
		return false, errors.New("the confirmer is broken")
	}
	b := h.agent(app, opts)
	if _, err := b.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionPay}, nil); !errors.Is(err, uicontrol.CodePermissionDenied) {
		h.Errorf("confirmer failing: %v", err)
	}
	c := h.agent(app, actionAgentOptions())
	if _, err := c.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionPay}, nil); !errors.Is(err, uicontrol.CodePermissionDenied) {
		h.Errorf("no confirmer: %v", err)
	}
}

// handoff: the human does the action (AppOptions.Handoff) while it is
// WAITING_FOR_USER; the app's own handler does not run.
func testPolicyHandoff(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	id := p.action(msg{"actionId": actionHandoff})
	started := p.actionEvent(uiapwire.TypeActionStarted, id, actionHandoff, uicontrol.ActionWaitingForUser)
	_ = started
	res := p.result(id, actionHandoff, uicontrol.ActionSucceeded)
	if d := jsonEqual(h, msg{"by": "human", "reason": "a human does this"}, res["result"]); d != "" {
		h.Errorf("result (-want +got):\n%s", d)
	}
	// The human declines: CANCELLED.
	app := h.app(func(o *uicontrol.AppOptions) {
		o.Handoff = func(context.Context, *uicontrol.AppSession, *uicontrol.ActionRequest, string) (any, error) {
			return nil, uicontrol.ErrActionCancelled
		}
	})
	a := h.agent(app, actionAgentOptions())
	var started2 *uicontrol.ActionProgress
	res2, err := a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionHandoff}, func(p *uicontrol.ActionProgress) { started2 = p })
	if !errors.Is(err, uicontrol.ErrActionCancelled) || res2.State != uicontrol.ActionCancelled {
		h.Errorf("declined handoff: %+v, %v", res2, err)
	}
	if started2 == nil || started2.State != uicontrol.ActionWaitingForUser || started2.Policy == nil ||
		started2.Policy.Decision != uicontrol.DecisionHandoff || started2.Policy.Reason != "a human does this" {
		h.Errorf("action.started = %+v", started2)
	}
}

// handoff on an app with no human to hand off to: refused.
func testPolicyHandoffNoHuman(h *h) {
	p := h.rawAgent(h.app(func(o *uicontrol.AppOptions) { o.Handoff = nil }))
	p.handshake(actionInitialize())
	id := p.action(msg{"actionId": actionHandoff})
	if pl := p.error(id, uicontrol.CodePermissionDenied); jsonEqual(h, msg{"decision": "handoff"}, pl["details"]) != "" {
		h.Errorf("error = %v", pl)
	}
}
