package uicontrol_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/coder/websocket"
)

// benchWS is an App served over ws@0.1 at /uiap/ws and a bare
// coder/websocket echo at /echo, on one loopback server.
type benchWS struct {
	app *uicontrol.App
	srv *httptest.Server
}

func newBenchWS(b *testing.B) *benchWS {
	app := uicontrol.NewApp(&uicontrol.AppOptions{Logger: discard})
	app.Handle("x.bench.echo", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		return &uicontrol.Reply{Type: "x.bench.echoed", Payload: req.Payload}, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/uiap/ws", uicontrol.NewWSHandler(app.Serve, &uicontrol.WSOptions{Logger: discard}))
	// The binding's transport alone, echoing what it receives.
	mux.Handle("/transport", uicontrol.NewWSHandler(func(ctx context.Context, t uicontrol.Transport) error {
		for {
			msg, err := t.Receive(ctx)
			if err != nil {
				return err
			}
			if err := t.Send(ctx, msg); err != nil {
				return err
			}
		}
	}, &uicontrol.WSOptions{Logger: discard}))
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				return
			}
		}
	})
	bw := &benchWS{app: app, srv: httptest.NewServer(mux)}
	b.Cleanup(func() {
		bw.srv.Close()
		_ = app.Close()
	})
	return bw
}

func (bw *benchWS) url(path string) string {
	return "ws" + strings.TrimPrefix(bw.srv.URL, "http") + path
}

// sendRecorder keeps the last message sent over a Transport.
type sendRecorder struct {
	uicontrol.Transport
	last []byte
}

func (r *sendRecorder) Send(ctx context.Context, msg []byte) error {
	r.last = msg
	return r.Transport.Send(ctx, msg)
}

// agent connects an agent over ws@0.1 and returns it with the bytes of
// one echo request as it sends them (for the echo baseline).
func (bw *benchWS) agent(b *testing.B, payload map[string]any) (*uicontrol.Agent, []byte, []byte) {
	ctx := context.Background()
	tr, err := uicontrol.DialWS(ctx, bw.url("/uiap/ws"), nil)
	if err != nil {
		b.Fatal(err)
	}
	rec := &sendRecorder{Transport: tr}
	a, err := uicontrol.Connect(ctx, rec, nil)
	if err != nil {
		b.Fatal(err)
	}
	init := rec.last
	b.Cleanup(func() { _ = a.Close() })
	if _, err := a.Call(ctx, &uicontrol.Request{Type: "x.bench.echo", Payload: payload}); err != nil {
		b.Fatal(err)
	}
	return a, rec.last, init
}

func (bw *benchWS) echoConn(b *testing.B) *websocket.Conn {
	c, _, err := websocket.Dial(context.Background(), bw.url("/echo"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.CloseNow() })
	return c
}

func echoOnce(b *testing.B, c *websocket.Conn, msg []byte) {
	ctx := context.Background()
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil {
		b.Fatal(err)
	}
}

var benchPayload = map[string]any{"sku": "A-1", "qty": 2, "note": strings.Repeat("x", 64)}

// BenchmarkWS_RoundTrip measures request/response round trips over one
// ws@0.1 session on loopback (agent.Call → App handler → response) next
// to a bare coder/websocket echo of the same request bytes, in one run
// (the target: uiap ≥ 50 % of the echo's rate); transport is the
// binding's Transport alone, echoing on the server. ratio interleaves
// the two and reports their medians and uiap's share of the echo rate,
// which holds up on a loaded machine.
func BenchmarkWS_RoundTrip(b *testing.B) {
	bw := newBenchWS(b)
	ctx := context.Background()
	b.Run("echo", func(b *testing.B) {
		_, msg, _ := bw.agent(b, benchPayload)
		c := bw.echoConn(b)
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			echoOnce(b, c, msg)
		}
	})
	b.Run("transport", func(b *testing.B) {
		_, msg, _ := bw.agent(b, benchPayload)
		t, err := uicontrol.DialWS(ctx, bw.url("/transport"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer t.Close()
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if err := t.Send(ctx, msg); err != nil {
				b.Fatal(err)
			}
			if _, err := t.Receive(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uiap", func(b *testing.B) {
		a, msg, _ := bw.agent(b, benchPayload)
		req := &uicontrol.Request{Type: "x.bench.echo", Payload: benchPayload}
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Call(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ratio", func(b *testing.B) {
		a, msg, _ := bw.agent(b, benchPayload)
		c := bw.echoConn(b)
		req := &uicontrol.Request{Type: "x.bench.echo", Payload: benchPayload}
		var echoT, uiapT []time.Duration
		for b.Loop() {
			t0 := time.Now()
			echoOnce(b, c, msg)
			t1 := time.Now()
			if _, err := a.Call(ctx, req); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			echoT, uiapT = append(echoT, t1.Sub(t0)), append(uiapT, t2.Sub(t1))
		}
		reportRatio(b, echoT, uiapT)
	})
}

// BenchmarkWS_Handshake measures UIAP handshakes over ws@0.1 on loopback
// (dial, session.initialize → session.initialized, close) next to a bare
// coder/websocket dial and echo of the same session.initialize bytes.
func BenchmarkWS_Handshake(b *testing.B) {
	bw := newBenchWS(b)
	ctx := context.Background()
	_, _, init := bw.agent(b, map[string]any{})
	echo := func(b *testing.B) {
		c, _, err := websocket.Dial(ctx, bw.url("/echo"), nil)
		if err != nil {
			b.Fatal(err)
		}
		echoOnce(b, c, init)
		c.CloseNow()
	}
	handshake := func(b *testing.B) {
		tr, err := uicontrol.DialWS(ctx, bw.url("/uiap/ws"), nil)
		if err != nil {
			b.Fatal(err)
		}
		a, err := uicontrol.Connect(ctx, tr, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = a.Close()
	}
	b.Run("echo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			echo(b)
		}
	})
	b.Run("uiap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			handshake(b)
		}
	})
	b.Run("ratio", func(b *testing.B) {
		var echoT, uiapT []time.Duration
		for b.Loop() {
			t0 := time.Now()
			echo(b)
			t1 := time.Now()
			handshake(b)
			t2 := time.Now()
			echoT, uiapT = append(echoT, t1.Sub(t0)), append(uiapT, t2.Sub(t1))
		}
		reportRatio(b, echoT, uiapT)
	})
}

// reportRatio reports the medians of the echo and UIAP timings and UIAP's
// rate as a share of the echo's (echo-ns / uiap-ns).
func reportRatio(b *testing.B, echoT, uiapT []time.Duration) {
	slices.Sort(echoT)
	slices.Sort(uiapT)
	m := len(echoT) / 2
	b.ReportMetric(float64(echoT[m].Nanoseconds()), "echo-ns")
	b.ReportMetric(float64(uiapT[m].Nanoseconds()), "uiap-ns")
	b.ReportMetric(float64(echoT[m])/float64(uiapT[m]), "of-echo-rate")
}
