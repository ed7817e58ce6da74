package uiaptest

import (
	"errors"
	"fmt"
	"sync"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/internal/uiapsession/uiapsessiontest"
	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

// Sessions that move between Apps sharing a store (AppOptions.Sessions):
// the replicas of a server on one database. Each case gives its apps a
// store of its own; an app "dies" (SIGKILL) when its store access fails
// from then on and its connections drop, without a word to the store.
func replicaCases() []testCase {
	return []testCase{
		{"UIAP_8_2_ResumeOnAnotherApp", testResumeOnAnotherApp},
		{"UIAP_8_2_ResumeOnAnotherAppWithAgent", testResumeOnAnotherAppAgent},
		{"UIAP_8_2_ResumeRaceOnTwoApps", testResumeRaceTwoApps},
		{"UIAP_8_2_FormerAppLetsGo", testFormerAppLetsGo},
		{"UIAP_8_2_ResumeBackOnFormerApp", testResumeBackOnFormerApp},
		{"UIAP_8_2_ClosedAppSessionResumedElsewhere", testClosedAppResumedElsewhere},
		{"UIAP_8_2_DeadAppSessionExpires", testDeadAppSessionExpires},
	}
}

// replica starts an app keeping its sessions in shared, through an
// access that the returned store's die cuts.
func (h *h) replica(shared uiapsession.Store, mod func(*uicontrol.AppOptions)) (*uicontrol.App, *uiapsessiontest.Mortal) {
	h.Helper()
	m := &uiapsessiontest.Mortal{Store: shared}
	return h.app(func(o *uicontrol.AppOptions) {
		o.Sessions = m
		if mod != nil {
			mod(o)
		}
	}), m
}

// §8.2 across Apps: the app holding a session dies; the agent resumes on
// another app with its token and lastSeq: session.resumed settles what
// session.initialized did, with a new token; the events after lastSeq
// are replayed (same seq and ts, new ids) and numbering continues; the
// used token is refused; a terminated session is gone for every app.
func testResumeOnAnotherApp(h *h) {
	shared := uiapsession.NewMemory()
	first, firstStore := h.replica(shared, func(o *uicontrol.AppOptions) { o.Heartbeat = 15 * time.Second })
	second, _ := h.replica(shared, func(o *uicontrol.AppOptions) { o.Heartbeat = 30 * time.Second })
	p := h.rawAgent(first)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	s := first.Session(sid)
	var sent []msg
	for i := range 3 {
		if err := s.Emit(h.ctx(), "x.test.tick", msg{"i": i}); err != nil {
			h.Fatal(err)
		}
		sent = append(sent, p.next())
	}
	firstStore.Kill()
	lose(h, p.tr)

	q := h.rawAgent(second)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"], "lastSeq": 1})
	resumed := q.response(id, uiapwire.TypeResumed)
	want := msg{"sessionId": sid, "selectedVersion": "0.1", "selectedProfiles": []any{profileWeb},
		"selectedExtensions": []any{msg{"id": extPolicy, "version": "0.1"}}, "heartbeatMs": 15000.0}
	token, _ := resumed["resumeToken"].(string)
	delete(resumed, "resumeToken")
	if d := jsonEqual(h, want, resumed); d != "" {
		h.Errorf("session.resumed on the other app (-want +got):\n%s", d)
	}
	if token == "" || token == init["resumeToken"] {
		h.Errorf("session.resumed carries resumeToken %q: want a new one", token)
	}
	for _, w := range sent[1:] {
		got := q.next()
		if got["seq"] != w["seq"] || got["ts"] != w["ts"] || got["id"] == w["id"] || got["type"] != "x.test.tick" || got["sessionId"] != sid {
			h.Errorf("replayed %v, want a copy of %v with a new id", got, w)
		}
		if d := jsonEqual(h, w["payload"], got["payload"]); d != "" {
			h.Errorf("replayed payload (-want +got):\n%s", d)
		}
	}
	q.sessionID = sid
	id = q.request(uiapwire.TypeCapabilitiesGet, nil)
	q.response(id, uiapwire.TypeCapabilitiesList)
	s2 := second.Session(sid)
	if s2 == nil || s2.State() != uicontrol.StateActive {
		h.Fatalf("the other app's session: %v", s2)
	}
	if d := jsonEqual(h, s.Info(), s2.Info()); d != "" {
		h.Errorf("what the handshake settled, on the other app (-want +got):\n%s", d)
	}
	if err := s2.Emit(h.ctx(), "x.test.tick", msg{"i": 3}); err != nil {
		h.Fatal(err)
	}
	if got := q.next(); got["seq"] != 4.0 {
		h.Errorf("the next event on the other app: %v, want seq 4", got)
	}

	r := h.rawAgent(second)
	r.n = 200
	id = r.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
	r.error(id, uicontrol.CodePermissionDenied)

	id = q.request(uiapwire.TypeTerminate, nil)
	q.response(id, uiapwire.TypeTerminated)
	third, _ := h.replica(shared, nil)
	r = h.rawAgent(third)
	r.n = 300
	id = r.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": token})
	r.error(id, uicontrol.CodeUnknownSession)
}

// The same with a uicontrol.Agent: Resume over a connection to another
// app returns to ACTIVE, and every event arrives once, in order, also
// those the dead app sent while the agent was away.
func testResumeOnAnotherAppAgent(h *h) {
	shared := uiapsession.NewMemory()
	first, firstStore := h.replica(shared, nil)
	second, _ := h.replica(shared, nil)
	var mu sync.Mutex
	var got []string
	end := h.connect(first)
	a, err := uicontrol.Connect(h.ctx(), end, &uicontrol.AgentOptions{OnEvent: func(e *uicontrol.Envelope) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Type))
	}})
	if err != nil {
		h.Fatal(err)
	}
	h.Cleanup(func() { _ = a.Close() })
	s := first.Session(a.Session().ID)
	if err := s.Emit(h.ctx(), "x.test.one", nil); err != nil {
		h.Fatal(err)
	}
	synctest.Wait()
	lose(h, end)
	if err := s.Emit(h.ctx(), "x.test.two", nil); err != nil { // stored, never sent
		h.Fatal(err)
	}
	firstStore.Kill()
	if err := a.Resume(h.ctx(), h.connect(second)); err != nil {
		h.Fatalf("Resume on the other app: %v", err)
	}
	s2 := second.Session(a.Session().ID)
	if s2 == nil {
		h.Fatal("the other app does not hold the session")
	}
	if err := s2.Emit(h.ctx(), "x.test.three", nil); err != nil {
		h.Fatal(err)
	}
	if _, err := a.GetCapabilities(h.ctx()); err != nil {
		h.Errorf("capabilities.get on the other app: %v", err)
	}
	synctest.Wait()
	mu.Lock()
	defer mu.Unlock()
	if d := jsonEqual(h, []string{"1:x.test.one", "2:x.test.two", "3:x.test.three"}, got); d != "" {
		h.Errorf("events (-want +got):\n%s", d)
	}
}

// Two resumes with one token on two apps at once: exactly one is
// resumed, the other refused (permission_denied: the token is used).
func testResumeRaceTwoApps(h *h) {
	shared := uiapsession.NewMemory()
	first, _ := h.replica(shared, nil)
	p := h.rawAgent(first)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	lose(h, p.tr)
	var peers []*peer
	var reqs []msg
	for i := range 2 {
		app, _ := h.replica(shared, nil)
		q := h.rawAgent(app)
		q.n = 100 * (i + 1)
		peers = append(peers, q)
		reqs = append(reqs, q.msg("request", uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]}))
	}
	for i, q := range peers {
		q.send(reqs[i])
	}
	won := 0
	for i, q := range peers {
		m := q.next()
		if m["kind"] == "response" && m["type"] == uiapwire.TypeResumed && m["correlationId"] == reqs[i]["id"] {
			won++
			continue
		}
		checkError(h, m, reqs[i]["id"].(string), uicontrol.CodePermissionDenied)
	}
	if won != 1 {
		h.Errorf("%d resumes succeeded, want exactly 1", won)
	}
}

// The app that held a session, still alive behind a connection the
// agent gave up on, lets go once another app resumed the session: its
// next event is refused (the session ends there and is not sent), and so
// is its next expiry refresh.
func testFormerAppLetsGo(h *h) {
	// A window shorter than the WebSocket binding's ping interval: the
	// peers, not reading while time passes, keep their connections.
	const window = 10 * time.Second
	shared := uiapsession.NewMemory()
	short := func(o *uicontrol.AppOptions) { o.ResumeWindow = window }
	first, _ := h.replica(shared, short)
	second, _ := h.replica(shared, short)
	for _, how := range []string{"emit", "refresh"} {
		p := h.rawAgent(first)
		init := p.handshake(initialize())
		sid := init["sessionId"].(string)
		s := first.Session(sid)
		q := h.rawAgent(second)
		q.n = 100
		id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"]})
		q.response(id, uiapwire.TypeResumed)
		switch how {
		case "emit":
			if err := s.Emit(h.ctx(), "x.test.stale", nil); !errors.Is(err, uicontrol.CodeSessionNotActive) {
				h.Errorf("Emit on the former app = %v, want session_not_active", err)
			}
		case "refresh":
			time.Sleep(window + time.Second)
		}
		<-s.Done()
		if !errors.Is(s.Err(), uicontrol.CodeUnknownSession) || first.Session(sid) != nil {
			h.Errorf("%s: the former app's session: %v, %v", how, s.Err(), first.Session(sid))
		}
		if got := p.closed(); len(got) != 0 {
			h.Errorf("%s: the former app sent %v", how, got)
		}
		q.sessionID = sid
		id = q.request(uiapwire.TypeCapabilitiesGet, nil)
		q.response(id, uiapwire.TypeCapabilitiesList)
		if err := second.Session(sid).Emit(h.ctx(), "x.test.fresh", nil); err != nil {
			h.Fatal(err)
		}
		if got := q.next(); got["seq"] != 1.0 || got["type"] != "x.test.fresh" {
			h.Errorf("%s: the event of the app holding the session: %v", how, got)
		}
	}
}

// An App closed with stored sessions (a graceful stop) ends them there
// but leaves them resumable on another app.
func testClosedAppResumedElsewhere(h *h) {
	shared := uiapsession.NewMemory()
	first, _ := h.replica(shared, nil)
	second, _ := h.replica(shared, nil)
	p := h.rawAgent(first)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	if err := first.Session(sid).Emit(h.ctx(), "x.test.tick", nil); err != nil {
		h.Fatal(err)
	}
	p.next()
	if err := first.Close(); err != nil {
		h.Fatal(err)
	}
	p.closed()
	q := h.rawAgent(second)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"], "lastSeq": 1})
	q.response(id, uiapwire.TypeResumed)
	q.silence()
}

// A session whose app died stays resumable for at least the resume
// window, and is gone after twice the window (the expiry the dead app
// last refreshed).
func testDeadAppSessionExpires(h *h) {
	shared := uiapsession.NewMemory()
	first, firstStore := h.replica(shared, nil)
	second, _ := h.replica(shared, nil)
	var inits []msg
	for range 2 {
		inits = append(inits, h.rawAgent(first).handshake(initialize()))
	}
	firstStore.Kill()
	time.Sleep(resumeAfter - time.Second)
	q := h.rawAgent(second)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": inits[0]["sessionId"], "resumeToken": inits[0]["resumeToken"]})
	q.response(id, uiapwire.TypeResumed)
	time.Sleep(resumeAfter + 2*time.Second)
	r := h.rawAgent(second)
	r.n = 200
	id = r.request(uiapwire.TypeResume, msg{"sessionId": inits[1]["sessionId"], "resumeToken": inits[1]["resumeToken"]})
	r.error(id, uicontrol.CodeUnknownSession)
	if n, err := shared.Sweep(h.ctx(), time.Now()); err != nil || n != 1 {
		h.Errorf("Sweep = %d, %v; want the dead app's other session", n, err)
	}
}

// A session resumed on another app and then back on the first, which
// still holds its old copy (the resume window has not ended there): the
// first takes the session up afresh — the other app's token is good,
// the other app's events are replayed, numbering goes on.
func testResumeBackOnFormerApp(h *h) {
	shared := uiapsession.NewMemory()
	first, _ := h.replica(shared, nil)
	second, _ := h.replica(shared, nil)
	p := h.rawAgent(first)
	init := p.handshake(initialize())
	sid := init["sessionId"].(string)
	if err := first.Session(sid).Emit(h.ctx(), "x.test.tick", msg{"i": 1}); err != nil {
		h.Fatal(err)
	}
	p.next()
	lose(h, p.tr)
	q := h.rawAgent(second)
	q.n = 100
	id := q.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": init["resumeToken"], "lastSeq": 1})
	t2 := q.response(id, uiapwire.TypeResumed)["resumeToken"]
	if err := second.Session(sid).Emit(h.ctx(), "x.test.tick", msg{"i": 2}); err != nil {
		h.Fatal(err)
	}
	q.next()
	lose(h, q.tr)
	if err := second.Session(sid).Emit(h.ctx(), "x.test.tick", msg{"i": 3}); err != nil {
		h.Fatal(err)
	}
	if s := first.Session(sid); s == nil || s.State() != uicontrol.StateInterrupted {
		h.Fatalf("the first app no longer holds its copy: %v", s)
	}
	r := h.rawAgent(first)
	r.n = 200
	id = r.request(uiapwire.TypeResume, msg{"sessionId": sid, "resumeToken": t2, "lastSeq": 2})
	r.response(id, uiapwire.TypeResumed)
	if m := r.next(); m["seq"] != 3.0 || m["payload"].(msg)["i"] != 3.0 {
		h.Errorf("replayed %v, want the second app's event 3", m)
	}
	s := first.Session(sid)
	if err := s.Emit(h.ctx(), "x.test.tick", msg{"i": 4}); err != nil {
		h.Fatal(err)
	}
	if m := r.next(); m["seq"] != 4.0 {
		h.Errorf("next event %v, want seq 4", m)
	}
}
