package uiaptest

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

// The suite app's actions (Action Runtime, negotiated as uiap.action).
const (
	extAction     = uicontrol.ExtensionAction
	actionEcho    = "test.echo"    // low: reports progress 0.5 "halfway", returns its args
	actionCount   = "test.count"   // medium, not idempotent: returns {"count": n}, n counting its runs
	actionWait    = "test.wait"    // low: reports "waiting", then runs until cancelled or timed out
	actionFail    = "test.fail"    // low: fails with the code in args.code, or with an internal error
	actionPay     = "test.pay"     // high: the default policy asks for confirmation
	actionDeny    = "test.deny"    // low: the suite's policy denies it
	actionHandoff = "test.handoff" // low: the suite's policy hands it to the human
)

// secretText is in the internal error test.fail returns: it must never
// reach the peer.
const secretText = "secret internal detail"

func registerActions(app *uicontrol.App) {
	type progressFunc = func(uicontrol.ActionProgress)
	app.HandleAction(actionEcho, uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress progressFunc) (any, error) {
		progress(uicontrol.ActionProgress{Progress: 0.5, Message: "halfway"})
		return req.Args, nil
	})
	var runs atomic.Int64
	app.HandleAction(actionCount, uicontrol.RiskMedium, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress progressFunc) (any, error) {
		return map[string]any{"count": runs.Add(1)}, nil
	})
	app.HandleAction(actionWait, uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress progressFunc) (any, error) {
		progress(uicontrol.ActionProgress{Message: "waiting"})
		<-ctx.Done()
		return nil, ctx.Err()
	})
	app.HandleAction(actionFail, uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress progressFunc) (any, error) {
		var args struct{ Code uicontrol.Code }
		_ = req.DecodeArgs(&args)
		if args.Code == "" {
			return nil, errors.New(secretText)
		}
		return nil, uicontrol.NewError(args.Code, "failed as asked")
	})
	app.HandleAction(actionPay, uicontrol.RiskHigh, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress progressFunc) (any, error) {
		return map[string]any{"paid": true}, nil
	})
	never := func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress progressFunc) (any, error) {
		panic("uiaptest: an action the policy refuses or hands off was run")
	}
	app.HandleAction(actionDeny, uicontrol.RiskLow, never)
	app.HandleAction(actionHandoff, uicontrol.RiskLow, never)
}

func suitePolicy(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, risk uicontrol.Risk) uicontrol.PolicyDecision {
	switch req.ActionID {
	case actionDeny:
		return uicontrol.PolicyDecision{Decision: uicontrol.DecisionDeny, Reason: "denied by the suite's policy"}
	case actionHandoff:
		return uicontrol.PolicyDecision{Decision: uicontrol.DecisionHandoff, Reason: "a human does this"}
	}
	return uicontrol.DefaultPolicy(ctx, s, req, risk)
}

// suiteHandoff stands for the human: they do the action at once.
func suiteHandoff(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, reason string) (any, error) {
	return map[string]any{"by": "human", "reason": reason}, nil
}

// actionInitialize offers what initialize offers and the Action Runtime.
func actionInitialize() msg {
	m := initialize()
	m["supportedExtensions"] = append(m["supportedExtensions"].([]any), msg{"id": extAction, "versions": []any{"0.1"}})
	return m
}

// actionAgentOptions makes a uicontrol.Agent offer the Action Runtime and
// the policy extension.
func actionAgentOptions() *uicontrol.AgentOptions {
	return &uicontrol.AgentOptions{Extensions: []uicontrol.ExtensionOffer{
		{ID: extAction, Versions: []string{"0.1"}}, {ID: extPolicy, Versions: []string{"0.1"}}}}
}

// action sends an action.request (requiring the extension, §12 rule 3)
// and returns its id.
func (p *peer) action(payload msg) string {
	p.h.Helper()
	m := p.msg("request", uiapwire.TypeActionRequest, payload)
	m["requires"] = []any{extAction}
	p.send(m)
	return m["id"].(string)
}

// event expects an event of type typ and returns the message.
func (p *peer) event(typ string) msg {
	p.h.Helper()
	m := p.next()
	if m["kind"] != "event" || m["type"] != typ {
		p.h.Fatalf("want event %s, got %v", typ, m)
	}
	if seq, _ := m["seq"].(float64); seq < 1 {
		p.h.Errorf("event %s without seq: %v", typ, m)
	}
	return m
}

// actionEvent expects action.started or action.progress about request id
// in the given state, and returns its payload.
func (p *peer) actionEvent(typ, id, actionID string, state uicontrol.ActionState) msg {
	p.h.Helper()
	pl := p.event(typ)["payload"].(msg)
	if pl["requestId"] != id || pl["actionId"] != actionID || pl["state"] != string(state) {
		p.h.Fatalf("%s = %v, want requestId %s, actionId %s, state %s", typ, pl, id, actionID, state)
	}
	return pl
}

// result expects the action.result answering id in the given state and
// returns its payload.
func (p *peer) result(id, actionID string, state uicontrol.ActionState) msg {
	p.h.Helper()
	pl := p.response(id, uiapwire.TypeActionResult)
	checkResult(p.h, pl, id, actionID, state)
	return pl
}

func checkResult(h *h, pl msg, id, actionID string, state uicontrol.ActionState) {
	h.Helper()
	if pl["requestId"] != id || pl["actionId"] != actionID || pl["state"] != string(state) {
		h.Fatalf("action.result = %v, want requestId %s, actionId %s, state %s", pl, id, actionID, state)
	}
	e, hasErr := pl["error"].(msg)
	if state == uicontrol.ActionFailed {
		if !hasErr {
			h.Fatalf("FAILED without error: %v", pl)
		}
		if _, ok := e["code"].(string); !ok {
			h.Errorf("error without code: %v", e)
		}
		if _, ok := e["message"].(string); !ok {
			h.Errorf("error without message: %v", e)
		}
	} else if hasErr {
		h.Errorf("%s with error: %v", state, pl)
	}
}

// respond answers the request req.
func (p *peer) respond(req msg, typ string, payload msg) {
	p.h.Helper()
	m := p.msg("response", typ, payload)
	m["correlationId"] = req["id"]
	p.send(m)
}

func actionCases() []testCase {
	return []testCase{
		{"UIAP_Action_5_StartedProgressResult", testActionLifecycle},
		{"UIAP_Action_5_RequestRefused", testActionRefused},
		{"UIAP_Action_12_ExtensionNotNegotiated", testActionNotNegotiated},
		{"UIAP_Action_3_IdempotencyKeyDedupes", testIdempotencyKey},
		{"UIAP_Action_3_IdempotencyKeyWhileRunning", testIdempotencyKeyRunning},
		{"UIAP_Action_5_Cancel", testActionCancel},
		{"UIAP_Action_5_Timeout", testActionTimeout},
		{"UIAP_Action_4_Failed", testActionFailed},
		{"UIAP_Action_5_AgentCallAction", testAgentCallAction},
		{"UIAP_Action_5_AgentCancel", testAgentCancel},
		{"UIAP_Action_3_AgentRetriesOnlyWithKey", testAgentRetryWithKey},
	}
}

// An accepted request: action.started, the action's progress, then the
// action.result answering the request.
func testActionLifecycle(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	args := msg{"sku": "A-1", "qty": 2.0}
	id := p.action(msg{"actionId": actionEcho, "args": args, "target": msg{"ref": msg{"stableId": "cart.add"}, "expectedRole": "button"},
		"preferredExecutionModes": []any{"appAction"}, "metadata": msg{"x": 1.0}})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionEcho, uicontrol.ActionExecuting)
	pl := p.actionEvent(uiapwire.TypeActionProgress, id, actionEcho, uicontrol.ActionExecuting)
	if pl["progress"] != 0.5 || pl["message"] != "halfway" {
		h.Errorf("progress = %v", pl)
	}
	res := p.result(id, actionEcho, uicontrol.ActionSucceeded)
	if d := jsonEqual(h, args, res["result"]); d != "" {
		h.Errorf("result (-want +got):\n%s", d)
	}
	if _, ok := res["deduplicated"]; ok {
		h.Errorf("first result marked deduplicated: %v", res)
	}
	// Unknown members of the request are ignored (§4.1 rule 6).
	id = p.action(msg{"actionId": actionEcho, "x.vendor": true, "timeoutMs": 60000.0})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionEcho, uicontrol.ActionExecuting)
	p.actionEvent(uiapwire.TypeActionProgress, id, actionEcho, uicontrol.ActionExecuting)
	p.result(id, actionEcho, uicontrol.ActionSucceeded)
}

// A request that cannot be accepted is answered by an error, before any
// action.started.
func testActionRefused(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	for name, payload := range map[string]msg{
		"no actionId":            {"args": msg{}},
		"empty actionId":         {"actionId": ""},
		"actionId not a string":  {"actionId": 1},
		"args not an object":     {"actionId": actionEcho, "args": []any{1}},
		"target not an object":   {"actionId": actionEcho, "target": "button"},
		"expectedRole a number":  {"actionId": actionEcho, "target": msg{"expectedRole": 1}},
		"timeoutMs negative":     {"actionId": actionEcho, "timeoutMs": -1},
		"timeoutMs fraction":     {"actionId": actionEcho, "timeoutMs": 1.5},
		"timeoutMs a string":     {"actionId": actionEcho, "timeoutMs": "1000"},
		"idempotencyKey empty":   {"actionId": actionEcho, "idempotencyKey": ""},
		"idempotencyKey number":  {"actionId": actionEcho, "idempotencyKey": 7},
		"modes not strings":      {"actionId": actionEcho, "preferredExecutionModes": []any{1}},
		"verification not obj":   {"actionId": actionEcho, "verification": true},
		"idempotencyKey too big": {"actionId": actionEcho, "idempotencyKey": string(make([]byte, 129))},
	} {
		id := p.action(payload)
		if pl := p.error(id, uicontrol.CodeInvalidMessage); pl["failedType"] != uiapwire.TypeActionRequest {
			h.Errorf("%s: failedType %v", name, pl["failedType"])
		}
	}
	id := p.action(msg{"actionId": "test.nope"})
	if pl := p.error(id, uicontrol.CodeCapabilityUnavailable); jsonEqual(h, msg{"actionId": "test.nope"}, pl["details"]) != "" {
		h.Errorf("details = %v", pl["details"])
	}
	id = p.request("action.nope", nil)
	p.error(id, uicontrol.CodeUnknownMessageType)
	// action.* requests get session_not_active outside ACTIVE, like any other.
	iid := p.request(uiapwire.TypeInterrupt, nil)
	p.response(iid, uiapwire.TypeInterrupted)
	id = p.action(msg{"actionId": actionEcho})
	p.error(id, uicontrol.CodeSessionNotActive)
}

// The Action Runtime is an extension (§12): a session that did not
// select it refuses its messages.
func testActionNotNegotiated(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	id := p.request(uiapwire.TypeActionRequest, msg{"actionId": actionEcho})
	if pl := p.error(id, uicontrol.CodeUnsupportedExtension); jsonEqual(h, msg{"extension": extAction}, pl["details"]) != "" {
		h.Errorf("details = %v", pl["details"])
	}
	id = p.action(msg{"actionId": actionEcho}) // with requires
	p.error(id, uicontrol.CodeUnsupportedExtension)
	id = p.request(uiapwire.TypeActionCancel, msg{"requestId": "r"})
	p.error(id, uicontrol.CodeUnsupportedExtension)

	// The Agent refuses locally.
	a := h.agent(h.app(nil), nil)
	if _, err := a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionEcho}, nil); !errors.Is(err, uicontrol.CodeUnsupportedExtension) {
		h.Errorf("CallAction without the extension: %v", err)
	}
	if err := a.CancelAction(h.ctx(), "r", ""); !errors.Is(err, uicontrol.CodeUnsupportedExtension) {
		h.Errorf("CancelAction without the extension: %v", err)
	}
}

// Action Runtime §3: a non-idempotent action is never run twice for one
// idempotency key. A repeat gets the first result, marked deduplicated;
// the same key for a different request is refused.
func testIdempotencyKey(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	count := func(res msg) float64 {
		h.Helper()
		n, _ := res["result"].(msg)["count"].(float64)
		return n
	}
	first := p.action(msg{"actionId": actionCount, "args": msg{"a": 1.0, "b": 2.0}, "idempotencyKey": "k-1"})
	p.actionEvent(uiapwire.TypeActionStarted, first, actionCount, uicontrol.ActionExecuting)
	res := p.result(first, actionCount, uicontrol.ActionSucceeded)
	if count(res) != 1 || res["idempotencyKey"] != "k-1" {
		h.Fatalf("first run: %v", res)
	}
	// The same request, members in another order: the first result, no
	// action.started, no second run.
	again := p.action(msg{"idempotencyKey": "k-1", "args": msg{"b": 2.0, "a": 1.0}, "actionId": actionCount})
	res = p.result(again, actionCount, uicontrol.ActionSucceeded)
	if count(res) != 1 || res["deduplicated"] != true {
		h.Errorf("repeat: %v", res)
	}
	for _, other := range []msg{
		{"actionId": actionCount, "args": msg{"a": 2.0}, "idempotencyKey": "k-1"},
		{"actionId": actionEcho, "args": msg{"a": 1.0, "b": 2.0}, "idempotencyKey": "k-1"},
		{"actionId": actionCount, "args": msg{"a": 1.0, "b": 2.0}, "target": msg{"expectedName": "x"}, "idempotencyKey": "k-1"},
	} {
		id := p.action(other)
		p.error(id, uicontrol.CodeBadRequest)
	}
	// Without a key, or with another, the action runs again.
	id := p.action(msg{"actionId": actionCount, "args": msg{"a": 1.0, "b": 2.0}})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionCount, uicontrol.ActionExecuting)
	if res := p.result(id, actionCount, uicontrol.ActionSucceeded); count(res) != 2 {
		h.Errorf("without a key: %v", res)
	}
	id = p.action(msg{"actionId": actionCount, "args": msg{"a": 1.0, "b": 2.0}, "idempotencyKey": "k-2"})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionCount, uicontrol.ActionExecuting)
	if res := p.result(id, actionCount, uicontrol.ActionSucceeded); count(res) != 3 {
		h.Errorf("another key: %v", res)
	}
	// A refused request does not use its key up.
	id = p.action(msg{"actionId": actionDeny, "idempotencyKey": "k-3"})
	p.error(id, uicontrol.CodePermissionDenied)
	id = p.action(msg{"actionId": actionDeny, "idempotencyKey": "k-3"})
	p.error(id, uicontrol.CodePermissionDenied)
}

// A repeat that arrives while the first request runs waits for its
// outcome instead of starting a second run.
func testIdempotencyKeyRunning(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	first := p.action(msg{"actionId": actionWait, "idempotencyKey": "w"})
	p.actionEvent(uiapwire.TypeActionStarted, first, actionWait, uicontrol.ActionExecuting)
	p.actionEvent(uiapwire.TypeActionProgress, first, actionWait, uicontrol.ActionExecuting)
	again := p.action(msg{"actionId": actionWait, "idempotencyKey": "w"})
	synctest.Wait()
	cancel := p.request(uiapwire.TypeActionCancel, msg{"requestId": first})
	p.response(cancel, uiapwire.TypeActionCancelled)
	got := map[any]msg{}
	for range 2 {
		m := p.next()
		if m["kind"] != "response" || m["type"] != uiapwire.TypeActionResult {
			h.Fatalf("want two action.result, got %v", m)
		}
		got[m["correlationId"]] = m["payload"].(msg)
	}
	checkResult(h, got[first], first, actionWait, uicontrol.ActionCancelled)
	checkResult(h, got[again], again, actionWait, uicontrol.ActionCancelled)
	if got[again]["deduplicated"] != true {
		h.Errorf("repeat not marked deduplicated: %v", got[again])
	}
}

// action.cancel: answered by action.cancelled at once; the action's
// action.result, CANCELLED, follows. Only a running action can be
// cancelled.
func testActionCancel(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	id := p.action(msg{"actionId": actionWait})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionWait, uicontrol.ActionExecuting)
	if pl := p.actionEvent(uiapwire.TypeActionProgress, id, actionWait, uicontrol.ActionExecuting); pl["message"] != "waiting" {
		h.Errorf("progress = %v", pl)
	}
	c := p.request(uiapwire.TypeActionCancel, msg{"requestId": id, "reason": "changed my mind"})
	if pl := p.response(c, uiapwire.TypeActionCancelled); pl["requestId"] != id || pl["state"] != string(uicontrol.ActionExecuting) {
		h.Errorf("action.cancelled = %v", pl)
	}
	p.result(id, actionWait, uicontrol.ActionCancelled)
	c = p.request(uiapwire.TypeActionCancel, msg{"requestId": id})
	p.error(c, uicontrol.CodeStateConflict)
	c = p.request(uiapwire.TypeActionCancel, msg{"requestId": "never-sent"})
	p.error(c, uicontrol.CodeStateConflict)
	for _, bad := range []msg{{}, {"requestId": ""}, {"requestId": 1}} {
		c = p.request(uiapwire.TypeActionCancel, bad)
		p.error(c, uicontrol.CodeInvalidMessage)
	}
}

// timeoutMs bounds the action: when it passes the action is stopped and
// FAILED with timeout, which is not retryable (it may have taken effect).
func testActionTimeout(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	start := time.Now()
	id := p.action(msg{"actionId": actionWait, "timeoutMs": 1500})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionWait, uicontrol.ActionExecuting)
	p.actionEvent(uiapwire.TypeActionProgress, id, actionWait, uicontrol.ActionExecuting)
	res := p.result(id, actionWait, uicontrol.ActionFailed)
	if took := time.Since(start); took != 1500*time.Millisecond {
		h.Errorf("timed out after %v, want 1.5s", took)
	}
	e := res["error"].(msg)
	if e["code"] != string(uicontrol.CodeTimeout) || e["retryable"] == true {
		h.Errorf("error = %v", e)
	}
}

// A failing action ends FAILED with its error; internal errors keep
// their text local.
func testActionFailed(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(actionInitialize())
	id := p.action(msg{"actionId": actionFail, "args": msg{"code": "x.test.out_of_stock"}})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionFail, uicontrol.ActionExecuting)
	res := p.result(id, actionFail, uicontrol.ActionFailed)
	if e := res["error"].(msg); e["code"] != "x.test.out_of_stock" || e["message"] != "failed as asked" {
		h.Errorf("error = %v", e)
	}
	id = p.action(msg{"actionId": actionFail})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionFail, uicontrol.ActionExecuting)
	res = p.result(id, actionFail, uicontrol.ActionFailed)
	if e := res["error"].(msg); e["code"] != string(uicontrol.CodeInternalError) || e["message"] != "internal error" {
		h.Errorf("internal error = %v", e)
	}
}

// The Agent's CallAction: the result, progress in order, errors as
// *Error.
func testAgentCallAction(h *h) {
	a := h.agent(h.app(nil), actionAgentOptions())
	var seen []*uicontrol.ActionProgress
	res, err := a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionEcho, Args: map[string]any{"sku": "A-1"}},
		func(p *uicontrol.ActionProgress) { seen = append(seen, p) })
	if err != nil || res.State != uicontrol.ActionSucceeded || string(res.Result) != `{"sku":"A-1"}` {
		h.Fatalf("CallAction = %+v, %v", res, err)
	}
	if len(seen) != 2 || !seen[0].Started || seen[0].State != uicontrol.ActionExecuting || seen[0].RequestID != res.RequestID ||
		seen[1].Started || seen[1].Progress != 0.5 || seen[1].Message != "halfway" {
		h.Errorf("progress = %+v", seen)
	}
	if seen[0].Policy == nil || seen[0].Policy.Decision != uicontrol.DecisionAllow {
		h.Errorf("action.started carries policy %+v, want allow", seen[0].Policy)
	}
	res, err = a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionFail, Args: map[string]any{"code": "x.test.gone"}}, nil)
	var ue *uicontrol.Error
	if !errors.As(err, &ue) || ue.Code != "x.test.gone" || res == nil || res.State != uicontrol.ActionFailed {
		h.Errorf("failing action: %+v, %v", res, err)
	}
	_, err = a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: "test.nope"}, nil)
	if !errors.Is(err, uicontrol.CodeCapabilityUnavailable) {
		h.Errorf("unknown action: %v", err)
	}
	_, err = a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionEcho, Args: []int{1}}, nil)
	if !errors.Is(err, uicontrol.CodeInvalidMessage) {
		h.Errorf("args not an object: %v", err)
	}
	res, err = a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionWait, Timeout: 2 * time.Second}, nil)
	if !errors.Is(err, uicontrol.CodeTimeout) || res.State != uicontrol.ActionFailed {
		h.Errorf("timed out action: %+v, %v", res, err)
	}
}

// Cancelling: CancelAction with the request id from the progress, and a
// context that ends, both stop the app's action.
func testAgentCancel(h *h) {
	a := h.agent(h.app(nil), actionAgentOptions())
	started := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		res, err := a.CallAction(h.ctx(), &uicontrol.ActionRequest{ActionID: actionWait}, func(p *uicontrol.ActionProgress) {
			if p.Started {
				started <- p.RequestID
			}
		})
		if err == nil || res == nil || res.State != uicontrol.ActionCancelled {
			h.Errorf("cancelled CallAction = %+v", res)
		}
		done <- err
	}()
	requestID := <-started
	if err := a.CancelAction(h.ctx(), requestID, "test"); err != nil {
		h.Fatalf("CancelAction: %v", err)
	}
	if err := <-done; !errors.Is(err, uicontrol.ErrActionCancelled) {
		h.Errorf("CallAction after CancelAction: %v", err)
	}
	if err := a.CancelAction(h.ctx(), requestID, "again"); !errors.Is(err, uicontrol.CodeStateConflict) {
		h.Errorf("cancelling a finished action: %v", err)
	}

	ctx, cancel := context.WithCancel(h.ctx())
	_, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: actionWait}, func(p *uicontrol.ActionProgress) {
		requestID = p.RequestID
		if !p.Started {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		h.Errorf("CallAction whose context ended: %v", err)
	}
	synctest.Wait() // the action.cancel sent in the background is answered, the action stops
	if err := a.CancelAction(h.ctx(), requestID, ""); !errors.Is(err, uicontrol.CodeStateConflict) {
		h.Errorf("the action still runs after its caller gave up: %v", err)
	}
}

// After a transport loss the outcome of a request in flight is unknown:
// CallAction fails and does not resend it; repeating it with the same
// idempotency key after the resume gets the outcome of the one run.
func testAgentRetryWithKey(h *h) {
	app := h.app(nil)
	appEnd, agentEnd := h.newPair(h.T)
	go func() { _ = app.Serve(context.Background(), appEnd) }()
	lossy := &loseAfterRequest{Transport: agentEnd}
	a, err := uicontrol.Connect(h.ctx(), lossy, actionAgentOptions())
	if err != nil {
		h.Fatal(err)
	}
	h.Cleanup(func() { _ = a.Close() })
	req := &uicontrol.ActionRequest{ActionID: actionCount, IdempotencyKey: "once"}
	lossy.armed.Store(true)
	if res, err := a.CallAction(h.ctx(), req, nil); !errors.Is(err, uicontrol.ErrClosed) {
		h.Fatalf("CallAction over a lost transport = %+v, %v", res, err)
	}
	synctest.Wait()
	if err := a.Resume(h.ctx(), h.connect(app)); err != nil {
		h.Fatalf("Resume: %v", err)
	}
	res, err := a.CallAction(h.ctx(), req, nil)
	if err != nil || res.State != uicontrol.ActionSucceeded {
		h.Fatalf("repeat with the key: %+v, %v", res, err)
	}
	var r struct{ Count int }
	if json.Unmarshal(res.Result, &r) != nil || r.Count != 1 {
		h.Errorf("the action ran again: %s", res.Result)
	}
	if !res.Deduplicated {
		h.Errorf("repeat not marked deduplicated: %+v", res)
	}
}

// loseAfterRequest is a Transport that, once armed, loses the connection
// when the answer to an action.request arrives: the app ran the action,
// the agent never learns how it went.
type loseAfterRequest struct {
	uicontrol.Transport
	armed atomic.Bool
}

func (t *loseAfterRequest) Receive(ctx context.Context) ([]byte, error) {
	msg, err := t.Transport.Receive(ctx)
	if err != nil || !t.armed.Load() {
		return msg, err
	}
	if e, derr := uicontrol.DecodeEnvelope(msg); derr == nil && e.Type == uiapwire.TypeActionResult {
		_ = t.Transport.Close()
		return nil, uicontrol.ErrClosed
	}
	return msg, nil
}
