package uiaptest

import (
	"errors"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func rateLimitCases() []testCase {
	return []testCase{
		{"UIAP_16_RateLimited", testRateLimited},
		{"UIAP_16_RateLimitedSessionMessagesExempt", testRateLimitSessionExempt},
		{"UIAP_16_RateLimitedAgent", testRateLimitedAgent},
	}
}

// limited is the suite app with a bucket of 3 requests refilled at one a
// second.
func (h *h) limitedApp() *uicontrol.App {
	return h.app(func(o *uicontrol.AppOptions) { o.RateLimit = uicontrol.RateLimit{Rate: 1, Burst: 3} })
}

// answers reads n messages and returns them by correlationId (the
// app's handlers answer concurrently, a refusal at once).
func (p *peer) answers(n int) map[any]msg {
	p.h.Helper()
	got := map[any]msg{}
	for range n {
		m := p.next()
		got[m["correlationId"]] = m
	}
	return got
}

func checkRateLimited(h *h, m msg, id, failedType string, wait time.Duration) {
	h.Helper()
	pl := checkError(h, m, id, uicontrol.CodeRateLimited)
	if pl["retryable"] != true || pl["failedType"] != failedType {
		h.Errorf("rate_limited = %v, want retryable and failedType %s", pl, failedType)
	}
	if d := jsonEqual(h, msg{"retryAfterMs": float64(wait.Milliseconds())}, pl["details"]); d != "" {
		h.Errorf("rate_limited details (-want +got):\n%s", d)
	}
}

// §16 and §10: a session over its rate is answered rate_limited,
// retryable, with a retry hint; once the bucket refills, requests pass
// again. Every request outside session.* counts.
func testRateLimited(h *h) {
	p := h.rawAgent(h.limitedApp())
	p.handshake(actionInitialize())
	var ids []string
	for i := range 4 {
		ids = append(ids, p.request(typeEcho, msg{"n": i}))
	}
	got := p.answers(4)
	for _, id := range ids[:3] {
		if m := got[id]; m["type"] != "x.test.echoed" {
			h.Errorf("request %s within the burst: %v", id, m)
		}
	}
	checkRateLimited(h, got[ids[3]], ids[3], typeEcho, time.Second)

	time.Sleep(500 * time.Millisecond)
	id := p.request(uiapwire.TypeCapabilitiesGet, nil)
	checkRateLimited(h, p.next(), id, uiapwire.TypeCapabilitiesGet, 500*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	id = p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
	id = p.action(msg{"actionId": actionEcho})
	checkRateLimited(h, p.next(), id, uiapwire.TypeActionRequest, time.Second)
	// A refused request does not take a token: after a second, one passes.
	time.Sleep(time.Second)
	id = p.action(msg{"actionId": actionEcho})
	p.actionEvent(uiapwire.TypeActionStarted, id, actionEcho, uicontrol.ActionExecuting)
	p.actionEvent(uiapwire.TypeActionProgress, id, actionEcho, uicontrol.ActionExecuting)
	p.result(id, actionEcho, uicontrol.ActionSucceeded)
	// Unknown types count too (they cost the app an answer).
	id = p.request("x.nope.do", nil)
	checkRateLimited(h, p.next(), id, "x.nope.do", time.Second)
}

// Session messages are never limited: a throttled peer can still ping,
// interrupt, resume and terminate. Nor is action.cancel: it can still
// stop what it started.
func testRateLimitSessionExempt(h *h) {
	p := h.rawAgent(h.limitedApp())
	pl := p.handshake(actionInitialize())
	wait := p.action(msg{"actionId": actionWait})
	p.actionEvent(uiapwire.TypeActionStarted, wait, actionWait, uicontrol.ActionExecuting)
	p.actionEvent(uiapwire.TypeActionProgress, wait, actionWait, uicontrol.ActionExecuting)
	p.request(typeEcho, nil)
	p.request(typeEcho, nil)
	p.answers(2)
	id := p.request(typeEcho, nil)
	checkRateLimited(h, p.next(), id, typeEcho, time.Second)
	c := p.request(uiapwire.TypeActionCancel, msg{"requestId": wait})
	p.response(c, uiapwire.TypeActionCancelled)
	p.result(wait, actionWait, uicontrol.ActionCancelled)
	for range 5 {
		id := p.request(uiapwire.TypePing, msg{"nonce": "n"})
		p.response(id, uiapwire.TypePong)
	}
	id = p.request(uiapwire.TypeInterrupt, nil)
	p.response(id, uiapwire.TypeInterrupted)
	id = p.request(uiapwire.TypeResume, msg{"sessionId": pl["sessionId"], "resumeToken": pl["resumeToken"], "lastSeq": 2})
	p.response(id, uiapwire.TypeResumed)
	id = p.request(typeEcho, nil)
	checkRateLimited(h, p.next(), id, typeEcho, time.Second)
	id = p.request(uiapwire.TypeTerminate, nil)
	p.response(id, uiapwire.TypeTerminated)
}

// The Agent gets rate_limited as an *Error that is retryable, and the
// hint through RetryAfter; the limit is per session.
func testRateLimitedAgent(h *h) {
	app := h.limitedApp()
	a := h.agent(app, nil)
	for range 3 {
		if _, err := a.Call(h.ctx(), &uicontrol.Request{Type: typeEcho}); err != nil {
			h.Fatal(err)
		}
	}
	_, err := a.Call(h.ctx(), &uicontrol.Request{Type: typeEcho})
	var ue *uicontrol.Error
	if !errors.Is(err, uicontrol.CodeRateLimited) || !errors.As(err, &ue) || !ue.Retryable {
		h.Fatalf("over the limit: %v", err)
	}
	wait, ok := uicontrol.RetryAfter(err)
	if !ok || wait != time.Second {
		h.Errorf("RetryAfter = %v, %v", wait, ok)
	}
	if _, ok := uicontrol.RetryAfter(errors.New("other")); ok {
		h.Errorf("RetryAfter of another error")
	}
	// Another session has its own bucket.
	b := h.agent(app, nil)
	if _, err := b.Call(h.ctx(), &uicontrol.Request{Type: typeEcho}); err != nil {
		h.Errorf("another session: %v", err)
	}
	time.Sleep(wait)
	if _, err := a.Call(h.ctx(), &uicontrol.Request{Type: typeEcho}); err != nil {
		h.Errorf("after the hint: %v", err)
	}
}
