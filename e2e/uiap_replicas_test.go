package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
)

// uiapPeer is a hand-driven UIAP agent over ws@0.1: it sends envelopes it
// writes itself and reads the app's as JSON.
type uiapPeer struct {
	t   *testing.T
	tr  uicontrol.Transport
	n   int
	sid string
}

func dialUIAP(t *testing.T, ctx context.Context, srv *server, from string) *uiapPeer {
	t.Helper()
	tr, err := uicontrol.DialWS(ctx, strings.Replace(srv.URL, "http://", "ws://", 1)+"/uiap/ws?workflow=store", nil)
	if err != nil {
		t.Fatalf("dial %s: %v", srv.URL, err)
	}
	t.Cleanup(func() { tr.Close() })
	return &uiapPeer{t: t, tr: tr, n: len(from) * 1000}
}

type uiapMsg struct {
	Kind          string          `json:"kind"`
	Type          string          `json:"type"`
	ID            string          `json:"id"`
	CorrelationID string          `json:"correlationId"`
	SessionID     string          `json:"sessionId"`
	TS            string          `json:"ts"`
	Seq           int64           `json:"seq"`
	Payload       json.RawMessage `json:"payload"`
}

// request sends a request and returns its id.
func (p *uiapPeer) request(ctx context.Context, typ string, payload any, requires ...string) string {
	p.t.Helper()
	p.n++
	if payload == nil {
		payload = map[string]any{}
	}
	m := map[string]any{"uiap": "0.1", "kind": "request", "type": typ, "id": fmt.Sprintf("agent-%d", p.n),
		"ts": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "source": map[string]any{"role": "agent", "id": "e2e"}, "payload": payload}
	if p.sid != "" {
		m["sessionId"] = p.sid
	}
	if len(requires) > 0 {
		m["requires"] = requires
	}
	b, err := json.Marshal(m)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := p.tr.Send(ctx, b); err != nil {
		p.t.Fatalf("send %s: %v", typ, err)
	}
	return m["id"].(string)
}

func (p *uiapPeer) next(ctx context.Context) uiapMsg {
	p.t.Helper()
	b, err := p.tr.Receive(ctx)
	if err != nil {
		p.t.Fatalf("receive: %v", err)
	}
	var m uiapMsg
	if err := json.Unmarshal(b, &m); err != nil {
		p.t.Fatalf("%s: %v", b, err)
	}
	return m
}

// answer reads until the answer to request id and returns it with the
// events that came before it.
func (p *uiapPeer) answer(ctx context.Context, id string) (uiapMsg, []uiapMsg) {
	p.t.Helper()
	var events []uiapMsg
	for {
		m := p.next(ctx)
		if m.Kind == "event" {
			events = append(events, m)
			continue
		}
		if m.CorrelationID != id {
			p.t.Fatalf("answer to %s expected, got %+v %s", id, m, m.Payload)
		}
		return m, events
	}
}

// action runs an action to its action.result and returns the events it
// brought.
func (p *uiapPeer) action(ctx context.Context, actionID string, args any) []uiapMsg {
	p.t.Helper()
	id := p.request(ctx, "action.request", map[string]any{"actionId": actionID, "args": args}, "uiap.action")
	r, events := p.answer(ctx, id)
	var res struct {
		State string `json:"state"`
	}
	if r.Type != "action.result" || json.Unmarshal(r.Payload, &res) != nil || res.State != "SUCCEEDED" {
		p.t.Fatalf("%s: %s %s", actionID, r.Type, r.Payload)
	}
	return events
}

func errorCode(m uiapMsg) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(m.Payload, &e)
	return e.Code
}

// TestUIAP_8_2_ResumeOnAnotherReplica: two `agentry serve` replicas on
// one PostgreSQL. A UIAP session of the store workflow is opened on the
// first (ws@0.1), moves two stages on; the first is killed (SIGKILL);
// the agent resumes on the second with its resume token, claiming one
// event fewer than it got: session.resumed carries the same session and
// a new token, the event is replayed (same seq and ts, new id), the
// document and the workflow session are where they were, the next
// events are numbered on without a gap, and the used token is refused.
func TestUIAP_8_2_ResumeOnAnotherReplica(t *testing.T) {
	base := os.Getenv("AGENTRY_TEST_POSTGRES")
	if base == "" {
		t.Skip("AGENTRY_TEST_POSTGRES is not set; set it to a PostgreSQL URL to run this test")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	store := freshSchema(t, base, u.Host)
	first := startServer(t, "--store", store, "--data", t.TempDir(), "--tls-addr", "")
	second := startServer(t, "--store", store, "--data", t.TempDir(), "--tls-addr", "")
	checkUIAPResume(t, first, second)
	second.stop(t)
}

// checkUIAPResume opens a UIAP session on first and moves it on, kills
// first (SIGKILL), and resumes the session on second: it replays from
// lastSeq, keeps the capabilities' revision and the sequence, takes a
// fresh resume token (the old one is refused), and moves the same UAIP
// session on.
func checkUIAPResume(t *testing.T, first, second *server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	p := dialUIAP(t, ctx, first, "p")
	id := p.request(ctx, "session.initialize", map[string]any{"supportedVersions": []string{"0.1"},
		"supportedExtensions": []any{map[string]any{"id": "uiap.action", "versions": []string{"0.1"}}},
		"capabilityDelivery":  "deferred", "peer": map[string]any{"role": "agent", "name": "e2e"}})
	r, _ := p.answer(ctx, id)
	var init struct {
		SessionID   string `json:"sessionId"`
		ResumeToken string `json:"resumeToken"`
	}
	if r.Type != "session.initialized" || json.Unmarshal(r.Payload, &init) != nil || init.ResumeToken == "" {
		t.Fatalf("initialize: %s %s", r.Type, r.Payload)
	}
	p.sid = init.SessionID
	var events []uiapMsg
	events = append(events, p.action(ctx, "transition:cart", nil)...)
	events = append(events, p.action(ctx, "add_to_cart", map[string]any{"product_id": "SKU-003", "quantity": 2})...)
	for i, e := range events {
		if e.Seq != int64(i+1) || e.SessionID != init.SessionID {
			t.Fatalf("events on the first replica: %+v; want seq 1, 2, 3, …", events)
		}
	}
	last := events[len(events)-1]
	var changed struct {
		Revision string `json:"revision"`
	}
	for _, e := range events {
		if e.Type == "capabilities.changed" {
			_ = json.Unmarshal(e.Payload, &changed)
		}
	}
	if changed.Revision == "" {
		t.Fatalf("no capabilities.changed after a transition: %+v", events)
	}

	first.kill(t)

	q := dialUIAP(t, ctx, second, "q")
	id = q.request(ctx, "session.resume", map[string]any{"sessionId": init.SessionID, "resumeToken": init.ResumeToken, "lastSeq": last.Seq - 1})
	r = q.next(ctx)
	var resumed struct {
		SessionID       string `json:"sessionId"`
		SelectedVersion string `json:"selectedVersion"`
		ResumeToken     string `json:"resumeToken"`
	}
	if r.Type != "session.resumed" || r.CorrelationID != id || json.Unmarshal(r.Payload, &resumed) != nil ||
		resumed.SessionID != init.SessionID || resumed.SelectedVersion != "0.1" || resumed.ResumeToken == "" || resumed.ResumeToken == init.ResumeToken {
		t.Fatalf("resume on the second replica: %s %s\nfirst replica's log:\n%s", r.Type, r.Payload, first.output.String())
	}
	if replayed := q.next(ctx); replayed.Seq != last.Seq || replayed.TS != last.TS || replayed.Type != last.Type || replayed.ID == last.ID ||
		string(replayed.Payload) != string(last.Payload) {
		t.Errorf("replayed %+v, want a copy of %+v with a new id", replayed, last)
	}
	q.sid = init.SessionID
	id = q.request(ctx, "capabilities.get", nil)
	r, _ = q.answer(ctx, id)
	var list struct {
		Revision     string `json:"revision"`
		Capabilities struct {
			Workflow struct {
				SessionID string `json:"sessionId"`
				Stage     string `json:"stage"`
			} `json:"workflow"`
		} `json:"capabilities"`
	}
	if r.Type != "capabilities.list" || json.Unmarshal(r.Payload, &list) != nil || list.Revision != changed.Revision ||
		list.Capabilities.Workflow.Stage != "cart" {
		t.Errorf("capabilities on the second replica: %s %s; want revision %s at stage cart", r.Type, r.Payload, changed.Revision)
	}
	more := q.action(ctx, "state:input", map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}})
	more = append(more, q.action(ctx, "transition:checkout", nil)...)
	if len(more) == 0 {
		t.Fatal("no events on the second replica")
	}
	for i, e := range more {
		if e.Seq != last.Seq+int64(i+1) {
			t.Fatalf("events on the second replica: %+v; want seq %d, %d, …", more, last.Seq+1, last.Seq+2)
		}
	}
	s, err := second.client(httpClient(2)).Session(ctx, list.Capabilities.Workflow.SessionID)
	if err != nil || s.Stage != "checkout" || s.State["user.email"] != "ada@example.com" || s.State["cart"] == nil {
		t.Errorf("UAIP session on the second replica: %+v, %v", s, err)
	}

	x := dialUIAP(t, ctx, second, "x")
	id = x.request(ctx, "session.resume", map[string]any{"sessionId": init.SessionID, "resumeToken": init.ResumeToken})
	if r := x.next(ctx); r.Kind != "error" || r.CorrelationID != id || errorCode(r) != "permission_denied" {
		t.Errorf("resume with the used token: %s %s; want permission_denied", r.Type, r.Payload)
	}
	id = q.request(ctx, "session.terminate", map[string]any{"reason": "normal"})
	if r, _ := q.answer(ctx, id); r.Type != "session.terminated" {
		t.Errorf("terminate: %s %s", r.Type, r.Payload)
	}
}
