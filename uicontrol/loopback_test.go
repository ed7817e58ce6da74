package uicontrol_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
)

// These tests run the bindings over real loopback sockets (outside
// synctest): an App served by the binding's handler, an Agent dialling it,
// negotiating, reading and following capabilities, and resuming after the
// connection drops.

func loopbackApp(t *testing.T) *uicontrol.App {
	t.Helper()
	app := uicontrol.NewApp(&uicontrol.AppOptions{Profiles: []string{"web@0.1"}, ResumeWindow: time.Minute, Logger: discard})
	app.Handle("x.test.echo", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		return &uicontrol.Reply{Type: "x.test.echoed", Payload: req.Payload}, nil
	})
	if _, err := app.SetCapabilities(context.Background(), mustDecodeDoc(t, `{"actions":[{"id":"cart.add"}]}`), ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close() })
	return app
}

func mustDecodeDoc(t testing.TB, s string) *uicontrol.CapabilityDocument {
	t.Helper()
	d, err := uicontrol.DecodeCapabilityDocument([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eventLog records the events an agent processes.
type eventLog struct {
	mu  sync.Mutex
	got []string
}

func (l *eventLog) add(e *uicontrol.Envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fmt.Sprintf("%d:%s", e.Seq, e.Type))
}

func (l *eventLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = nil
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.got, " ")
}

// connectAndFollow connects an agent over tr and checks negotiation,
// capabilities.get and one capabilities.changed; it returns the agent and
// a pull iterator over its further changes.
func connectAndFollow(t *testing.T, app *uicontrol.App, tr uicontrol.Transport, log *eventLog) (*uicontrol.Agent, func() (*uicontrol.CapabilitiesChanged, error, bool)) {
	t.Helper()
	ctx := t.Context()
	a, err := uicontrol.Connect(ctx, tr, &uicontrol.AgentOptions{Profiles: []string{"web@0.1"}, OnEvent: log.add})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if info := a.Session(); info.Version != "0.1" || len(info.Profiles) != 1 || info.Profiles[0] != "web@0.1" {
		t.Fatalf("negotiated %+v", info)
	}
	caps, err := a.GetCapabilities(ctx)
	if err != nil {
		t.Fatalf("GetCapabilities: %v", err)
	}
	if _, rev := app.Capabilities(); caps.Revision != rev || string(caps.Capabilities.Actions) != `[{"id":"cart.add"}]` {
		t.Fatalf("capabilities.list: revision %q (app %q), actions %s", caps.Revision, rev, caps.Capabilities.Actions)
	}
	next, stop := iter.Pull2(a.Changes(ctx))
	t.Cleanup(stop)
	rev, err := app.SetCapabilities(ctx, mustDecodeDoc(t, `{"actions":[{"id":"checkout.pay"}]}`), "feature_flag")
	if err != nil {
		t.Fatal(err)
	}
	c, err, _ := next()
	if err != nil || c.Revision != rev || c.Reason != "feature_flag" || string(c.Capabilities.Actions) != `[{"id":"checkout.pay"}]` {
		t.Fatalf("capabilities.changed: %+v, %v", c, err)
	}
	r, err := a.Call(ctx, &uicontrol.Request{Type: "x.test.echo", Payload: map[string]any{"n": 1}})
	if err != nil || string(r.Payload) != `{"n":1}` {
		t.Fatalf("Call: %v, %v", r, err)
	}
	return a, next
}

// resumeAfterDrop emits events and a capability change while the
// connection is down, resumes over reconnect(), and checks that the
// agent gets them once each, in order: the events it has then processed
// are want.
func resumeAfterDrop(t *testing.T, app *uicontrol.App, a *uicontrol.Agent, next func() (*uicontrol.CapabilitiesChanged, error, bool), log *eventLog, want string, reconnect func() uicontrol.Transport) {
	t.Helper()
	ctx := t.Context()
	s := app.Session(a.Session().ID)
	eventually(t, "both sides INTERRUPTED", func() bool {
		return a.State() == uicontrol.StateInterrupted && s.State() == uicontrol.StateInterrupted
	})
	if err := s.Emit(ctx, "x.test.missed", nil); err != nil {
		t.Fatal(err)
	}
	rev, err := app.SetCapabilities(ctx, mustDecodeDoc(t, `{"actions":[{"id":"order.track"}]}`), "app_update")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Resume(ctx, reconnect()); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	c, err, _ := next()
	if err != nil || c.Revision != rev || string(c.Capabilities.Actions) != `[{"id":"order.track"}]` {
		t.Fatalf("change replayed after resume: %+v, %v", c, err)
	}
	eventually(t, "replayed events", func() bool { return strings.Contains(log.String(), "x.test.missed") })
	eventually(t, "the replayed change", func() bool { return log.String() == want })
	if _, err := a.Call(ctx, &uicontrol.Request{Type: "x.test.echo"}); err != nil {
		t.Errorf("Call after resume: %v", err)
	}
	if err := a.Terminate(ctx, "normal"); err != nil {
		t.Errorf("Terminate: %v", err)
	}
	eventually(t, "session forgotten", func() bool { return app.Session(s.ID()) == nil })
}

// connTracker is an http.Transport whose connections can be cut.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
	down  atomic.Bool // dialling fails
}

func (c *connTracker) client() *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if c.down.Load() {
			return nil, errors.New("network down")
		}
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
		}
		return conn, err
	}}}
}

// cut closes every connection at once (no WebSocket or HTTP goodbye).
func (c *connTracker) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func TestWS_Loopback(t *testing.T) {
	app := loopbackApp(t)
	srv := httptest.NewServer(uicontrol.NewWSHandler(app.Serve, &uicontrol.WSOptions{Logger: discard}))
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/uiap/ws"
	var net connTracker
	dial := func() uicontrol.Transport {
		tr, err := uicontrol.DialWS(t.Context(), url, &uicontrol.WSDialOptions{HTTPClient: net.client()})
		if err != nil {
			t.Fatalf("DialWS: %v", err)
		}
		return tr
	}
	var log eventLog
	a, next := connectAndFollow(t, app, dial(), &log)
	net.cut()
	resumeAfterDrop(t, app, a, next, &log, "1:capabilities.changed 2:x.test.missed 3:capabilities.changed", dial)
}

func TestHTTP_Loopback(t *testing.T) {
	app := loopbackApp(t)
	// The idle timeout is far beyond the reopening of a broken stream
	// (milliseconds on loopback), even on a loaded machine, and is waited
	// out once, below, when the network stays down.
	h := uicontrol.NewHTTPHandler(app.Serve, &uicontrol.HTTPOptions{IdleTimeout: 3 * time.Second, Logger: discard})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); _ = h.Close() })
	var net connTracker
	dial := func() uicontrol.Transport {
		tr, err := uicontrol.DialHTTP(t.Context(), srv.URL+"/uiap", &uicontrol.HTTPDialOptions{HTTPClient: net.client()})
		if err != nil {
			t.Fatalf("DialHTTP: %v", err)
		}
		return tr
	}
	var log eventLog
	a, next := connectAndFollow(t, app, dial(), &log)
	s := app.Session(a.Session().ID)

	// A broken event stream is reopened with Last-Event-ID: the session
	// does not notice, and nothing is lost or repeated.
	for i := range 3 {
		net.cut()
		if err := s.Emit(t.Context(), "x.test.tick", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "ticks", func() bool { return strings.Count(log.String(), "x.test.tick") == 3 })
	if got, want := log.String(), "1:capabilities.changed 2:x.test.tick 3:x.test.tick 4:x.test.tick"; got != want {
		t.Errorf("events across stream breaks: %q, want %q", got, want)
	}
	if a.State() != uicontrol.StateActive || s.State() != uicontrol.StateActive {
		t.Fatalf("after stream breaks: agent %v, app %v", a.State(), s.State())
	}
	if _, err := a.Call(t.Context(), &uicontrol.Request{Type: "x.test.echo"}); err != nil {
		t.Fatalf("Call after stream breaks: %v", err)
	}

	// A network down for longer than the handler's idle timeout loses
	// the connection: the session is resumed over a new one.
	log.reset()
	net.down.Store(true)
	net.cut()
	resumeAfterDrop(t, app, a, next, &log, "5:x.test.missed 6:capabilities.changed", func() uicontrol.Transport {
		net.down.Store(false)
		return dial()
	})
}
