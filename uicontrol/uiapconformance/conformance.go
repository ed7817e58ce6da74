// Package conformance is a black-box conformance suite for apps of the
// UI Control Protocol, UIAP Core 0.1 (uiap.dev), ours or
// anyone else's: Run connects to an app endpoint over the ws@0.1 binding
// as an agent would, sends hand-written envelopes — well-formed and not —
// and returns a Report with one Result per check, each named after the
// spec section it tests.
//
// What it checks: the handshake (§8: session.initialized answers
// session.initialize with its correlationId, the selected version and a
// session id), version negotiation without a common version
// (unsupported_version), nothing but session messages before the
// handshake, the envelope rules of §5 (a missing required field, a
// payload that is not an object, a uiap version other than the
// selected one, a duplicate id — each an error correlated to the
// request), an unknown message type (unknown_message_type),
// capabilities.get with include (only the sections asked for), ping/pong
// with the nonce echoed, a second session.initialize on an active
// session (state_conflict), an invalid resume token — over the
// connection of an interrupted session and for an unknown session —
// answered with unknown_session or permission_denied (§8.2), exactly one
// answer to every request before the handshake, while ACTIVE and while
// INTERRUPTED (§5, §10 rule 1), and silence after session.terminated.
// Where the spec names no error code the suite accepts any error
// correlated to the offending request.
package uiapconformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/conformance"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

// Options configures Run. URL is required.
type Options struct {
	// URL is the app's ws@0.1 endpoint, ws:// or wss://.
	URL string
	// Header is sent with each WebSocket handshake (e.g. Authorization).
	Header http.Header
	// Timeout bounds each check; default 10 s.
	Timeout time.Duration
}

// result is the outcome of one check: conformance.Result, the type the
// three conformance kits share.
type result = conformance.Result

// Report is the outcome of a run.
type Report struct {
	URL string `json:"url"`
	// Results lists the checks (Passed, Failed, Skipped, Find). This kit
	// runs every check (one it cannot complete fails): none is skipped.
	conformance.Results `json:"results"`
}

// check is one conformance check: it returns "" when the app behaved, or
// what it did instead.
type check struct {
	name, clause, expectation string
	run                       func(ctx context.Context, c *conn) string
}

// Run runs every check against the app at opts.URL.
func Run(ctx context.Context, options *Options) (*Report, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	if !strings.HasPrefix(opts.URL, "ws://") && !strings.HasPrefix(opts.URL, "wss://") {
		return nil, fmt.Errorf("conformance: %q is not a ws:// or wss:// URL", opts.URL)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	rep := &Report{URL: opts.URL}
	for _, c := range checks {
		r := result{Name: c.name, Clause: c.clause, Expectation: c.expectation}
		cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		t, err := uicontrol.DialWS(cctx, opts.URL, &uicontrol.WSDialOptions{Header: opts.Header})
		if err != nil {
			r.Got = "cannot connect: " + err.Error()
		} else {
			r.Got = c.run(cctx, &conn{t: t})
			t.Close()
		}
		cancel()
		r.Passed = r.Got == ""
		rep.Results = append(rep.Results, r)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}

// conn is one connection with the helpers the checks share.
type conn struct {
	t       uicontrol.Transport
	session string
}

// msg is what the suite reads of an envelope.
type msg struct {
	UIAP          string          `json:"uiap"`
	Kind          string          `json:"kind"`
	Type          string          `json:"type"`
	ID            string          `json:"id"`
	SessionID     string          `json:"sessionId"`
	CorrelationID string          `json:"correlationId"`
	Payload       json.RawMessage `json:"payload"`
}

func (m *msg) String() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// envelope returns a request envelope of type typ with payload, as a
// map so that checks can break it.
func (c *conn) envelope(typ string, payload any) map[string]any {
	e := map[string]any{"uiap": "0.1", "kind": "request", "type": typ, "id": ids.New(),
		"ts": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "source": map[string]any{"role": "agent", "id": "uiap-conformance"},
		"payload": payload}
	if c.session != "" {
		e["sessionId"] = c.session
	}
	return e
}

func (c *conn) send(ctx context.Context, e map[string]any) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return c.t.Send(ctx, b)
}

// reply reads until the response or error correlated to id, skipping
// events; it returns nil and a reason when none comes.
func (c *conn) reply(ctx context.Context, id string) (*msg, string) {
	for {
		b, err := c.t.Receive(ctx)
		if err != nil {
			return nil, "no answer to " + id + ": " + err.Error()
		}
		var m msg
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Sprintf("the app sent something that is not JSON: %q", b)
		}
		if m.Kind == "event" {
			continue
		}
		if m.CorrelationID == id {
			return &m, ""
		}
	}
}

// request sends e and returns its answer.
func (c *conn) request(ctx context.Context, e map[string]any) (*msg, string) {
	if err := c.send(ctx, e); err != nil {
		return nil, fmt.Sprintf("%s: cannot send: %v", e["type"], err)
	}
	m, why := c.reply(ctx, e["id"].(string))
	if m == nil {
		why = fmt.Sprintf("%s: %s", e["type"], why)
	}
	return m, why
}

func initialize(versions ...string) map[string]any {
	return map[string]any{"supportedVersions": versions, "supportedExtensions": []any{},
		"peer": map[string]any{"role": "agent", "name": "uiap-conformance", "version": "0.1"}}
}

// handshake opens a session; it returns what went wrong, or "".
func (c *conn) handshake(ctx context.Context) string {
	m, why := c.request(ctx, c.envelope(uiapwire.TypeInitialize, initialize("0.1")))
	if m == nil {
		return why
	}
	var p struct {
		SessionID       string `json:"sessionId"`
		SelectedVersion string `json:"selectedVersion"`
	}
	if m.Kind != "response" || m.Type != uiapwire.TypeInitialized || json.Unmarshal(m.Payload, &p) != nil || p.SessionID == "" || p.SelectedVersion != "0.1" {
		return "the handshake was answered with " + m.String()
	}
	c.session = p.SessionID
	return ""
}

// wantError checks that m is an error (with code, when code is not "").
func wantError(m *msg, why string, codes ...string) string {
	if m == nil {
		return why
	}
	if m.Kind != "error" {
		return "answered with " + m.String()
	}
	if len(codes) == 0 {
		return ""
	}
	var p struct {
		Code string `json:"code"`
	}
	json.Unmarshal(m.Payload, &p)
	for _, c := range codes {
		if p.Code == c {
			return ""
		}
	}
	return fmt.Sprintf("error code %q, want %s: %s", p.Code, strings.Join(codes, " or "), m)
}

// wantResponse checks that m is a response of type typ.
func wantResponse(m *msg, why, typ string) string {
	if m == nil {
		return why
	}
	if m.Kind != "response" || m.Type != typ {
		return "answered with " + m.String() + ", want " + typ
	}
	return ""
}

// interrupt interrupts the session (§8.3); it returns what went wrong,
// or "".
func (c *conn) interrupt(ctx context.Context) string {
	m, why := c.request(ctx, c.envelope(uiapwire.TypeInterrupt, map[string]any{"reason": "conformance"}))
	if why := wantResponse(m, why, uiapwire.TypeInterrupted); why != "" {
		return "session.interrupt: " + why
	}
	return ""
}

// invalidResume is a session.resume of session id with a token no app
// issued.
func (c *conn) invalidResume(id string) map[string]any {
	return c.envelope(uiapwire.TypeResume, map[string]any{"sessionId": id, "resumeToken": "uiap-conformance-invalid-" + ids.New()})
}

// exchange is one request of a onePerRequest run and what its answer
// must be: a response of typ, an error (with one of codes, if any), or
// (neither) any answer.
type exchange struct {
	what  string
	req   map[string]any
	typ   string
	error bool
	codes []string
}

// onePerRequest sends each request in turn and checks that it gets its
// answer, and that no request already answered is answered again (a
// session.ping sent last, answered last, flushes what came after).
func (c *conn) onePerRequest(ctx context.Context, state string, xs []exchange) string {
	answered := map[string]bool{}
	flush := c.envelope(uiapwire.TypePing, map[string]any{"nonce": "uiap-conformance-flush"})
	xs = append(xs, exchange{what: "session.ping", req: flush})
	for _, x := range xs {
		id := x.req["id"].(string)
		if err := c.send(ctx, x.req); err != nil {
			return state + ": cannot send " + x.what + ": " + err.Error()
		}
		var m *msg
		for m == nil {
			b, err := c.t.Receive(ctx)
			if err != nil {
				return state + ": no answer to " + x.what + " (" + id + "): " + err.Error()
			}
			var got msg
			if err := json.Unmarshal(b, &got); err != nil {
				return fmt.Sprintf("%s: the app sent something that is not JSON: %q", state, b)
			}
			switch {
			case got.Kind != "response" && got.Kind != "error":
				// events, and requests of the app (a heartbeat's ping)
			case answered[got.CorrelationID]:
				return state + ": a request was answered twice: " + got.String()
			case got.CorrelationID == id:
				m = &got
			}
		}
		answered[id] = true
		var why string
		switch {
		case x.typ != "":
			why = wantResponse(m, "", x.typ)
		case x.error:
			why = wantError(m, "", x.codes...)
		}
		if why != "" {
			return state + ": " + x.what + ": " + why
		}
	}
	return ""
}

var checks = []check{
	{"session/handshake", "§8", "session.initialized answers session.initialize: correlationId, selectedVersion 0.1, a sessionId",
		func(ctx context.Context, c *conn) string { return c.handshake(ctx) }},
	{"session/no-common-version", "§8", "an offer without a supported version is refused with unsupported_version",
		func(ctx context.Context, c *conn) string {
			m, why := c.request(ctx, c.envelope(uiapwire.TypeInitialize, initialize("9.9")))
			return wantError(m, why, "unsupported_version")
		}},
	{"session/nothing-before-handshake", "§7", "a non-session request before the handshake is refused",
		func(ctx context.Context, c *conn) string {
			m, why := c.request(ctx, c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{}))
			return wantError(m, why, "session_not_active", "state_conflict")
		}},
	{"envelope/missing-field", "§5", "an envelope without ts is refused with invalid_message",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			e := c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{})
			delete(e, "ts")
			m, why := c.request(ctx, e)
			return wantError(m, why, "invalid_message")
		}},
	{"envelope/payload-not-object", "§5", "a payload that is an array is refused with invalid_message",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			m, why := c.request(ctx, c.envelope(uiapwire.TypeCapabilitiesGet, []any{}))
			return wantError(m, why, "invalid_message")
		}},
	{"envelope/version-mismatch", "§5", "after the handshake, an envelope whose uiap is not the selected version is refused",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			e := c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{})
			e["uiap"] = "0.2"
			m, why := c.request(ctx, e)
			return wantError(m, why)
		}},
	{"envelope/duplicate-id", "§5", "a second message with an id already used in the session is refused",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			e := c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{})
			if m, why := c.request(ctx, e); m == nil || m.Kind != "response" {
				return "the first request: " + why + fmt.Sprint(m)
			}
			m, why := c.request(ctx, e)
			return wantError(m, why)
		}},
	{"envelope/unknown-type", "§5", "an unknown request type is refused with unknown_message_type",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			m, why := c.request(ctx, c.envelope("x.conformance.nothing", map[string]any{}))
			return wantError(m, why, "unknown_message_type")
		}},
	{"capabilities/include", "§9", "capabilities.get with include returns capabilities.list with only those sections",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			m, why := c.request(ctx, c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{"include": []string{"actions"}}))
			if m == nil {
				return why
			}
			var p struct {
				Capabilities map[string]json.RawMessage `json:"capabilities"`
			}
			if m.Type != uiapwire.TypeCapabilitiesList || json.Unmarshal(m.Payload, &p) != nil {
				return "answered with " + m.String()
			}
			for k := range p.Capabilities {
				if k != "actions" {
					return "section " + k + " was not asked for: " + m.String()
				}
			}
			return ""
		}},
	{"session/ping-pong", "§8", "session.ping is answered by session.pong echoing its nonce",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			m, why := c.request(ctx, c.envelope(uiapwire.TypePing, map[string]any{"nonce": "conformance-42"}))
			if m == nil {
				return why
			}
			if m.Type != uiapwire.TypePong || !strings.Contains(string(m.Payload), `"conformance-42"`) {
				return "answered with " + m.String()
			}
			return ""
		}},
	{"session/second-initialize", "§7", "session.initialize on an active session is refused with state_conflict",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			m, why := c.request(ctx, c.envelope(uiapwire.TypeInitialize, initialize("0.1")))
			return wantError(m, why, "state_conflict")
		}},
	{"session/resume-invalid-token", "§8.2", "session.resume of the interrupted session over its own connection with an invalid resumeToken is answered with unknown_session or permission_denied",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			if why := c.interrupt(ctx); why != "" {
				return why
			}
			m, why := c.request(ctx, c.invalidResume(c.session))
			return wantError(m, why, "unknown_session", "permission_denied")
		}},
	{"session/resume-unknown-session", "§8.2", "session.resume of a session the app does not know is answered with unknown_session or permission_denied",
		func(ctx context.Context, c *conn) string {
			m, why := c.request(ctx, c.invalidResume("uiap-conformance-"+ids.New()))
			return wantError(m, why, "unknown_session", "permission_denied")
		}},
	{"errors/one-answer-per-request", "§5, §10", "every request is answered by exactly one response or error: before the handshake, while ACTIVE and while INTERRUPTED",
		func(ctx context.Context, c *conn) string {
			resumeCodes := []string{"unknown_session", "permission_denied"}
			if why := c.onePerRequest(ctx, "before the handshake", []exchange{
				{what: "session.ping", req: c.envelope(uiapwire.TypePing, map[string]any{})},
				{what: "capabilities.get", req: c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{}), error: true},
				{what: "an unknown request type", req: c.envelope("x.conformance.nothing", map[string]any{}), error: true},
				{what: "session.interrupt", req: c.envelope(uiapwire.TypeInterrupt, map[string]any{}), error: true},
				{what: "session.terminate", req: c.envelope(uiapwire.TypeTerminate, map[string]any{}), error: true},
				{what: "session.resume of an unknown session", req: c.invalidResume("uiap-conformance-" + ids.New()), error: true, codes: resumeCodes},
			}); why != "" {
				return why
			}
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			notObject := c.envelope(uiapwire.TypeCapabilitiesGet, []any{})
			if why := c.onePerRequest(ctx, "ACTIVE", []exchange{
				{what: "session.ping", req: c.envelope(uiapwire.TypePing, map[string]any{}), typ: uiapwire.TypePong},
				{what: "capabilities.get", req: c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{}), typ: uiapwire.TypeCapabilitiesList},
				{what: "an unknown request type", req: c.envelope("x.conformance.nothing", map[string]any{}), error: true, codes: []string{"unknown_message_type"}},
				{what: "an unknown session.* request", req: c.envelope("session.conformance-nothing", map[string]any{}), error: true},
				{what: "a payload that is not an object", req: notObject, error: true, codes: []string{"invalid_message"}},
				{what: "session.initialize", req: c.envelope(uiapwire.TypeInitialize, initialize("0.1")), error: true},
				{what: "session.resume of the active session", req: c.invalidResume(c.session), error: true},
			}); why != "" {
				return why
			}
			if why := c.interrupt(ctx); why != "" {
				return why
			}
			if why := c.onePerRequest(ctx, "INTERRUPTED", []exchange{
				{what: "session.ping", req: c.envelope(uiapwire.TypePing, map[string]any{}), typ: uiapwire.TypePong},
				{what: "capabilities.get", req: c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{}), error: true},
				{what: "an unknown request type", req: c.envelope("x.conformance.nothing", map[string]any{}), error: true},
				{what: "session.interrupt", req: c.envelope(uiapwire.TypeInterrupt, map[string]any{})},
				{what: "session.initialize", req: c.envelope(uiapwire.TypeInitialize, initialize("0.1")), error: true},
				{what: "session.resume with an invalid token", req: c.invalidResume(c.session), error: true, codes: resumeCodes},
				{what: "session.resume of an unknown session", req: c.invalidResume("uiap-conformance-" + ids.New()), error: true, codes: resumeCodes},
			}); why != "" {
				return why
			}
			m, why := c.request(ctx, c.envelope(uiapwire.TypeTerminate, map[string]any{}))
			if why := wantResponse(m, why, uiapwire.TypeTerminated); why != "" {
				return "INTERRUPTED: session.terminate: " + why
			}
			return ""
		}},
	{"session/terminate-then-silence", "§7", "session.terminate is answered by session.terminated; after it nothing is processed",
		func(ctx context.Context, c *conn) string {
			if why := c.handshake(ctx); why != "" {
				return "handshake: " + why
			}
			m, why := c.request(ctx, c.envelope(uiapwire.TypeTerminate, map[string]any{"reason": "done"}))
			if m == nil {
				return why
			}
			if m.Type != uiapwire.TypeTerminated {
				return "answered with " + m.String()
			}
			short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			if m, _ := c.request(short, c.envelope(uiapwire.TypeCapabilitiesGet, map[string]any{})); m != nil {
				return "a request after session.terminated was answered: " + m.String()
			}
			return ""
		}},
}
