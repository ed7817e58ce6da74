// Package uiaptest is the conformance suite of UIAP Core 0.1
// (uiap.dev) for package uicontrol: every binding — the
// in-process Pair, WebSocket, HTTP — passes Run, as every slog handler
// passes testing/slogtest.
//
//	func TestUIAP_MyBinding(t *testing.T) {
//		uiaptest.Run(t, func(t *testing.T) (app, agent uicontrol.Transport) { return newMyPair(t) })
//	}
//
// Each case starts a uicontrol.App on the app end of fresh pairs and
// drives it from the agent end, either byte by byte (hand-written
// messages, malformed ones included) or through a uicontrol.Agent; some
// cases do the converse, answering a real Agent by hand. Case names
// carry the spec section they check (UIAP_8_2_ResumeTokenReused).
//
// Every case runs inside a testing/synctest bubble, so that heartbeats
// and resume windows take no real time: newPair is called inside the
// bubble and must connect its ends without real I/O (in memory, e.g.
// over net.Pipe); every goroutine the pair starts must end once both
// ends are closed. A case may call newPair several times (a resume over
// a new connection).
package uiaptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/google/go-cmp/cmp"
)

// NewPair returns the two ends of a fresh connection: what the app end
// sends the agent end receives, and conversely.
type NewPair func(t *testing.T) (app, agent uicontrol.Transport)

// Run runs every case of the suite over the connections newPair makes.
func Run(t *testing.T, newPair NewPair) {
	t.Helper()
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c.run(&h{T: t, newPair: newPair})
			})
		})
	}
}

type testCase struct {
	name string
	run  func(h *h)
}

func cases() []testCase {
	var all []testCase
	all = append(all, envelopeCases()...)
	all = append(all, sessionCases()...)
	all = append(all, negotiationCases()...)
	all = append(all, resumeCases()...)
	all = append(all, replicaCases()...)
	all = append(all, heartbeatCases()...)
	all = append(all, capabilityCases()...)
	all = append(all, actionCases()...)
	all = append(all, policyCases()...)
	all = append(all, rateLimitCases()...)
	all = append(all, replyCases()...)
	return all
}

// h is the harness of one case.
type h struct {
	*testing.T
	newPair NewPair
	// appMod, if set, adjusts the options of every app of the case after
	// the case's own adjustments (the suite's own tests run every case
	// with stored sessions).
	appMod func(*uicontrol.AppOptions)
}

// Types the suite's app handles.
const (
	typeEcho     = "x.test.echo"     // answered with x.test.echoed and the request's payload
	typeFail     = "x.test.fail"     // answered with the error code in payload.code
	typePanic    = "x.test.panic"    // the handler panics
	typeBadReply = "x.test.badreply" // the handler answers with a payload that is not an object
)

// The suite's app supports the web profile and the policy extension.
const (
	profileWeb  = "web@0.1"
	extPolicy   = "uiap.policy"
	resumeAfter = time.Minute // the default resume window
)

// sampleCapabilities is the suite app's document: every section, and a
// member that is not a section.
const sampleCapabilities = `{
	"roles": [{"id": "shopper", "name": "Shopper"}],
	"states": [{"id": "cart", "kind": "region"}],
	"affordances": ["activatable", "editable"],
	"actions": [{"id": "cart.add", "args": {"type": "object", "properties": {"sku": {"type": "string"}}}}, {"id": "checkout.pay"}],
	"risk": {"cart.add": "low", "checkout.pay": "high"},
	"signals": [{"id": "toast"}],
	"x.vendor.extra": {"kept": true}
}`

func mustDoc(t testing.TB, s string) *uicontrol.CapabilityDocument {
	t.Helper()
	d, err := uicontrol.DecodeCapabilityDocument([]byte(s))
	if err != nil {
		t.Fatalf("capability document: %v", err)
	}
	return d
}

// app starts the suite's app; mod adjusts its options. It is closed
// when the case ends.
func (h *h) app(mod func(*uicontrol.AppOptions)) *uicontrol.App {
	h.Helper()
	opts := uicontrol.AppOptions{
		Source:         uicontrol.EndpointRef{Role: "app", ID: "uiaptest-app"},
		Profiles:       []string{profileWeb},
		Extensions:     []uicontrol.ExtensionOffer{{ID: extPolicy, Versions: []string{"0.1"}}},
		MaxMessageSize: 64 << 10,
		Logger:         slog.New(slog.DiscardHandler),
		Policy:         suitePolicy,
		Handoff:        suiteHandoff,
	}
	if mod != nil {
		mod(&opts)
	}
	if h.appMod != nil {
		h.appMod(&opts)
	}
	app := uicontrol.NewApp(&opts)
	registerActions(app)
	app.Handle(typeEcho, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		return &uicontrol.Reply{Type: "x.test.echoed", Payload: req.Payload}, nil
	})
	app.Handle(typeFail, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		var p struct{ Code uicontrol.Code }
		_ = json.Unmarshal(req.Payload, &p)
		return nil, uicontrol.NewError(p.Code, "failed as asked")
	})
	app.Handle(typePanic, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		panic("uiaptest: handler panic")
	})
	app.Handle(typeBadReply, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		return &uicontrol.Reply{Type: "x.test.bad", Payload: []int{1}}, nil
	})
	if _, err := app.SetCapabilities(context.Background(), mustDoc(h, sampleCapabilities), ""); err != nil {
		h.Fatal(err)
	}
	h.Cleanup(func() { _ = app.Close() })
	return app
}

// connect opens a connection served by app and returns its agent end,
// closed when the case ends.
func (h *h) connect(app *uicontrol.App) uicontrol.Transport {
	appEnd, agentEnd := h.newPair(h.T)
	go func() { _ = app.Serve(context.Background(), appEnd) }()
	h.Cleanup(func() { _ = agentEnd.Close() })
	return agentEnd
}

// rawAgent connects to app and returns a hand-driven agent peer.
func (h *h) rawAgent(app *uicontrol.App) *peer {
	return &peer{h: h, tr: h.connect(app), from: "agent", ids: map[string]bool{}}
}

// agent connects a uicontrol.Agent to app.
func (h *h) agent(app *uicontrol.App, opts *uicontrol.AgentOptions) *uicontrol.Agent {
	h.Helper()
	a, err := uicontrol.Connect(h.ctx(), h.connect(app), opts)
	if err != nil {
		h.Fatalf("Connect: %v", err)
	}
	h.Cleanup(func() { _ = a.Close() })
	return a
}

// rawApp returns a hand-driven app peer and the agent end of its
// connection, for checking a uicontrol.Agent.
func (h *h) rawApp() (*peer, uicontrol.Transport) {
	appEnd, agentEnd := h.newPair(h.T)
	h.Cleanup(func() { _ = appEnd.Close() })
	return &peer{h: h, tr: appEnd, from: "app", ids: map[string]bool{}}, agentEnd
}

// timeoutOfAsk is how long a request may go unanswered (bubble time).
const timeoutOfAsk = time.Minute

// ctx returns a context for one operation: a minute of (bubble) time.
func (h *h) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h.Cleanup(cancel)
	return ctx
}

// peer drives one end of a connection by hand.
type peer struct {
	h         *h
	tr        uicontrol.Transport
	from      string // "agent" or "app": the role this peer plays
	n         int
	sessionID string
	ids       map[string]bool // IDs of the messages received, to check uniqueness
	lastSeq   float64         // the highest seq of the events ask skipped
}

// msg is a message as a generic JSON object.
type msg = map[string]any

// msg returns a valid message of this peer.
func (p *peer) msg(kind, typ string, payload any) msg {
	p.n++
	m := msg{"uiap": "0.1", "kind": kind, "type": typ, "id": fmt.Sprintf("%s-%d", p.from, p.n),
		"ts": "2026-03-26T13:00:00.000Z", "source": msg{"role": p.from, "id": "uiaptest-" + p.from}, "payload": payload}
	if payload == nil {
		m["payload"] = msg{}
	}
	if p.sessionID != "" {
		m["sessionId"] = p.sessionID
	}
	return m
}

func (p *peer) send(m msg) {
	p.h.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		p.h.Fatal(err)
	}
	p.sendRaw(b)
}

func (p *peer) sendRaw(b []byte) {
	p.h.Helper()
	if err := p.tr.Send(p.h.ctx(), b); err != nil {
		p.h.Fatalf("send: %v", err)
	}
}

// request sends a request and returns its id.
func (p *peer) request(typ string, payload any) string {
	p.h.Helper()
	m := p.msg("request", typ, payload)
	p.send(m)
	return m["id"].(string)
}

// next receives one message within a minute, checks it against the
// envelope rules, and returns it.
func (p *peer) next() msg {
	p.h.Helper()
	m, err := p.receive(time.Minute)
	if err != nil {
		p.h.Fatalf("receive: %v", err)
	}
	return m
}

func (p *peer) receive(wait time.Duration) (msg, error) {
	p.h.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	b, err := p.tr.Receive(ctx)
	if err != nil {
		return nil, err
	}
	checkWire(p.h, b, p.ids)
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		p.h.Fatal(err)
	}
	return m, nil
}

// checkWire checks a message the implementation sent: it passes
// DecodeEnvelope (§4.1), speaks 0.1 (§11), has an id new in the
// connection (§3), and a response carries correlationId.
func checkWire(h *h, b []byte, seen map[string]bool) {
	h.Helper()
	e, err := uicontrol.DecodeEnvelope(b)
	if err != nil {
		h.Fatalf("implementation sent an invalid message: %v\n%s", err, b)
	}
	if e.UIAP != uicontrol.Version {
		h.Errorf("uiap = %q, want %q: %s", e.UIAP, uicontrol.Version, b)
	}
	if seen[e.ID] {
		h.Errorf("id %q sent twice", e.ID)
	}
	seen[e.ID] = true
}

// silence checks that nothing arrives for ten seconds (or the
// connection closes).
func (p *peer) silence() {
	p.h.Helper()
	m, err := p.receive(10 * time.Second)
	if err == nil {
		p.h.Fatalf("expected no message, got %v", m)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, uicontrol.ErrClosed) {
		p.h.Fatalf("receive: %v", err)
	}
}

// closed checks that the connection is closed, after any messages sent
// before the close (returned).
func (p *peer) closed() []msg {
	p.h.Helper()
	var got []msg
	for {
		m, err := p.receive(time.Minute)
		if errors.Is(err, uicontrol.ErrClosed) {
			return got
		}
		if err != nil {
			p.h.Fatalf("connection not closed: %v", err)
		}
		got = append(got, m)
	}
}

// response expects the response of type typ to request id and returns
// its payload.
func (p *peer) response(id, typ string) msg {
	p.h.Helper()
	m := p.next()
	if m["kind"] != "response" || m["type"] != typ || m["correlationId"] != id {
		p.h.Fatalf("want response %s to %s, got %v", typ, id, m)
	}
	return m["payload"].(msg)
}

// error expects an error answering the message id ("" for one whose id
// could not be read) with the code, and returns its payload.
func (p *peer) error(id string, code uicontrol.Code) msg {
	p.h.Helper()
	return checkError(p.h, p.next(), id, code)
}

func checkError(h *h, m msg, id string, code uicontrol.Code) msg {
	h.Helper()
	if m["kind"] != "error" || m["type"] != "error" {
		h.Fatalf("want error %s, got %v", code, m)
	}
	corr, has := m["correlationId"]
	if id == "" && has {
		h.Errorf("error has correlationId %v for a message without a readable id", corr)
	}
	if id != "" && corr != id {
		h.Errorf("error correlationId = %v, want %q", corr, id)
	}
	pl := m["payload"].(msg)
	if pl["code"] != string(code) {
		h.Fatalf("error code = %v (%v), want %s", pl["code"], pl["message"], code)
	}
	if _, ok := pl["message"].(string); !ok {
		h.Errorf("error without message: %v", pl)
	}
	if r, ok := pl["retryable"]; ok {
		if _, ok := r.(bool); !ok {
			h.Errorf("retryable is not a boolean: %v", pl)
		}
	}
	return pl
}

// initialize is a session.initialize payload offering what the suite's
// app supports.
func initialize() msg {
	return msg{
		"supportedVersions":   []any{"0.1"},
		"supportedProfiles":   []any{profileWeb},
		"supportedExtensions": []any{msg{"id": extPolicy, "versions": []any{"0.1"}}},
		"capabilityDelivery":  "deferred",
		"peer":                msg{"role": "agent", "name": "uiaptest"},
	}
}

// handshake initializes a session with payload and returns the
// session.initialized payload.
func (p *peer) handshake(payload msg) msg {
	p.h.Helper()
	id := p.request(uiapwire.TypeInitialize, payload)
	m := p.next()
	if m["kind"] != "response" || m["type"] != uiapwire.TypeInitialized || m["correlationId"] != id {
		p.h.Fatalf("want session.initialized, got %v", m)
	}
	pl := m["payload"].(msg)
	sid, _ := pl["sessionId"].(string)
	if sid == "" || m["sessionId"] != sid {
		p.h.Fatalf("session.initialized: sessionId %v in the envelope, %v in the payload", m["sessionId"], pl["sessionId"])
	}
	p.sessionID = sid
	return pl
}

// jsonEqual reports the difference between two JSON values (-want +got).
func jsonEqual(h *h, want, got any) string {
	h.Helper()
	norm := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			h.Fatal(err)
		}
		var out any
		_ = json.Unmarshal(b, &out)
		return out
	}
	return cmp.Diff(norm(want), norm(got))
}

func rawJSON(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	return v
}

// keys returns the sorted member names of an object.
func keys(m msg) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// The examples of §14, verbatim but for the profile ID (DESIGN §5).
const (
	specInitialize = `{
  "uiap": "0.1",
  "kind": "request",
  "type": "session.initialize",
  "id": "msg_1",
  "ts": "2026-03-26T13:00:00.000Z",
  "source": { "role": "agent", "id": "agent-runtime" },
  "payload": {
    "supportedVersions": ["0.1"],
    "supportedProfiles": ["web@0.1"],
    "supportedExtensions": [
      { "id": "uiap.policy", "versions": ["0.1"], "required": false }
    ],
    "capabilityDelivery": "deferred",
    "peer": {
      "role": "agent",
      "name": "onboarding-agent",
      "version": "0.1.0",
      "locale": "de-CH",
      "timezone": "Europe/Zurich"
    }
  }
}`
	specInitialized = `{
  "uiap": "0.1",
  "kind": "response",
  "type": "session.initialized",
  "id": "msg_2",
  "correlationId": "msg_1",
  "sessionId": "sess_123",
  "ts": "2026-03-26T13:00:00.040Z",
  "source": { "role": "app", "id": "videoland-app" },
  "payload": {
    "sessionId": "sess_123",
    "selectedVersion": "0.1",
    "selectedProfiles": ["web@0.1"],
    "selectedExtensions": [
      { "id": "uiap.policy", "version": "0.1" }
    ],
    "capabilityDelivery": "deferred",
    "heartbeatMs": 15000
  }
}`
)
