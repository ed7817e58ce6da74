package uiaptest

import (
	"context"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

// Every request gets exactly one answer: §5 ("request: expects exactly
// one response or error") and §10 rule 1 ("Every request MUST be
// followed by either a response or an error"), in every state a request
// can arrive in. The cases below send every kind of request in every
// state a peer can reach — NEW, ACTIVE, INTERRUPTED (by either side),
// TERMINATING, and after TERMINATED over a new connection — on both
// sides, one at a time, and check that each gets one answer of the
// expected type or code and that nothing follows. A peer that stays
// silent fails them after a minute of (bubble) time.

func replyCases() []testCase {
	return []testCase{
		{"UIAP_8_2_ResumeTokenInvalidSameConnection", testResumeInvalidSameConnection},
		{"UIAP_8_2_ResumeImpossibleSameConnection", testReplayLossSameConnection},
		{"UIAP_10_OneReplyPerRequestApp", testOneReplyApp},
		{"UIAP_10_OneReplyPerRequestAgent", testOneReplyAgent},
	}
}

// want is the answer a request should get: a response of type typ, or
// else an error with code.
type want struct {
	typ  string
	code uicontrol.Code
}

func answered(typ string) *want         { return &want{typ: typ} }
func refused(code uicontrol.Code) *want { return &want{code: code} }

// ask sends the request m and returns its answer: the next response or
// error, skipping events (whose highest seq it records). An answer to
// any other message fails the case — a request answered twice shows up
// here — as does no answer within a minute.
func (p *peer) ask(what string, m msg) msg {
	p.h.Helper()
	p.send(m)
	for {
		r, err := p.receive(timeoutOfAsk)
		if err != nil {
			p.h.Fatalf("%s: no answer to %s %v (%v)", what, m["type"], m["id"], err)
		}
		if r["kind"] == "event" {
			if seq, _ := r["seq"].(float64); seq > p.lastSeq {
				p.lastSeq = seq
			}
			continue
		}
		if r["kind"] == "request" || r["correlationId"] != m["id"] {
			p.h.Fatalf("%s: sent %s %v, got something else than its answer: %v", what, m["type"], m["id"], r)
		}
		return r
	}
}

// expect sends m and checks that its answer is w.
func (p *peer) expect(what string, m msg, w *want) {
	p.h.Helper()
	r := p.ask(what, m)
	if w.typ != "" {
		if r["kind"] != "response" || r["type"] != w.typ {
			p.h.Fatalf("%s: want response %s, got %v", what, w.typ, r)
		}
		return
	}
	pl, _ := r["payload"].(msg)
	if r["kind"] != "error" || pl["code"] != string(w.code) {
		p.h.Fatalf("%s: want error %s, got %v", what, w.code, r)
	}
	checkError(p.h, r, m["id"].(string), w.code)
}

// §8.2, §10 rule 1: an interrupted session resumed over the same
// connection answers every failed attempt — an invalid token is
// unknown_session or permission_denied — and a failed attempt does not
// use the token up.
func testResumeInvalidSameConnection(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid, tok := init["sessionId"].(string), init["resumeToken"].(string)
	id := p.request(uiapwire.TypeInterrupt, nil)
	p.response(id, uiapwire.TypeInterrupted)
	for _, tc := range []struct {
		payload msg
		code    uicontrol.Code
	}{
		{msg{"sessionId": sid, "resumeToken": "guess"}, uicontrol.CodePermissionDenied},
		{msg{"sessionId": sid, "resumeToken": tok + "0"}, uicontrol.CodePermissionDenied},
		{msg{"sessionId": sid, "resumeToken": ""}, uicontrol.CodeInvalidMessage},
		{msg{"sessionId": "no-such-session", "resumeToken": tok}, uicontrol.CodeUnknownSession},
		{msg{"sessionId": sid}, uicontrol.CodeInvalidMessage},
		{msg{"resumeToken": tok}, uicontrol.CodeInvalidMessage},
		{msg{"sessionId": sid, "resumeToken": tok, "lastSeq": 5}, uicontrol.CodeBadRequest},
	} {
		p.expect("session.resume", p.msg("request", uiapwire.TypeResume, tc.payload), refused(tc.code))
	}
	m := p.msg("request", uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": tok})
	m["uiap"] = "0.2"
	p.expect("session.resume of another version", m, refused(uicontrol.CodeUnsupportedVersion))
	if st := app.Session(sid).State(); st != uicontrol.StateInterrupted {
		h.Fatalf("after failed resumes: %v", st)
	}
	id = p.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": tok})
	p.response(id, uiapwire.TypeResumed)
	id = p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
}

// §8.2: a session interrupted on this connection whose missed events
// are no longer kept cannot be resumed: the resume is answered
// unknown_session before the session ends and the connection closes.
func testReplayLossSameConnection(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) { o.ReplayLimit = 2 })
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	id := p.request(uiapwire.TypeInterrupt, nil)
	p.response(id, uiapwire.TypeInterrupted)
	s := app.Session(sid)
	for range 3 {
		if err := s.Emit(h.ctx(), "x.test.tick", nil); err != nil {
			h.Fatal(err)
		}
	}
	p.expect("session.resume", p.msg("request", uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]}),
		refused(uicontrol.CodeUnknownSession))
	if got := p.closed(); len(got) != 0 {
		h.Errorf("after unknown_session: %v", got)
	}
	<-s.Done()
}

// replyRow is one kind of request and the answer it gets in each state
// (nil: not sent in that state).
type replyRow struct {
	name string
	// msg makes the request; sid and token are the session's (empty
	// before the handshake).
	msg func(p *peer, sid, token string) msg
	// The app side's states (testOneReplyApp), or the agent side's with
	// New standing for INITIALIZING (testOneReplyAgent).
	New, Active, Interrupted, Terminating *want
}

// request returns a row's msg sending a request of typ with payload.
func request(typ string, payload msg) func(p *peer, sid, token string) msg {
	if payload == nil {
		payload = msg{}
	}
	return func(p *peer, sid, token string) msg { return p.msg("request", typ, payload) }
}

// broken returns a row's msg sending a ping changed by f.
func broken(f func(m msg)) func(p *peer, sid, token string) msg {
	return func(p *peer, sid, token string) msg {
		m := p.msg("request", uiapwire.TypePing, nil)
		f(m)
		return m
	}
}

// envelopeRows are requests that fail the envelope checks, which come
// before any state: the same answer in every state.
func envelopeRows(from string) []replyRow {
	invalid := refused(uicontrol.CodeInvalidMessage)
	unsupported := refused(uicontrol.CodeUnsupportedVersion)
	pong := answered(uiapwire.TypePong)
	return []replyRow{
		{"a request without ts", broken(func(m msg) { delete(m, "ts") }), invalid, invalid, invalid, invalid},
		{"a request whose payload is not an object", broken(func(m msg) { m["payload"] = []any{} }), invalid, invalid, invalid, invalid},
		{"a request reusing a message id", broken(func(m msg) { m["id"] = from + "-1" }), invalid, invalid, invalid, invalid},
		{"a request requiring an extension not selected", broken(func(m msg) { m["requires"] = []any{"x.unknown.ext"} }),
			refused(uicontrol.CodeUnsupportedExtension), refused(uicontrol.CodeUnsupportedExtension),
			refused(uicontrol.CodeUnsupportedExtension), refused(uicontrol.CodeUnsupportedExtension)},
		{"a request requiring a profile not selected", broken(func(m msg) { m["requires"] = []any{"desktop@0.1"} }),
			refused(uicontrol.CodeUnsupportedProfile), refused(uicontrol.CodeUnsupportedProfile),
			refused(uicontrol.CodeUnsupportedProfile), refused(uicontrol.CodeUnsupportedProfile)},
		// Before the handshake uiap is the initiator's highest version and
		// no session is named: not checked.
		{"a request of another version", broken(func(m msg) { m["uiap"] = "0.2" }), pong, unsupported, unsupported, unsupported},
	}
}

// appRows are the requests an agent may send, with the app's answer in
// each state (docs/spec-notes/uiap.md, "Answers and errors").
func appRows() []replyRow {
	sna := refused(uicontrol.CodeSessionNotActive)
	conflict := refused(uicontrol.CodeStateConflict)
	pong := answered(uiapwire.TypePong)
	unknownType := refused(uicontrol.CodeUnknownMessageType)
	noVersion := initialize()
	noVersion["supportedVersions"] = []any{"9.0"}
	resume := func(payload func(sid, token string) msg) func(p *peer, sid, token string) msg {
		return func(p *peer, sid, token string) msg {
			return p.msg("request", uiapwire.TypeResume, payload(sid, token))
		}
	}
	rows := []replyRow{
		{"session.ping", request(uiapwire.TypePing, msg{"nonce": "n"}), pong, pong, pong, pong},
		{"session.initialize without a common version", request(uiapwire.TypeInitialize, noVersion),
			refused(uicontrol.CodeUnsupportedVersion), conflict, conflict, conflict},
		{"session.resume of an unknown session", resume(func(string, string) msg {
			return msg{"sessionId": "no-such-session", "resumeToken": "guess"}
		}), refused(uicontrol.CodeUnknownSession), conflict, refused(uicontrol.CodeUnknownSession), conflict},
		{"session.resume without a token", resume(func(sid, _ string) msg { return msg{"sessionId": sid + "x"} }),
			refused(uicontrol.CodeInvalidMessage), conflict, refused(uicontrol.CodeInvalidMessage), conflict},
		{"session.resume with a wrong token", resume(func(sid, _ string) msg { return msg{"sessionId": sid, "resumeToken": "guess"} }),
			nil, conflict, refused(uicontrol.CodePermissionDenied), conflict},
		{"session.resume with lastSeq beyond the last event", resume(func(sid, token string) msg {
			return msg{"sessionId": sid, "resumeToken": token, "lastSeq": 99}
		}), nil, conflict, refused(uicontrol.CodeBadRequest), conflict},
		{"session.interrupt", request(uiapwire.TypeInterrupt, nil), sna, nil, conflict, sna},
		{"session.terminate", request(uiapwire.TypeTerminate, nil), sna, nil, nil, nil},
		{"an unknown session.* request", request("session.nothing", nil), sna, unknownType, sna, sna},
		{"capabilities.get", request(uiapwire.TypeCapabilitiesGet, nil), sna, answered(uiapwire.TypeCapabilitiesList), sna, sna},
		{"capabilities.list sent as a request", request(uiapwire.TypeCapabilitiesList, nil), sna, unknownType, sna, sna},
		{"action.request", request(uiapwire.TypeActionRequest, msg{"actionId": actionEcho}),
			sna, answered(uiapwire.TypeActionResult), sna, sna},
		{"action.cancel of no action", request(uiapwire.TypeActionCancel, msg{"requestId": "no-such-request"}), sna, conflict, sna, sna},
		{"an application request", request(typeEcho, msg{"n": 1}), sna, answered("x.test.echoed"), sna, sna},
		{"an application request that fails", request(typeFail, msg{"code": "bad_request"}),
			sna, refused(uicontrol.CodeBadRequest), sna, sna},
		{"an application handler that panics", request(typePanic, nil), sna, refused(uicontrol.CodeInternalError), sna, sna},
		{"an unknown request type", request("x.nope.do", nil), sna, unknownType, sna, sna},
		{"a request naming another session", broken(func(m msg) { m["sessionId"] = "another-session" }),
			pong, refused(uicontrol.CodeUnknownSession), refused(uicontrol.CodeUnknownSession), refused(uicontrol.CodeUnknownSession)},
	}
	return append(rows, envelopeRows("agent")...)
}

// ask sends every row's request for the state that pick selects and
// checks its answer, then that nothing more arrives.
func (p *peer) askAll(state string, rows []replyRow, sid, token string, pick func(r replyRow) *want) {
	p.h.Helper()
	for _, r := range rows {
		if w := pick(r); w != nil {
			p.expect(state+": "+r.name, r.msg(p, sid, token), w)
		}
	}
	p.silence() // no second answer to any of them
}

// §5, §10 rule 1 on the app side: in NEW, ACTIVE, INTERRUPTED (by the
// agent, then by the app), TERMINATING and after TERMINATED every
// request gets exactly one answer.
func testOneReplyApp(h *h) {
	app := h.app(nil)
	rows := appRows()
	p := h.rawAgent(app)
	p.askAll("NEW", rows, "", "", func(r replyRow) *want { return r.New })

	init := p.handshake(actionInitialize())
	sid, token := init["sessionId"].(string), init["resumeToken"].(string)
	active := func(r replyRow) *want { return r.Active }
	interrupted := func(r replyRow) *want { return r.Interrupted }
	p.askAll("ACTIVE", rows, sid, token, active)

	id := p.request(uiapwire.TypeInterrupt, nil)
	p.response(id, uiapwire.TypeInterrupted)
	p.askAll("INTERRUPTED by the agent", rows, sid, token, interrupted)
	resume := func() {
		h.Helper()
		id := p.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": token, "lastSeq": p.lastSeq})
		token = p.response(id, uiapwire.TypeResumed)["resumeToken"].(string)
	}
	resume()
	p.askAll("ACTIVE after a resume", rows, sid, token, active)

	s := app.Session(sid)
	done := make(chan error, 1)
	go func() { done <- s.Interrupt(context.Background(), "user takes over", "user") }()
	req := p.next()
	if req["kind"] != "request" || req["type"] != uiapwire.TypeInterrupt {
		h.Fatalf("want the app's session.interrupt, got %v", req)
	}
	p.respond(req, uiapwire.TypeInterrupted, msg{"status": "interrupted"})
	if err := <-done; err != nil {
		h.Fatalf("Interrupt: %v", err)
	}
	p.askAll("INTERRUPTED by the app", rows, sid, token, interrupted)
	resume()

	go func() { done <- s.Terminate(context.Background(), "policy") }()
	if req := p.next(); req["kind"] != "request" || req["type"] != uiapwire.TypeTerminate {
		h.Fatalf("want the app's session.terminate, got %v", req)
	}
	p.askAll("TERMINATING", rows, sid, token, func(r replyRow) *want { return r.Terminating })
	p.expect("TERMINATING: a crossing session.terminate", p.msg("request", uiapwire.TypeTerminate, nil),
		answered(uiapwire.TypeTerminated))
	if err := <-done; err != nil {
		h.Errorf("Terminate: %v", err)
	}
	if got := p.closed(); len(got) != 0 {
		h.Errorf("after session.terminated: %v", got)
	}

	// TERMINATED: the connection is closed; over a new one the session is
	// unknown.
	q := h.rawAgent(app)
	q.n = 1000
	q.expect("TERMINATED: session.resume", q.msg("request", uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": token}),
		refused(uicontrol.CodeUnknownSession))
	q.expect("TERMINATED: session.ping", q.msg("request", uiapwire.TypePing, nil), answered(uiapwire.TypePong))
	q.silence()
}

// agentRows are the requests an app may send, with the agent's answer
// in each state; New stands for INITIALIZING (the agent sent
// session.initialize, the app has not answered yet).
func agentRows() []replyRow {
	sna := refused(uicontrol.CodeSessionNotActive)
	conflict := refused(uicontrol.CodeStateConflict)
	pong := answered(uiapwire.TypePong)
	unknownType := refused(uicontrol.CodeUnknownMessageType)
	rows := []replyRow{
		{"session.ping", request(uiapwire.TypePing, msg{"nonce": "n"}), pong, pong, pong, pong},
		{"session.initialize", request(uiapwire.TypeInitialize, initialize()), conflict, conflict, conflict, conflict},
		{"session.resume", request(uiapwire.TypeResume, msg{"sessionId": "s-1", "resumeToken": "t"}), conflict, conflict, conflict, conflict},
		{"session.interrupt", request(uiapwire.TypeInterrupt, nil), sna, nil, conflict, sna},
		{"session.terminate", request(uiapwire.TypeTerminate, nil), sna, nil, nil, nil},
		{"an unknown session.* request", request("session.nothing", nil), sna, unknownType, sna, sna},
		{"capabilities.get", request(uiapwire.TypeCapabilitiesGet, nil), sna, unknownType, sna, sna},
		{"action.confirm", request(uiapwire.TypeActionConfirm, msg{"requestId": "r-1", "actionId": actionPay, "risk": "high"}),
			sna, answered(uiapwire.TypeActionConfirmed), sna, sna},
		{"an application request", request("x.app.ask", nil), sna, unknownType, sna, sna},
	}
	return append(rows, envelopeRows("app")...)
}

// §5, §10 rule 1 on the agent side: in INITIALIZING, ACTIVE,
// INTERRUPTED and TERMINATING every request from the app gets exactly
// one answer.
func testOneReplyAgent(h *h) {
	rows := agentRows()
	p, end := h.rawApp()
	type connected struct {
		a   *uicontrol.Agent
		err error
	}
	got := make(chan connected, 1)
	go func() {
		a, err := uicontrol.Connect(h.ctx(), end, actionAgentOptions())
		got <- connected{a, err}
	}()
	init := p.next()
	if init["type"] != uiapwire.TypeInitialize {
		h.Fatalf("want session.initialize, got %v", init)
	}
	p.askAll("INITIALIZING", rows, "", "", func(r replyRow) *want { return r.New })
	p.sessionID = "s-1"
	r := p.msg("response", uiapwire.TypeInitialized, msg{"sessionId": "s-1", "selectedVersion": "0.1", "capabilityDelivery": "none",
		"resumeToken": "t-1", "selectedExtensions": []any{msg{"id": extAction, "version": "0.1"}}})
	r["correlationId"] = init["id"]
	p.send(r)
	c := <-got
	if c.err != nil {
		h.Fatalf("Connect: %v", c.err)
	}
	a := c.a
	h.Cleanup(func() { _ = a.Close() })
	p.askAll("ACTIVE", rows, "s-1", "", func(r replyRow) *want { return r.Active })
	id := p.request(uiapwire.TypeInterrupt, nil)
	p.response(id, uiapwire.TypeInterrupted)
	p.askAll("INTERRUPTED", rows, "s-1", "", func(r replyRow) *want { return r.Interrupted })

	done := make(chan error, 1)
	go func() { done <- a.Terminate(context.Background(), "normal") }()
	if req := p.next(); req["kind"] != "request" || req["type"] != uiapwire.TypeTerminate {
		h.Fatalf("want the agent's session.terminate, got %v", req)
	}
	p.askAll("TERMINATING", rows, "s-1", "", func(r replyRow) *want { return r.Terminating })
	p.expect("TERMINATING: a crossing session.terminate", p.msg("request", uiapwire.TypeTerminate, nil),
		answered(uiapwire.TypeTerminated))
	if err := <-done; err != nil {
		h.Errorf("Terminate: %v", err)
	}
	if got := p.closed(); len(got) != 0 {
		h.Errorf("after session.terminated: %v", got)
	}
}
