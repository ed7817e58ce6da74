package uiaptest

import (
	"errors"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func heartbeatCases() []testCase {
	return []testCase{
		{"UIAP_8_4_PingPongEchoesNonce", testPingPong},
		{"UIAP_8_4_HeartbeatKeepsSessionAlive", testHeartbeatAlive},
		{"UIAP_8_4_MissedPongsTerminateApp", testMissedPongsApp},
		{"UIAP_8_4_MissedPongsTerminateAgent", testMissedPongsAgent},
		{"UIAP_8_4_PongWithWrongNonceIsNoAnswer", testWrongNonce},
		{"UIAP_8_4_OneHeartbeatAcrossInterruptResume", testOneHeartbeat},
	}
}

const beat = 10 * time.Second

func testPingPong(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	id := p.request(uiapwire.TypePing, msg{"nonce": "n-1"})
	if pl := p.response(id, uiapwire.TypePong); pl["nonce"] != "n-1" {
		h.Errorf("pong = %v", pl)
	}
	id = p.request(uiapwire.TypePing, nil)
	if pl := p.response(id, uiapwire.TypePong); len(pl) != 0 {
		h.Errorf("pong without nonce = %v", pl)
	}
	id = p.request(uiapwire.TypePing, msg{"nonce": 7})
	p.error(id, uicontrol.CodeInvalidMessage)
}

// §8.4: with heartbeatMs negotiated, idle peers ping each other and
// answer; the session stays up.
func testHeartbeatAlive(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) { o.Heartbeat = beat })
	a := h.agent(app, nil)
	if got := a.Session().Heartbeat; got != beat {
		h.Fatalf("heartbeat = %v", got)
	}
	s := app.Session(a.Session().ID)
	time.Sleep(10 * time.Minute)
	if a.State() != uicontrol.StateActive || s.State() != uicontrol.StateActive {
		h.Fatalf("after 10 idle minutes: agent %v (%v), app %v (%v)", a.State(), a.Err(), s.State(), s.Err())
	}
	// A raw peer sees pings with nonces during idle periods.
	p := h.rawAgent(app)
	if pl := p.handshake(initialize()); pl["heartbeatMs"] != float64(beat.Milliseconds()) {
		h.Fatalf("heartbeatMs = %v", pl["heartbeatMs"])
	}
	for range 3 {
		m := p.next()
		nonce, _ := m["payload"].(msg)["nonce"].(string)
		if m["type"] != uiapwire.TypePing || m["kind"] != "request" || nonce == "" {
			h.Fatalf("want a ping with a nonce, got %v", m)
		}
		r := p.msg("response", uiapwire.TypePong, msg{"nonce": nonce})
		r["correlationId"] = m["id"]
		p.send(r)
	}
}

// §8.4: after repeated missed pongs the app terminates the session.
func testMissedPongsApp(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) { o.Heartbeat = beat })
	p := h.rawAgent(app)
	sid := p.handshake(initialize())["sessionId"].(string)
	s := app.Session(sid)
	start := time.Now()
	<-s.Done()
	// Ticks at 10 s (idle: ping), 20 s (missed 1: ping), 30 s (missed 2).
	if d := time.Since(start); d != 3*beat {
		h.Errorf("terminated after %v, want %v", d, 3*beat)
	}
	if !errors.Is(s.Err(), uicontrol.CodeTimeout) {
		h.Errorf("Err = %v", s.Err())
	}
	got := p.closed()
	if len(got) != 2 || got[0]["type"] != uiapwire.TypePing || got[1]["type"] != uiapwire.TypePing {
		h.Errorf("before the close: %v, want two pings", got)
	}
	if app.Session(sid) != nil {
		h.Errorf("session still known")
	}
}

// The agent side: an app that stops answering is given up on.
func testMissedPongsAgent(h *h) {
	p, end := h.rawApp()
	done := make(chan *uicontrol.Agent, 1)
	go func() {
		a, err := uicontrol.Connect(h.ctx(), end, &uicontrol.AgentOptions{MissedPongs: 3})
		if err != nil {
			h.Errorf("Connect: %v", err)
		}
		done <- a
	}()
	init := p.next()
	p.sessionID = "s-1"
	r := p.msg("response", uiapwire.TypeInitialized, msg{"sessionId": "s-1", "selectedVersion": "0.1",
		"capabilityDelivery": "none", "heartbeatMs": beat.Milliseconds()})
	r["correlationId"] = init["id"]
	p.send(r)
	a := <-done
	if a == nil {
		return
	}
	h.Cleanup(func() { _ = a.Close() })
	start := time.Now()
	<-a.Done()
	if d := time.Since(start); d != 4*beat {
		h.Errorf("terminated after %v, want %v", d, 4*beat)
	}
	if !errors.Is(a.Err(), uicontrol.CodeTimeout) {
		h.Errorf("Err = %v", a.Err())
	}
	if got := p.closed(); len(got) != 3 {
		h.Errorf("before the close: %v, want three pings", got)
	}
}

// Only a pong echoing the ping's nonce answers it.
func testWrongNonce(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) { o.Heartbeat = beat })
	p := h.rawAgent(app)
	s := app.Session(p.handshake(initialize())["sessionId"].(string))
	start := time.Now()
	for {
		m, err := p.receive(time.Minute)
		if err != nil {
			break
		}
		r := p.msg("response", uiapwire.TypePong, msg{"nonce": "not-the-nonce"})
		r["correlationId"] = m["id"]
		p.send(r)
	}
	<-s.Done()
	if d := time.Since(start); d != 3*beat {
		h.Errorf("terminated after %v, want %v", d, 3*beat)
	}
}

// An idle session answered promptly is pinged every other interval (an
// answered ping is traffic), also after an interrupt and resume over the
// same connection.
func testOneHeartbeat(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) { o.Heartbeat = beat })
	p := h.rawAgent(app)
	init := p.handshake(initialize())
	id := p.request(uiapwire.TypeInterrupt, nil)
	p.response(id, uiapwire.TypeInterrupted)
	id = p.request(uiapwire.TypeResume, msg{"sessionId": init["sessionId"], "resumeToken": init["resumeToken"]})
	p.response(id, uiapwire.TypeResumed)
	deadline := time.Now().Add(10*beat + beat/2)
	pings := 0
	for {
		m, err := p.receive(time.Until(deadline))
		if err != nil {
			break
		}
		if m["type"] != uiapwire.TypePing {
			h.Fatalf("unexpected %v", m)
		}
		pings++
		r := p.msg("response", uiapwire.TypePong, m["payload"].(msg))
		r["correlationId"] = m["id"]
		p.send(r)
	}
	if pings != 5 {
		h.Errorf("%d pings in %v, want 5", pings, 10*beat)
	}
}
