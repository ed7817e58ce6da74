package uiaptest

import (
	"errors"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func sessionCases() []testCase {
	return []testCase{
		{"UIAP_7_2_NothingButSessionMessagesBeforeHandshake", testBeforeHandshake},
		{"UIAP_7_2_HandshakeWithSpecExample", testSpecExample},
		{"UIAP_7_1_SecondInitializeIsStateConflict", testSecondInitialize},
		{"UIAP_7_1_FailedHandshakeLeavesSessionNew", testFailedHandshakeRetry},
		{"UIAP_8_3_InterruptOnlySessionMessages", testInterrupt},
		{"UIAP_8_3_AppInterruptsAgent", testAppInterrupts},
		{"UIAP_8_5_TerminateThenSilence", testTerminateThenSilence},
		{"UIAP_8_5_AgentTerminates", testAgentTerminates},
		{"UIAP_8_5_AppTerminates", testAppTerminates},
		{"UIAP_8_5_TerminateWhileInterrupted", testTerminateInterrupted},
		{"UIAP_7_1_FatalTransportErrorTerminates", testFatalTransportError},
		{"UIAP_8_AgentAnswersAppRequests", testAgentAnswers},
	}
}

// §7.2 rule 3: before a successful handshake only session messages are
// processed.
func testBeforeHandshake(h *h) {
	p := h.rawAgent(h.app(nil))
	for _, typ := range []string{uiapwire.TypeCapabilitiesGet, typeEcho, "x.nope.do", uiapwire.TypeTerminate, uiapwire.TypeInterrupt} {
		id := p.request(typ, nil)
		p.error(id, uicontrol.CodeSessionNotActive)
	}
	p.send(p.msg("event", "x.test.happened", nil))
	// A ping is a session message: answered.
	id := p.request(uiapwire.TypePing, msg{"nonce": "early"})
	if pl := p.response(id, uiapwire.TypePong); pl["nonce"] != "early" {
		h.Errorf("pong = %v", pl)
	}
	p.handshake(initialize())
	id = p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
}

// The handshake of the spec's examples (§14.1 → §14.2).
func testSpecExample(h *h) {
	p := h.rawAgent(h.app(nil))
	m := rawJSON(specInitialize).(msg)
	p.send(m)
	got := p.next()
	want := rawJSON(specInitialized).(msg)
	if got["kind"] != "response" || got["type"] != want["type"] || got["correlationId"] != "msg_1" {
		h.Fatalf("reply = %v", got)
	}
	pl := got["payload"].(msg)
	if got["sessionId"] != pl["sessionId"] {
		h.Errorf("sessionId %v in envelope, %v in payload", got["sessionId"], pl["sessionId"])
	}
	wantPl := want["payload"].(msg)
	for _, k := range []string{"selectedVersion", "selectedProfiles", "selectedExtensions", "capabilityDelivery"} {
		if d := jsonEqual(h, wantPl[k], pl[k]); d != "" {
			h.Errorf("%s (-want +got):\n%s", k, d)
		}
	}
	if _, ok := pl["capabilities"]; ok {
		h.Errorf("capabilities present although delivery is deferred")
	}
	if tok, _ := pl["resumeToken"].(string); len(tok) < 32 {
		h.Errorf("resumeToken %q: want at least 128 random bits", tok)
	}
}

// A second session.initialize on an active session is state_conflict.
func testSecondInitialize(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	first := p.handshake(initialize())
	id := p.request(uiapwire.TypeInitialize, initialize())
	p.error(id, uicontrol.CodeStateConflict)
	if s := app.Session(first["sessionId"].(string)); s == nil || s.State() != uicontrol.StateActive {
		h.Fatalf("session after a second initialize: %v", s)
	}
	id = p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
}

// A failed handshake creates no session: the initiator may offer again.
func testFailedHandshakeRetry(h *h) {
	p := h.rawAgent(h.app(nil))
	bad := initialize()
	bad["supportedVersions"] = []any{"9.0"}
	id := p.request(uiapwire.TypeInitialize, bad)
	p.error(id, uicontrol.CodeUnsupportedVersion)
	id = p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.error(id, uicontrol.CodeSessionNotActive)
	p.handshake(initialize())
}

// §8.3: while INTERRUPTED only session messages are processed; resume
// with the token returns to ACTIVE.
func testInterrupt(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	id := p.request(uiapwire.TypeInterrupt, msg{"reason": "user takes over", "by": "user"})
	if pl := p.response(id, uiapwire.TypeInterrupted); pl["status"] != "interrupted" || pl["reason"] != "user takes over" {
		h.Errorf("interrupted = %v", pl)
	}
	if st := app.Session(sid).State(); st != uicontrol.StateInterrupted {
		h.Errorf("app state = %v", st)
	}
	for _, typ := range []string{uiapwire.TypeCapabilitiesGet, typeEcho, "x.nope.do"} {
		id := p.request(typ, nil)
		p.error(id, uicontrol.CodeSessionNotActive)
	}
	id = p.request(uiapwire.TypeInterrupt, nil)
	p.error(id, uicontrol.CodeStateConflict)
	id = p.request(uiapwire.TypeInitialize, initialize())
	p.error(id, uicontrol.CodeStateConflict)
	id = p.request(uiapwire.TypePing, nil)
	p.response(id, uiapwire.TypePong)
	// No event reaches an interrupted agent; it is replayed on resume.
	if _, err := app.SetCapabilities(h.ctx(), mustDoc(h, `{"actions":[]}`), "app_update"); err != nil {
		h.Fatal(err)
	}
	p.silence()
	id = p.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
	pl := p.response(id, uiapwire.TypeResumed)
	if pl["sessionId"] != sid || pl["selectedVersion"] != "0.1" {
		h.Errorf("resumed = %v", pl)
	}
	if tok, _ := pl["resumeToken"].(string); tok == "" || tok == init["resumeToken"] {
		h.Errorf("resumed resumeToken = %q: want a new one", tok)
	}
	ev := p.next()
	if ev["kind"] != "event" || ev["type"] != uiapwire.TypeCapabilitiesChanged || ev["seq"] != 1.0 {
		h.Errorf("replayed = %v", ev)
	}
	id = p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
	id = p.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": pl["resumeToken"]})
	p.error(id, uicontrol.CodeStateConflict)
}

// The app interrupts (§8.3); the agent is INTERRUPTED until it resumes.
func testAppInterrupts(h *h) {
	app := h.app(nil)
	a := h.agent(app, nil)
	s := app.Session(a.Session().ID)
	if err := s.Interrupt(h.ctx(), "user takes over", "user"); err != nil {
		h.Fatalf("Interrupt: %v", err)
	}
	if a.State() != uicontrol.StateInterrupted || s.State() != uicontrol.StateInterrupted {
		h.Fatalf("states after interrupt: agent %v, app %v", a.State(), s.State())
	}
	if _, err := a.GetCapabilities(h.ctx()); !errors.Is(err, uicontrol.CodeSessionNotActive) {
		h.Errorf("GetCapabilities while interrupted: %v", err)
	}
	if err := s.Interrupt(h.ctx(), "again", "user"); !errors.Is(err, uicontrol.CodeSessionNotActive) {
		h.Errorf("second Interrupt: %v", err)
	}
	if err := a.Ping(h.ctx()); err != nil {
		h.Errorf("Ping while interrupted: %v", err)
	}
	if err := a.Resume(h.ctx(), nil); err != nil {
		h.Fatalf("Resume: %v", err)
	}
	if a.State() != uicontrol.StateActive || s.State() != uicontrol.StateActive {
		h.Fatalf("states after resume: agent %v, app %v", a.State(), s.State())
	}
	if _, err := a.GetCapabilities(h.ctx()); err != nil {
		h.Errorf("GetCapabilities after resume: %v", err)
	}
	if err := a.Interrupt(h.ctx(), "agent pauses"); err != nil {
		h.Fatalf("agent Interrupt: %v", err)
	}
	if s.State() != uicontrol.StateInterrupted {
		h.Errorf("app state after the agent's interrupt: %v", s.State())
	}
	if err := a.Resume(h.ctx(), nil); err != nil {
		h.Fatalf("second Resume: %v", err)
	}
}

// §8.5: after session.terminated nothing is processed.
func testTerminateThenSilence(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	sid := p.handshake(initialize())["sessionId"].(string)
	id := p.request(uiapwire.TypeTerminate, msg{"reason": "normal"})
	if pl := p.response(id, uiapwire.TypeTerminated); pl["status"] != "terminated" || pl["reason"] != "normal" {
		h.Errorf("terminated = %v", pl)
	}
	if s := app.Session(sid); s != nil {
		h.Errorf("session %s still known after terminate (%v)", sid, s.State())
	}
	// The connection is closed: a message sent now gets no answer.
	m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
	b, _ := jsonMarshal(m)
	_ = p.tr.Send(h.ctx(), b)
	if got := p.closed(); len(got) != 0 {
		h.Errorf("messages after session.terminated: %v", got)
	}
}

func testAgentTerminates(h *h) {
	app := h.app(nil)
	a := h.agent(app, nil)
	s := app.Session(a.Session().ID)
	if err := a.Terminate(h.ctx(), "normal"); err != nil {
		h.Fatalf("Terminate: %v", err)
	}
	<-s.Done()
	if a.State() != uicontrol.StateTerminated || s.State() != uicontrol.StateTerminated || s.Err() != nil || a.Err() != nil {
		h.Errorf("after terminate: agent %v (%v), app %v (%v)", a.State(), a.Err(), s.State(), s.Err())
	}
	if _, err := a.GetCapabilities(h.ctx()); !errors.Is(err, uicontrol.CodeSessionNotActive) {
		h.Errorf("GetCapabilities after terminate: %v", err)
	}
	if err := a.Resume(h.ctx(), nil); !errors.Is(err, uicontrol.CodeStateConflict) {
		h.Errorf("Resume after terminate: %v", err)
	}
}

func testAppTerminates(h *h) {
	app := h.app(nil)
	a := h.agent(app, nil)
	s := app.Session(a.Session().ID)
	if err := s.Terminate(h.ctx(), "policy"); err != nil {
		h.Fatalf("Terminate: %v", err)
	}
	<-a.Done()
	if a.State() != uicontrol.StateTerminated || a.Err() != nil || s.State() != uicontrol.StateTerminated {
		h.Errorf("after terminate: agent %v (%v), app %v", a.State(), a.Err(), s.State())
	}
	if err := s.Emit(h.ctx(), "x.test.happened", nil); !errors.Is(err, uicontrol.CodeSessionNotActive) {
		h.Errorf("Emit after terminate: %v", err)
	}
}

// §7.1: INTERRUPTED → TERMINATING via session.terminate.
func testTerminateInterrupted(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	p.handshake(initialize())
	id := p.request(uiapwire.TypeInterrupt, nil)
	p.response(id, uiapwire.TypeInterrupted)
	id = p.request(uiapwire.TypeTerminate, nil)
	p.response(id, uiapwire.TypeTerminated)
	p.closed()
}

// §7.1: a fatal transport error terminates a session that cannot be
// resumed.
func testFatalTransportError(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) { o.ResumeWindow = -1 })
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	if _, ok := init["resumeToken"]; ok {
		h.Errorf("resumeToken issued although resume is disabled")
	}
	s := app.Session(init["sessionId"].(string))
	_ = p.tr.Close()
	<-s.Done()
	if app.Session(s.ID()) != nil {
		h.Errorf("session still known")
	}

	// The agent side: a transport loss without a resume token.
	a := h.agent(app, nil)
	s = app.Session(a.Session().ID)
	s.Interrupt(h.ctx(), "", "system") //nolint:errcheck // only the state matters
	_ = app.Close()
	<-a.Done()
	if !errors.Is(a.Err(), uicontrol.ErrClosed) {
		h.Errorf("agent Err = %v, want ErrClosed", a.Err())
	}
}

// The agent answers the app's session requests and refuses the rest.
func testAgentAnswers(h *h) {
	p, end := h.rawApp()
	done := make(chan *uicontrol.Agent)
	go func() {
		a, err := uicontrol.Connect(h.ctx(), end, nil)
		if err != nil {
			h.Errorf("Connect: %v", err)
		}
		done <- a
	}()
	init := p.next()
	p.sessionID = "s-1"
	r := p.msg("response", uiapwire.TypeInitialized, msg{"sessionId": "s-1", "selectedVersion": "0.1", "capabilityDelivery": "none"})
	r["correlationId"] = init["id"]
	p.send(r)
	a := <-done
	if a == nil {
		return
	}
	defer a.Close()
	id := p.request(uiapwire.TypePing, msg{"nonce": "abc"})
	if pl := p.response(id, uiapwire.TypePong); pl["nonce"] != "abc" {
		h.Errorf("pong = %v", pl)
	}
	for typ, code := range map[string]uicontrol.Code{
		uiapwire.TypeInitialize: uicontrol.CodeStateConflict, uiapwire.TypeResume: uicontrol.CodeStateConflict,
		uiapwire.TypeCapabilitiesGet: uicontrol.CodeUnknownMessageType, "x.app.ask": uicontrol.CodeUnknownMessageType,
	} {
		id := p.request(typ, nil)
		p.error(id, code)
	}
	// The agent is strict by envelope as well.
	m := p.msg("request", uiapwire.TypePing, nil)
	m["payload"] = nil
	p.send(m)
	p.error(m["id"].(string), uicontrol.CodeInvalidMessage)
	m = p.msg("request", uiapwire.TypePing, nil)
	m["uiap"] = "0.2"
	p.send(m)
	p.error(m["id"].(string), uicontrol.CodeUnsupportedVersion)
	// No resume token: terminating ends the agent.
	id = p.request(uiapwire.TypeTerminate, msg{"reason": "normal"})
	p.response(id, uiapwire.TypeTerminated)
	<-a.Done()
	if a.State() != uicontrol.StateTerminated || a.Err() != nil {
		h.Errorf("agent after terminate: %v (%v)", a.State(), a.Err())
	}
}
