package uiaptest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func resumeCases() []testCase {
	return []testCase{
		{"UIAP_8_2_ResumeAfterTransportLoss", testResumeAfterLoss},
		{"UIAP_8_2_ReplayAfterSeq", testReplayAfterSeq},
		{"UIAP_8_2_ResumeTokenExpired", testResumeExpired},
		{"UIAP_8_2_ResumeTokenReused", testResumeTokenReused},
		{"UIAP_8_2_ResumeTokenInvalid", testResumeInvalid},
		{"UIAP_16_ResumeTokensRandom", testResumeTokensRandom},
		{"UIAP_8_2_ResumeReplacesConnection", testResumeTakeover},
		{"UIAP_8_2_ResumeImpossibleAfterReplayLoss", testReplayLoss},
		{"UIAP_8_2_StuckConnectionEventsReplayed", testStuckConnection},
	}
}

// lose simulates a transport loss and waits until both sides noticed.
func lose(h *h, end interface{ Close() error }) {
	_ = end.Close()
	synctest.Wait()
}

// §8.2 with a real agent: after a transport loss both sides are
// INTERRUPTED; Resume over a new connection returns to ACTIVE and
// delivers the events sent meanwhile, once each, in order.
func testResumeAfterLoss(h *h) {
	app := h.app(nil)
	var mu sync.Mutex
	var got []string
	end := h.connect(app)
	a, err := uicontrol.Connect(h.ctx(), end, &uicontrol.AgentOptions{OnEvent: func(e *uicontrol.Envelope) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Type))
	}})
	if err != nil {
		h.Fatal(err)
	}
	h.Cleanup(func() { _ = a.Close() })
	s := app.Session(a.Session().ID)
	if err := s.Emit(h.ctx(), "x.test.one", nil); err != nil {
		h.Fatal(err)
	}
	synctest.Wait()
	lose(h, end)
	if a.State() != uicontrol.StateInterrupted || s.State() != uicontrol.StateInterrupted {
		h.Fatalf("after the loss: agent %v, app %v", a.State(), s.State())
	}
	if err := s.Emit(h.ctx(), "x.test.two", nil); err != nil {
		h.Fatal(err)
	}
	if _, err := app.SetCapabilities(h.ctx(), mustDoc(h, `{"actions":[{"id":"only"}]}`), "feature_flag"); err != nil {
		h.Fatal(err)
	}
	if err := s.Emit(h.ctx(), "x.test.three", nil); err != nil {
		h.Fatal(err)
	}
	if err := a.Resume(h.ctx(), h.connect(app)); err != nil {
		h.Fatalf("Resume: %v", err)
	}
	synctest.Wait()
	if a.State() != uicontrol.StateActive || s.State() != uicontrol.StateActive {
		h.Fatalf("after resume: agent %v, app %v", a.State(), s.State())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"1:x.test.one", "2:x.test.two", "3:capabilities.changed", "4:x.test.three"}
	if d := jsonEqual(h, want, got); d != "" {
		h.Errorf("events (-want +got):\n%s", d)
	}
	if c := a.Capabilities(); c == nil || c.Reason != "feature_flag" || string(c.Capabilities.Actions) != `[{"id":"only"}]` {
		h.Errorf("capabilities after the replay: %+v", c)
	}
}

// Events after lastSeq are replayed (new ids, same seq and ts); earlier
// ones are not.
func testReplayAfterSeq(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	s := app.Session(sid)
	var sent []msg
	for i := range 3 {
		if err := s.Emit(h.ctx(), "x.test.tick", msg{"i": i}); err != nil {
			h.Fatal(err)
		}
		sent = append(sent, p.next())
	}
	lose(h, p.tr)
	q := h.rawAgent(app)
	q.n = 100 // new ids: they must be unique in the session
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"], "lastSeq": 1})
	pl := q.response(id, uiapwire.TypeResumed)
	if pl["sessionId"] != sid {
		h.Errorf("resumed = %v", pl)
	}
	for _, want := range sent[1:] {
		got := q.next()
		if got["seq"] != want["seq"] || got["ts"] != want["ts"] || got["id"] == want["id"] || got["type"] != "x.test.tick" {
			h.Errorf("replayed %v, want a copy of %v with a new id", got, want)
		}
		if d := jsonEqual(h, want["payload"], got["payload"]); d != "" {
			h.Errorf("replayed payload (-want +got):\n%s", d)
		}
	}
	q.silence()
	if err := s.Emit(h.ctx(), "x.test.tick", msg{"i": 3}); err != nil {
		h.Fatal(err)
	}
	if got := q.next(); got["seq"] != 4.0 {
		h.Errorf("next event after the replay: %v", got)
	}
}

// §8.2, §16: resume tokens are short-lived; after the resume window the
// session is gone (unknown_session).
func testResumeExpired(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	lose(h, p.tr)
	time.Sleep(resumeAfter - time.Second)
	if s := app.Session(sid); s == nil || s.State() != uicontrol.StateInterrupted {
		h.Fatalf("session before the window ends: %v", s)
	}
	time.Sleep(2 * time.Second)
	if s := app.Session(sid); s != nil {
		h.Fatalf("session after the window: %v", s.State())
	}
	q := h.rawAgent(app)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
	q.error(id, uicontrol.CodeUnknownSession)

	// The agent side: an expired session terminates the agent.
	end := h.connect(app)
	a, err := uicontrol.Connect(h.ctx(), end, nil)
	if err != nil {
		h.Fatal(err)
	}
	h.Cleanup(func() { _ = a.Close() })
	lose(h, end)
	time.Sleep(resumeAfter + time.Second)
	if err := a.Resume(h.ctx(), h.connect(app)); !errors.Is(err, uicontrol.CodeUnknownSession) {
		h.Errorf("Resume after the window: %v", err)
	}
	if a.State() != uicontrol.StateTerminated {
		h.Errorf("agent state = %v", a.State())
	}
}

// §8.2: a resume token is single-use.
func testResumeTokenReused(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid, t1 := init["sessionId"].(string), init["resumeToken"]
	lose(h, p.tr)
	q := h.rawAgent(app)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": t1})
	t2 := q.response(id, uiapwire.TypeResumed)["resumeToken"]
	lose(h, q.tr)
	r := h.rawAgent(app)
	r.n = 200
	id = r.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": t1})
	r.error(id, uicontrol.CodePermissionDenied)
	id = r.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": t2})
	r.response(id, uiapwire.TypeResumed)
	r.sessionID = sid
	id = r.request(uiapwire.TypeCapabilitiesGet, nil)
	r.response(id, uiapwire.TypeCapabilitiesList)
}

// §8.2: an invalid token is unknown_session or permission_denied.
func testResumeInvalid(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	lose(h, p.tr)
	q := h.rawAgent(app)
	q.n = 100
	for _, tc := range []struct {
		payload msg
		code    uicontrol.Code
	}{
		{msg{"sessionId": sid, "resumeToken": "guess"}, uicontrol.CodePermissionDenied},
		{msg{"sessionId": sid, "resumeToken": init["resumeToken"].(string) + "0"}, uicontrol.CodePermissionDenied},
		{msg{"sessionId": "no-such-session", "resumeToken": init["resumeToken"]}, uicontrol.CodeUnknownSession},
		{msg{"sessionId": sid}, uicontrol.CodeInvalidMessage},
		{msg{"resumeToken": init["resumeToken"]}, uicontrol.CodeInvalidMessage},
		{msg{"sessionId": sid, "resumeToken": init["resumeToken"], "lastSeq": 5}, uicontrol.CodeBadRequest},
	} {
		id := q.request(uiapwire.TypeResume, tc.payload)
		q.error(id, tc.code)
	}
	// Only session messages before the resume.
	id := q.request(uiapwire.TypeCapabilitiesGet, nil)
	q.error(id, uicontrol.CodeSessionNotActive)
	// A failed attempt does not use the token up.
	m := q.msg("request", uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
	m["uiap"] = "0.2"
	q.send(m)
	q.error(m["id"].(string), uicontrol.CodeUnsupportedVersion)
	id = q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
	q.response(id, uiapwire.TypeResumed)
}

// §16: tokens are random and distinct.
func testResumeTokensRandom(h *h) {
	app := h.app(nil)
	seen := map[string]bool{}
	for range 5 {
		tok, _ := h.rawAgent(app).handshake(initialize())["resumeToken"].(string)
		if len(tok) < 32 || seen[tok] {
			h.Errorf("resumeToken %q: too short or repeated", tok)
		}
		seen[tok] = true
	}
}

// A resume over a new connection while the old one still looks alive
// (a half-open connection) replaces it.
func testResumeTakeover(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	q := h.rawAgent(app)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
	q.response(id, uiapwire.TypeResumed)
	p.closed()
	q.sessionID = sid
	id = q.request(uiapwire.TypeCapabilitiesGet, nil)
	q.response(id, uiapwire.TypeCapabilitiesList)
	if s := app.Session(sid); s.State() != uicontrol.StateActive {
		h.Errorf("state = %v", s.State())
	}
}

// When events the agent missed are no longer kept, the session cannot be
// resumed faithfully: unknown_session, and it ends.
func testReplayLoss(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) { o.ReplayLimit = 2 })
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	lose(h, p.tr)
	s := app.Session(sid)
	for range 3 {
		if err := s.Emit(h.ctx(), "x.test.tick", nil); err != nil {
			h.Fatal(err)
		}
	}
	q := h.rawAgent(app)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
	q.error(id, uicontrol.CodeUnknownSession)
	<-s.Done()
}

// An event the transport does not take in time ends the connection; the
// agent gets it, and every later one, by replay.
func testStuckConnection(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	s := app.Session(sid)
	const n = 200
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.Emit(ctx, "x.test.tick", msg{"i": i})
		cancel()
		if err != nil {
			h.Fatalf("Emit %d: %v", i, err)
		}
	}
	synctest.Wait()
	if st := s.State(); st != uicontrol.StateInterrupted {
		h.Fatalf("state after a stuck write: %v", st)
	}
	var last float64
	for _, m := range p.closed() {
		last = m["seq"].(float64)
	}
	q := h.rawAgent(app)
	q.n = 1000
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"], "lastSeq": last})
	q.response(id, uiapwire.TypeResumed)
	for want := last + 1; want <= n; want++ {
		if m := q.next(); m["seq"] != want || m["payload"].(msg)["i"] != want-1 {
			h.Fatalf("replayed %v, want seq %v", m, want)
		}
	}
	q.silence()
}
