package uicontrol_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiaptest"
)

// wsPipeChunks is the in-memory socket buffer of the WebSocket tests, in
// KiB: enough for the suite's 30 requests sent before their answers are
// read, too little for its 200 events that must get a connection stuck.
const wsPipeChunks = 16

// wsPair connects the two ends of a ws@0.1 connection in memory: the
// agent end dials a NewWSHandler over net.Pipe.
func wsPair(t *testing.T) (app, agent uicontrol.Transport) {
	got := make(chan uicontrol.Transport, 1)
	release := make(chan struct{})
	h := uicontrol.NewWSHandler(func(ctx context.Context, tr uicontrol.Transport) error {
		got <- tr
		<-release // the suite serves the app end; keep the handler until the case ends
		return nil
	}, nil)
	s := newMemServer(t, h, wsPipeChunks)
	t.Cleanup(func() { close(release) })
	agent, err := uicontrol.DialWS(context.Background(), "ws://mem/uiap/ws", &uicontrol.WSDialOptions{HTTPClient: s.client})
	if err != nil {
		t.Fatalf("DialWS: %v", err)
	}
	return <-got, agent
}

// TestUIAP_WS runs the conformance suite over the ws@0.1 binding.
func TestUIAP_WS(t *testing.T) {
	uiaptest.Run(t, wsPair)
}

// wsServer serves NewWSHandler(serve, opts) in memory and returns a dial
// function for it; serve's transports are passed on got.
func wsServer(t *testing.T, opts *uicontrol.WSOptions) (s *memServer, got chan uicontrol.Transport) {
	got = make(chan uicontrol.Transport, 4)
	release := make(chan struct{})
	if opts == nil {
		opts = &uicontrol.WSOptions{}
	}
	opts.Logger = discard
	s = newMemServer(t, uicontrol.NewWSHandler(func(ctx context.Context, tr uicontrol.Transport) error {
		got <- tr
		<-release
		return nil
	}, opts), wsPipeChunks)
	t.Cleanup(func() { close(release) })
	return s, got
}

// Cross-origin browser connections are refused unless allowed; clients
// that send no Origin, and same-origin pages, are served.
func TestWS_OriginChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			patterns []string
			origin   string
			ok       bool
		}{
			{nil, "", true},
			{nil, "http://mem", true},
			{nil, "https://evil.example", false},
			{nil, "null", false},
			{[]string{"shop.example"}, "https://shop.example", true},
			{[]string{"shop.example"}, "https://evil.example", false},
			{[]string{"https://*.shop.example"}, "https://eu.shop.example", true},
			{[]string{"https://*.shop.example"}, "http://eu.shop.example", false},
		} {
			s, got := wsServer(t, &uicontrol.WSOptions{OriginPatterns: tc.patterns})
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			tr, err := uicontrol.DialWS(context.Background(), "ws://mem/uiap/ws", &uicontrol.WSDialOptions{HTTPClient: s.client, Header: h})
			if (err == nil) != tc.ok {
				t.Errorf("patterns %v, Origin %q: err = %v, want ok = %v", tc.patterns, tc.origin, err, tc.ok)
			}
			if err == nil {
				_ = tr.Close()
				_ = (<-got).Close()
			} else if !strings.Contains(err.Error(), "403") {
				t.Errorf("refusal: %v, want 403", err)
			}
		}
	})
}

// The binding's frame rules: text frames only (binary closes with 1003),
// messages over the read limit close with 1009, the subprotocol is
// selected when offered, a plain GET is 426.
func TestWS_Frames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, got := wsServer(t, &uicontrol.WSOptions{ReadLimit: 1 << 10})

		c, _, err := websocket.Dial(ctx, "ws://mem/uiap/ws", &websocket.DialOptions{HTTPClient: s.client,
			Subprotocols: []string{"uiap.v0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		app := <-got
		if c.Subprotocol() != "uiap.v0.1" {
			t.Errorf("subprotocol %q", c.Subprotocol())
		}
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
		if b, err := app.Receive(ctx); err != nil || string(b) != `{"x":1}` {
			t.Errorf("text message: %s, %v", b, err)
		}
		if err := app.Send(ctx, []byte(`{"y":2}`)); err != nil {
			t.Fatal(err)
		}
		if typ, b, err := c.Read(ctx); err != nil || typ != websocket.MessageText || string(b) != `{"y":2}` {
			t.Errorf("sent as %v %s, %v; want a text message", typ, b, err)
		}
		_ = c.Write(ctx, websocket.MessageBinary, []byte(`{"x":1}`))
		if _, err := app.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("app end after a binary message: %v", err)
		}
		if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusUnsupportedData {
			t.Errorf("after a binary message: %v, want close 1003", err)
		}
		_ = app.Close()

		c, _, err = websocket.Dial(ctx, "ws://mem/uiap/ws", &websocket.DialOptions{HTTPClient: s.client})
		if err != nil {
			t.Fatal(err)
		}
		app = <-got
		if c.Subprotocol() != "" {
			t.Errorf("subprotocol %q selected though none was offered", c.Subprotocol())
		}
		_ = c.Write(ctx, websocket.MessageText, []byte(strings.Repeat(" ", 1<<10+1)))
		if _, err := app.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("app end after a message over the limit: %v", err)
		}
		if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Errorf("after a message over the limit: %v, want close 1009", err)
		}
		_ = app.Close()

		resp, err := s.client.Get("http://mem/uiap/ws")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUpgradeRequired {
			t.Errorf("plain GET: %s", resp.Status)
		}
	})
}

// A peer that stops reading stops answering pings: after one interval
// without its pong the connection is closed. A Receive that times out
// leaves the connection usable (and keeps reading it).
func TestWS_Ping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, got := wsServer(t, &uicontrol.WSOptions{PingInterval: 10 * time.Second})
		c, _, err := websocket.Dial(ctx, "ws://mem/uiap/ws", &websocket.DialOptions{HTTPClient: s.client})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		app := <-got
		defer app.Close()
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := app.Receive(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Receive with nothing sent: %v", err)
		}
		start := time.Now()
		if _, err := app.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) {
			t.Fatalf("Receive: %v", err)
		}
		// Ping at 10 s, unanswered until 20 s.
		if d := time.Since(start); d != 19*time.Second {
			t.Errorf("closed after %v, want 19s", d)
		}
	})
}

// Messages sent before a close are received before the close; the side
// that closed gets ErrClosed at once.
func TestWS_CloseOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, got := wsServer(t, nil)
		agent, err := uicontrol.DialWS(ctx, "ws://mem/uiap/ws", &uicontrol.WSDialOptions{HTTPClient: s.client})
		if err != nil {
			t.Fatal(err)
		}
		app := <-got
		for _, m := range []string{"1", "2", "3"} {
			if err := app.Send(ctx, []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		_ = app.Close()
		if _, err := app.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("Receive on the closed end: %v", err)
		}
		if err := app.Send(ctx, []byte("4")); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("Send on the closed end: %v", err)
		}
		for _, want := range []string{"1", "2", "3"} {
			if b, err := agent.Receive(ctx); err != nil || string(b) != want {
				t.Errorf("Receive: %s, %v; want %s", b, err, want)
			}
		}
		if _, err := agent.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) || websocket.CloseStatus(err) != websocket.StatusNormalClosure {
			t.Errorf("after the peer's close: %v, want ErrClosed with status 1000", err)
		}
		if err := agent.Send(ctx, []byte("x")); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("Send after the peer's close: %v", err)
		}
		_ = agent.Close()
	})
}
