package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
)

// nodeWithWebSocket returns the command prefix running Node.js with a
// global WebSocket (Node 22+, or 20/21 with --experimental-websocket), or
// skips.
func nodeWithWebSocket(t *testing.T) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed: web/uiap.js is tested in a browser by e2e/browser_test.go")
	}
	for _, args := range [][]string{{node}, {node, "--experimental-websocket"}} {
		out, err := exec.Command(args[0], append(args[1:], "-e", "process.stdout.write(typeof WebSocket)")...).Output()
		if err == nil && string(out) == "function" {
			return args
		}
	}
	t.Skip("this Node.js has no WebSocket")
	return nil
}

// rawPeer is the agent end of a connection to uiap.js, speaking raw JSON.
type rawPeer struct {
	t  *testing.T
	tr uicontrol.Transport
	n  atomic.Int64
}

type msg = map[string]any

func (p *rawPeer) id() string { return fmt.Sprintf("m-%d", p.n.Add(1)) }

// send sends m with the envelope defaults filled in and returns its id.
func (p *rawPeer) send(m msg) string {
	p.t.Helper()
	full := msg{"uiap": "0.1", "kind": "request", "id": p.id(), "ts": "2026-11-22T14:00:00.000Z",
		"source": msg{"role": "agent", "id": "raw"}, "payload": msg{}}
	for k, v := range m {
		if v == nil {
			delete(full, k)
		} else {
			full[k] = v
		}
	}
	b, _ := json.Marshal(full)
	p.sendRaw(string(b))
	id, _ := full["id"].(string)
	return id
}

func (p *rawPeer) sendRaw(s string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a safety net: node is slow on a loaded machine
	defer cancel()
	if err := p.tr.Send(ctx, []byte(s)); err != nil {
		p.t.Fatalf("send: %v", err)
	}
}

func (p *rawPeer) recv() msg {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a safety net: node is slow on a loaded machine
	defer cancel()
	b, err := p.tr.Receive(ctx)
	if err != nil {
		p.t.Fatalf("receive: %v", err)
	}
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		p.t.Fatalf("app sent %q: %v", b, err)
	}
	for _, f := range []string{"uiap", "kind", "type", "id", "ts", "source", "payload"} {
		if m[f] == nil {
			p.t.Fatalf("app's message lacks %s: %s", f, b)
		}
	}
	return m
}

// expectError receives an error answering id with code.
func (p *rawPeer) expectError(id, code string) msg {
	p.t.Helper()
	m := p.recv()
	pl, _ := m["payload"].(map[string]any)
	if m["kind"] != "error" || m["type"] != "error" || pl["code"] != code {
		p.t.Fatalf("want error %s for %s, got %v", code, id, m)
	}
	if id == "" {
		if _, ok := m["correlationId"]; ok {
			p.t.Fatalf("error for an unreadable id has a correlationId: %v", m)
		}
	} else if m["correlationId"] != id {
		p.t.Fatalf("error correlationId = %v, want %s", m["correlationId"], id)
	}
	return pl
}

func (p *rawPeer) expect(kind, typ, corr string) msg {
	p.t.Helper()
	m := p.recv()
	if m["kind"] != kind || m["type"] != typ || (corr != "" && m["correlationId"] != corr) {
		p.t.Fatalf("want %s %s (correlationId %q), got %v", kind, typ, corr, m)
	}
	pl, _ := m["payload"].(map[string]any)
	return pl
}

// startJSApp runs web/testdata/app.mjs (web/uiap.js on Node.js) and
// returns the raw agent end of the WebSocket it dials.
func startJSApp(t *testing.T) *rawPeer {
	node := nodeWithWebSocket(t)
	conns := make(chan uicontrol.Transport, 1)
	done := make(chan struct{})
	srv := httptest.NewServer(uicontrol.NewWSHandler(func(ctx context.Context, tr uicontrol.Transport) error {
		conns <- tr
		select {
		case <-done:
		case <-ctx.Done():
		}
		return nil
	}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node[0], append(node[1:], "testdata/app.mjs", "ws"+strings.TrimPrefix(srv.URL, "http"))...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(done)
		cancel()
		_ = cmd.Wait()
		srv.Close()
		if t.Failed() {
			t.Logf("node output:\n%s", out.String())
		}
	})
	select {
	case tr := <-conns:
		return &rawPeer{t: t, tr: tr}
	case <-time.After(15 * time.Second):
		t.Fatalf("uiap.js did not connect:\n%s", out.String())
	}
	return nil
}

func initialize(p *rawPeer) (sessionID string, payload msg) {
	p.t.Helper()
	id := p.send(msg{"type": "session.initialize", "payload": msg{
		"supportedVersions":   []string{"0.1"},
		"supportedProfiles":   []string{"web@0.1"},
		"supportedExtensions": []msg{{"id": "uiap.action", "versions": []string{"0.1"}}},
		"capabilityDelivery":  "deferred",
	}})
	pl := p.expect("response", "session.initialized", id)
	sid, _ := pl["sessionId"].(string)
	if sid == "" || pl["selectedVersion"] != "0.1" {
		p.t.Fatalf("initialized: %v", pl)
	}
	return sid, pl
}

// uiap.js answers the handshake, capabilities, actions, ping and
// terminate as UIAP Core 0.1 and our decisions require, and is strict
// about envelopes.
func TestUIAPJS_AppSide(t *testing.T) {
	p := startJSApp(t)

	// §7: nothing but session messages before the handshake.
	id := p.send(msg{"type": "capabilities.get"})
	p.expectError(id, "session_not_active")
	pong := p.expect("response", "session.pong", p.send(msg{"type": "session.ping", "payload": msg{"nonce": "n0"}}))
	if pong["nonce"] != "n0" {
		t.Fatalf("pong: %v", pong)
	}
	// §8.1: no common version; a required extension not supported.
	id = p.send(msg{"type": "session.initialize", "payload": msg{"supportedVersions": []string{"9.9"}}})
	if pl := p.expectError(id, "unsupported_version"); fmt.Sprint(pl["details"]) != "map[supportedVersions:[0.1]]" {
		t.Fatalf("details: %v", pl["details"])
	}
	id = p.send(msg{"type": "session.initialize", "payload": msg{"supportedVersions": []string{"0.1"},
		"supportedExtensions": []msg{{"id": "x.nope", "versions": []string{"1"}, "required": true}}}})
	p.expectError(id, "unsupported_extension")

	// §4: envelope strictness (before the session too).
	for _, f := range []string{"uiap", "kind", "type", "ts", "source", "payload"} {
		id := p.send(msg{"type": "session.ping", f: nil})
		pl := p.expectError(id, "invalid_message")
		if d, _ := pl["details"].(map[string]any); d["field"] != f {
			t.Fatalf("missing %s: details %v", f, pl["details"])
		}
	}
	p.send(msg{"type": "session.ping", "id": nil})
	p.expectError("", "invalid_message")
	p.send(msg{"type": "session.ping", "id": strings.Repeat("x", 129)})
	p.expectError("", "invalid_message")
	for _, bad := range []any{[]any{}, "x", 1} {
		id := p.send(msg{"type": "session.ping", "payload": bad})
		p.expectError(id, "invalid_message")
	}
	id = p.send(msg{"kind": "response", "type": "x.done"})
	p.expectError(id, "invalid_message") // response without correlationId
	p.sendRaw(`[1,2]`)
	p.expectError("", "invalid_message")
	p.sendRaw(`{"uiap":"0.1",`)
	p.expectError("", "invalid_message")

	sid, pl := initialize(p)
	if fmt.Sprint(pl["selectedExtensions"]) != "[map[id:uiap.action version:0.1]]" || pl["capabilityDelivery"] != "deferred" || pl["capabilities"] != nil {
		t.Fatalf("initialized: %v", pl)
	}
	// duplicate id
	dup := p.send(msg{"type": "session.ping", "sessionId": sid})
	p.expect("response", "session.pong", dup)
	p.send(msg{"type": "session.ping", "id": dup})
	p.expectError(dup, "invalid_message")
	// second initialize, uiap mismatch, foreign session, unknown type
	p.expectError(p.send(msg{"type": "session.initialize", "payload": msg{"supportedVersions": []string{"0.1"}}}), "state_conflict")
	p.expectError(p.send(msg{"type": "session.ping", "uiap": "0.2"}), "unsupported_version")
	p.expectError(p.send(msg{"type": "session.ping", "sessionId": "other"}), "unknown_session")
	p.expectError(p.send(msg{"type": "x.unknown"}), "unknown_message_type")
	p.expectError(p.send(msg{"type": "x.unknown", "requires": []string{"x.ext"}}), "unsupported_extension")

	// §9: capabilities.get with include filtering.
	id = p.send(msg{"type": "capabilities.get", "payload": msg{"include": []string{"roles", "nope"}}})
	caps := p.expect("response", "capabilities.list", id)
	rev, _ := caps["revision"].(string)
	if rev == "" || fmt.Sprint(caps["capabilities"]) != "map[roles:[tester]]" {
		t.Fatalf("capabilities.list: %v", caps)
	}
	p.expectError(p.send(msg{"type": "capabilities.get", "payload": msg{"include": "roles"}}), "invalid_message")

	// Actions: started → progress → result, all with requestId.
	id = p.send(msg{"type": "action.request", "requires": []string{"uiap.action"}, "payload": msg{"actionId": "slow", "args": msg{"ms": 20}}})
	started := p.expect("event", "action.started", "")
	if started["requestId"] != id || started["actionId"] != "slow" || started["state"] != "EXECUTING" {
		t.Fatalf("started: %v", started)
	}
	prog := p.expect("event", "action.progress", "")
	if prog["requestId"] != id || prog["progress"] != 0.5 || prog["message"] != "half" {
		t.Fatalf("progress: %v", prog)
	}
	res := p.expect("response", "action.result", id)
	if res["requestId"] != id || res["state"] != "SUCCEEDED" || fmt.Sprint(res["result"]) != "map[done:true]" {
		t.Fatalf("result: %v", res)
	}
	id = p.send(msg{"type": "action.request", "payload": msg{"actionId": "fail"}})
	p.expect("event", "action.started", "")
	res = p.expect("response", "action.result", id)
	if e, _ := res["error"].(map[string]any); res["state"] != "FAILED" || e["code"] != "bad_request" {
		t.Fatalf("failed action: %v", res)
	}
	id = p.send(msg{"type": "action.request", "payload": msg{"actionId": "crash"}})
	p.expect("event", "action.started", "")
	res = p.expect("response", "action.result", id)
	if e, _ := res["error"].(map[string]any); e["code"] != "internal_error" || e["message"] != "internal error" {
		t.Fatalf("crashed action: %v", res)
	}
	if pl := p.expectError(p.send(msg{"type": "action.request", "payload": msg{"actionId": "fly"}}), "capability_unavailable"); fmt.Sprint(pl["details"]) != "map[actionId:fly]" {
		t.Fatalf("details: %v", pl["details"])
	}
	p.expectError(p.send(msg{"type": "action.request", "payload": msg{"actionId": "echo", "args": []int{1}}}), "invalid_message")
	p.expectError(p.send(msg{"type": "action.request", "payload": msg{}}), "invalid_message")
	// cancel: the answer, then a CANCELLED result
	id = p.send(msg{"type": "action.request", "payload": msg{"actionId": "slow", "args": msg{"ms": 10000}}})
	p.expect("event", "action.started", "")
	p.expect("event", "action.progress", "")
	cid := p.send(msg{"type": "action.cancel", "payload": msg{"requestId": id}})
	if ack := p.expect("response", "action.cancelled", cid); ack["requestId"] != id {
		t.Fatalf("cancelled: %v", ack)
	}
	if res := p.expect("response", "action.result", id); res["state"] != "CANCELLED" {
		t.Fatalf("cancelled result: %v", res)
	}

	// publish → capabilities.changed (new revision, full document), signal → event; seq increases.
	id = p.send(msg{"type": "action.request", "payload": msg{"actionId": "publish"}})
	var lastSeq float64
	for _, want := range []string{"action.started", "capabilities.changed", "test.signal"} {
		m := p.recv()
		if m["kind"] != "event" || m["type"] != want || m["sessionId"] != sid {
			t.Fatalf("want event %s, got %v", want, m)
		}
		seq, _ := m["seq"].(float64)
		if seq <= lastSeq {
			t.Fatalf("seq %v after %v", seq, lastSeq)
		}
		lastSeq = seq
		if want == "capabilities.changed" {
			pl := m["payload"].(map[string]any)
			if pl["revision"] == rev || pl["reason"] != "test" || fmt.Sprint(pl["capabilities"]) != "map[actions:[map[id:echo]] roles:[tester]]" {
				t.Fatalf("changed: %v", pl)
			}
		}
	}
	p.expect("response", "action.result", id)

	// §8.5: terminate, then the connection closes.
	id = p.send(msg{"type": "session.terminate", "payload": msg{"reason": "done"}})
	if pl := p.expect("response", "session.terminated", id); pl["reason"] != "done" {
		t.Fatalf("terminated: %v", pl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a safety net: node is slow on a loaded machine
	defer cancel()
	if b, err := p.tr.Receive(ctx); err == nil {
		t.Fatalf("after terminate the app sent %s", b)
	}
}
