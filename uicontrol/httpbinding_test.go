package uicontrol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/internal/uiapwire"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiaptest"
)

// httpPipeChunks is the in-memory socket buffer of the HTTP tests, in
// KiB: little, as the binding buffers messages at each end (64 in the
// handler, 16 in the client, a few KiB in net/http and the SSE reader),
// and the suite's 200 events must get a connection stuck.
const httpPipeChunks = 4

// httpPair connects the two ends of an http@0.1 connection in memory: the
// agent end is DialHTTP's client of an HTTPHandler served over memConn;
// the app end is the connection the handler opens for the agent's first
// message (the pair exists before it: it forwards once it is there).
func httpPair(t *testing.T) (app, agent uicontrol.Transport) {
	lazy := newLazyTransport()
	h := uicontrol.NewHTTPHandler(func(ctx context.Context, tr uicontrol.Transport) error {
		lazy.set(tr)
		<-ctx.Done() // the suite serves the app end; keep it until the case ends
		return nil
	}, nil)
	s := newMemServer(t, h, httpPipeChunks)
	t.Cleanup(func() { _ = h.Close() }) // before the server's cleanup
	agent, err := uicontrol.DialHTTP(context.Background(), "http://mem/uiap", &uicontrol.HTTPDialOptions{HTTPClient: s.client})
	if err != nil {
		t.Fatalf("DialHTTP: %v", err)
	}
	return lazy, agent
}

// TestUIAP_HTTP runs the conformance suite over the http@0.1 binding.
func TestUIAP_HTTP(t *testing.T) {
	uiaptest.Run(t, httpPair)
}

// lazyTransport forwards to a Transport that exists later.
type lazyTransport struct {
	ready  chan struct{}
	closed chan struct{}
	once   sync.Once
	t      uicontrol.Transport
}

func newLazyTransport() *lazyTransport {
	return &lazyTransport{ready: make(chan struct{}), closed: make(chan struct{})}
}

func (l *lazyTransport) set(t uicontrol.Transport) {
	l.t = t
	close(l.ready)
	select {
	case <-l.closed:
		_ = t.Close()
	default:
	}
}

func (l *lazyTransport) wait(ctx context.Context) (uicontrol.Transport, error) {
	select {
	case <-l.ready:
		return l.t, nil
	case <-l.closed:
		return nil, uicontrol.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *lazyTransport) Send(ctx context.Context, msg []byte) error {
	t, err := l.wait(ctx)
	if err != nil {
		return err
	}
	return t.Send(ctx, msg)
}

func (l *lazyTransport) Receive(ctx context.Context) ([]byte, error) {
	t, err := l.wait(ctx)
	if err != nil {
		return nil, err
	}
	return t.Receive(ctx)
}

func (l *lazyTransport) Close() error {
	l.once.Do(func() { close(l.closed) })
	select {
	case <-l.ready:
		return l.t.Close()
	default:
		return nil
	}
}

// httpServer serves an App over NewHTTPHandler in memory.
func httpServer(t *testing.T, app *uicontrol.App, opts *uicontrol.HTTPOptions) (*uicontrol.HTTPHandler, *memServer) {
	if opts == nil {
		opts = &uicontrol.HTTPOptions{}
	}
	opts.Logger = discard
	h := uicontrol.NewHTTPHandler(app.Serve, opts)
	s := newMemServer(t, h, httpPipeChunks)
	t.Cleanup(func() { _ = h.Close() })
	return h, s
}

func wireApp(t *testing.T) *uicontrol.App {
	app := uicontrol.NewApp(&uicontrol.AppOptions{Logger: discard})
	t.Cleanup(func() { _ = app.Close() })
	return app
}

const wireInitialize = `{"uiap":"0.1","kind":"request","type":"session.initialize","id":"m-1","ts":"2026-03-26T13:00:00.000Z",` +
	`"source":{"role":"agent","id":"a"},"payload":{"supportedVersions":["0.1"],"peer":{"role":"agent"}}}`

func wireMsg(id, typ, sid string) string {
	return `{"uiap":"0.1","kind":"request","type":"` + typ + `","id":"` + id + `","sessionId":"` + sid +
		`","ts":"2026-03-26T13:00:00.000Z","source":{"role":"agent","id":"a"},"payload":{}}`
}

func do(t *testing.T, s *memServer, method, url, contentType, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://mem"+url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// wireError checks a binding error: status, JSON §10 payload with code.
func wireError(t *testing.T, resp *http.Response, body []byte, status int, code uicontrol.Code) *uicontrol.Error {
	t.Helper()
	var e uicontrol.Error
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || e.Code != code || e.Message == "" {
		t.Errorf("want %d with code %s, got %s %q %s", status, code, resp.Status, resp.Header.Get("Content-Type"), body)
	}
	return &e
}

// open opens a connection with wireInitialize and returns its path and
// the session.initialized envelope.
func openSession(t *testing.T, s *memServer) (string, *uicontrol.Envelope) {
	t.Helper()
	resp, body := do(t, s, "POST", "/uiap/sessions", "application/json", wireInitialize)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST /uiap/sessions: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "/uiap/sessions/") || len(loc) != len("/uiap/sessions/")+32 {
		t.Fatalf("Location %q", loc)
	}
	e, err := uicontrol.DecodeEnvelope(body)
	if err != nil || e.Type != uiapwire.TypeInitialized || e.CorrelationID != "m-1" {
		t.Fatalf("first answer %s: %v", body, err)
	}
	return loc, e
}

// eventStream opens GET {conn}/events and returns a decoder over it.
func eventStream(t *testing.T, s *memServer, conn string, header ...string) (*http.Response, *sse.Decoder) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://mem"+conn+"/events", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/events: %s", conn, resp.Status)
	}
	return resp, sse.NewDecoder(resp.Body)
}

func nextEvent(t *testing.T, d *sse.Decoder) (id, typ string, e *uicontrol.Envelope) {
	t.Helper()
	ev, err := d.Next()
	if err != nil {
		t.Fatalf("event stream: %v", err)
	}
	if ev.Type == "close" {
		return ev.ID, ev.Type, nil
	}
	e, err = uicontrol.DecodeEnvelope(ev.Data)
	if err != nil {
		t.Fatalf("event %s: %v", ev.Data, err)
	}
	return ev.ID, ev.Type, e
}

// The HTTP mapping: POST /uiap/sessions answers 201 with the connection's
// URL and the first answer; messages are POSTed (202) and answered on the
// event stream, numbered from 2; Last-Event-ID resumes the stream; a
// terminated session ends the stream with a close event and the
// connection is gone.
func TestHTTP_Wire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, s := httpServer(t, wireApp(t), nil)
		conn, init := openSession(t, s)

		resp, body := do(t, s, "POST", conn+"/messages", "application/json; charset=utf-8", wireMsg("m-2", "capabilities.get", init.SessionID))
		if resp.StatusCode != http.StatusAccepted || len(body) != 0 {
			t.Fatalf("POST messages: %s %s", resp.Status, body)
		}
		resp, d := eventStream(t, s, conn)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("events: %s %v", resp.Status, resp.Header)
		}
		if id, typ, e := nextEvent(t, d); id != "2" || typ != "" || e.Type != uiapwire.TypeCapabilitiesList || e.CorrelationID != "m-2" {
			t.Fatalf("event %s %s %+v", id, typ, e)
		}
		resp.Body.Close()

		// The stream resumes after Last-Event-ID; the first answer is
		// message 1 (and kept like any other).
		do(t, s, "POST", conn+"/messages", "application/json", wireMsg("m-3", "session.ping", init.SessionID))
		_, d = eventStream(t, s, conn, "Last-Event-ID", "0")
		for _, want := range []string{"1", "2", "3"} {
			if id, _, _ := nextEvent(t, d); id != want {
				t.Fatalf("replayed event %s, want %s", id, want)
			}
		}
		// A newer stream replaces the older one.
		_, d2 := eventStream(t, s, conn, "Last-Event-ID", "3")
		if _, err := d.Next(); err == nil {
			t.Errorf("replaced stream still open")
		}

		do(t, s, "POST", conn+"/messages", "application/json", wireMsg("m-4", "session.terminate", init.SessionID))
		if id, _, e := nextEvent(t, d2); id != "4" || e.Type != uiapwire.TypeTerminated {
			t.Fatalf("event %s %+v", id, e)
		}
		if _, typ, _ := nextEvent(t, d2); typ != "close" {
			t.Fatalf("after session.terminated: %s, want the close event", typ)
		}
		if _, err := d2.Next(); err != io.EOF {
			t.Errorf("after the close event: %v", err)
		}
		resp, body = do(t, s, "POST", conn+"/messages", "application/json", wireMsg("m-5", "session.ping", init.SessionID))
		wireError(t, resp, body, http.StatusNotFound, uicontrol.CodeUnknownSession)
		resp, body = do(t, s, "GET", conn+"/events", "", "")
		wireError(t, resp, body, http.StatusNotFound, uicontrol.CodeUnknownSession)
	})
}

// Binding errors are JSON §10 payloads with an HTTP status.
func TestHTTP_Errors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		app := wireApp(t)
		_, s := httpServer(t, app, &uicontrol.HTTPOptions{MaxBodySize: 1 << 10, MaxConnections: 1})
		resp, body := do(t, s, "POST", "/uiap/sessions", "text/plain", wireInitialize)
		wireError(t, resp, body, http.StatusUnsupportedMediaType, uicontrol.CodeInvalidMessage)
		resp, body = do(t, s, "POST", "/uiap/sessions", "", wireInitialize)
		wireError(t, resp, body, http.StatusUnsupportedMediaType, uicontrol.CodeInvalidMessage)
		resp, body = do(t, s, "POST", "/uiap/sessions", "application/json", strings.Repeat(" ", 1<<10+1))
		wireError(t, resp, body, http.StatusRequestEntityTooLarge, uicontrol.CodeInvalidMessage)
		resp, body = do(t, s, "GET", "/uiap/sessions", "", "")
		wireError(t, resp, body, http.StatusMethodNotAllowed, uicontrol.CodeBadRequest)
		if resp.Header.Get("Allow") != "POST" {
			t.Errorf("Allow %q", resp.Header.Get("Allow"))
		}
		resp, body = do(t, s, "POST", "/uiap/sessions/0123/events", "application/json", "{}")
		wireError(t, resp, body, http.StatusMethodNotAllowed, uicontrol.CodeBadRequest)
		resp, body = do(t, s, "GET", "/uiap/elsewhere", "", "")
		wireError(t, resp, body, http.StatusNotFound, uicontrol.CodeBadRequest)
		for _, path := range []string{"/uiap/sessions/nope/messages", "/uiap/sessions/nope/events"} {
			method := map[bool]string{true: "POST", false: "GET"}[strings.HasSuffix(path, "messages")]
			resp, body = do(t, s, method, path, "application/json", "{}")
			wireError(t, resp, body, http.StatusNotFound, uicontrol.CodeUnknownSession)
		}
		resp, body = do(t, s, "DELETE", "/uiap/sessions/nope", "", "")
		wireError(t, resp, body, http.StatusNotFound, uicontrol.CodeUnknownSession)

		// A message is passed on as it is: the app answers what it cannot
		// read (over the event stream, here as the first answer).
		resp, body = do(t, s, "POST", "/uiap/sessions", "application/json", "hello")
		if e, err := uicontrol.DecodeEnvelope(body); resp.StatusCode != http.StatusCreated || err != nil || e.Kind != uicontrol.KindError {
			t.Fatalf("POST hello: %s %s", resp.Status, body)
		}
		conn := resp.Header.Get("Location")

		// One connection is the limit here.
		resp, body = do(t, s, "POST", "/uiap/sessions", "application/json", wireInitialize)
		if e := wireError(t, resp, body, http.StatusServiceUnavailable, uicontrol.CodeRateLimited); !e.Retryable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("over the connection limit: retryable %v, Retry-After %q", e.Retryable, resp.Header.Get("Retry-After"))
		}
		for _, v := range []string{"x", "-1", "+1", "1.0", "2"} {
			resp, body = do(t, s, "GET", conn+"/events", "", "", "Last-Event-ID", v)
			wireError(t, resp, body, http.StatusBadRequest, uicontrol.CodeBadRequest)
		}
		resp, body = do(t, s, "POST", conn+"/messages", "application/json", strings.Repeat(" ", 1<<10+1))
		wireError(t, resp, body, http.StatusRequestEntityTooLarge, uicontrol.CodeInvalidMessage)

		resp, _ = do(t, s, "DELETE", conn, "", "")
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("DELETE: %s", resp.Status)
		}
		resp, body = do(t, s, "POST", "/uiap/sessions", "application/json", wireInitialize)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("after DELETE the connection no longer counts: %s %s", resp.Status, body)
		}
	})
}

// A POSTed message is application/json or application/uiap+json (the
// media type in any case, with parameters) on both endpoints that take
// one; anything else is 415 and reaches no connection. GET …/events and
// DELETE carry no body: their Content-Type is not looked at.
func TestHTTP_ContentType(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		accepted    bool
	}{
		{"application/json", true},
		{"application/uiap+json", true},
		{"application/uiap+json; charset=utf-8", true},
		{"application/json;charset=UTF-8", true},
		{"Application/UIAP+JSON; Charset=utf-8", true},
		{"APPLICATION/JSON", true},
		{"", false},
		{"text/plain", false},
		{"text/plain; charset=utf-8", false},
		{"application/x-www-form-urlencoded", false},
		{"multipart/form-data; boundary=x", false},
		{"application/xml", false},
		{"application/uiap", false},
		{"application/uiap+xml", false},
		{"application/json-seq", false},
		{"application/uiap+json; charset", false}, // a malformed parameter
		{"application/uiap+json garbage", false},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, s := httpServer(t, wireApp(t), nil)
				resp, body := do(t, s, "POST", "/uiap/sessions", tc.contentType, wireInitialize)
				var conn, sid string
				if tc.accepted {
					e, err := uicontrol.DecodeEnvelope(body)
					if resp.StatusCode != http.StatusCreated || err != nil || e.Type != uiapwire.TypeInitialized {
						t.Fatalf("POST /uiap/sessions: %s %s", resp.Status, body)
					}
					conn, sid = resp.Header.Get("Location"), e.SessionID
				} else {
					wireError(t, resp, body, http.StatusUnsupportedMediaType, uicontrol.CodeInvalidMessage)
					var init *uicontrol.Envelope
					conn, init = openSession(t, s)
					sid = init.SessionID
				}

				resp, body = do(t, s, "POST", conn+"/messages", tc.contentType, wireMsg("m-2", uiapwire.TypeCapabilitiesGet, sid))
				want := "m-2"
				if tc.accepted {
					if resp.StatusCode != http.StatusAccepted {
						t.Fatalf("POST messages: %s %s", resp.Status, body)
					}
				} else {
					wireError(t, resp, body, http.StatusUnsupportedMediaType, uicontrol.CodeInvalidMessage)
					resp, body = do(t, s, "POST", conn+"/messages", "application/json", wireMsg("m-3", uiapwire.TypeCapabilitiesGet, sid))
					if resp.StatusCode != http.StatusAccepted {
						t.Fatalf("POST messages after a 415: %s %s", resp.Status, body)
					}
					want = "m-3" // m-2 never reached the app
				}

				resp, d := eventStream(t, s, conn, "Content-Type", tc.contentType)
				if id, _, e := nextEvent(t, d); id != "2" || e.Type != uiapwire.TypeCapabilitiesList || e.CorrelationID != want {
					t.Fatalf("event %s %+v, want the answer to %s", id, e, want)
				}
				resp.Body.Close()
				if resp, body := do(t, s, "DELETE", conn, tc.contentType, ""); resp.StatusCode != http.StatusNoContent {
					t.Errorf("DELETE: %s %s", resp.Status, body)
				}
			})
		})
	}
}

// A connection without an event stream for IdleTimeout is lost: its
// session is INTERRUPTED (resumable); DELETE loses it at once.
func TestHTTP_IdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		app := wireApp(t)
		_, s := httpServer(t, app, &uicontrol.HTTPOptions{IdleTimeout: 5 * time.Second})
		conn, init := openSession(t, s)
		sess := app.Session(init.SessionID)
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		if st := sess.State(); st != uicontrol.StateActive {
			t.Fatalf("before the idle timeout: %v", st)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if st := sess.State(); st != uicontrol.StateInterrupted {
			t.Fatalf("after the idle timeout: %v", st)
		}
		resp, body := do(t, s, "GET", conn+"/events", "", "")
		wireError(t, resp, body, http.StatusNotFound, uicontrol.CodeUnknownSession)

		// An open stream keeps a connection, a closed one starts the clock.
		conn, init = openSession(t, s)
		sess = app.Session(init.SessionID)
		resp, _ = eventStream(t, s, conn)
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := sess.State(); st != uicontrol.StateActive {
			t.Fatalf("with a stream, after a minute: %v", st)
		}
		resp.Body.Close()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if st := sess.State(); st != uicontrol.StateInterrupted {
			t.Fatalf("5 s after the stream closed: %v", st)
		}

		conn, init = openSession(t, s)
		sess = app.Session(init.SessionID)
		do(t, s, "DELETE", conn, "", "")
		synctest.Wait()
		if st := sess.State(); st != uicontrol.StateInterrupted {
			t.Fatalf("after DELETE: %v", st)
		}
	})
}

// Messages written to a stream are kept for the last 256: a
// Last-Event-ID before them is 410 Gone, and the connection is lost.
func TestHTTP_ReplayLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		app := wireApp(t)
		_, s := httpServer(t, app, nil)
		conn, init := openSession(t, s)
		sess := app.Session(init.SessionID)
		_, d := eventStream(t, s, conn)
		for i := range 300 {
			if err := sess.Emit(context.Background(), "x.test.tick", nil); err != nil {
				t.Fatal(err)
			}
			if id, _, _ := nextEvent(t, d); id != strconv.Itoa(i+2) {
				t.Fatalf("event id %s, want %d", id, i+2)
			}
		}
		// 1 to 301 were written: 46 to 301 are kept.
		_, d = eventStream(t, s, conn, "Last-Event-ID", "45")
		if id, _, _ := nextEvent(t, d); id != "46" {
			t.Fatalf("after Last-Event-ID 45: event %s", id)
		}
		resp, body := do(t, s, "GET", conn+"/events", "", "", "Last-Event-ID", "44")
		wireError(t, resp, body, http.StatusGone, uicontrol.CodeUnknownSession)
		synctest.Wait()
		if st := sess.State(); st != uicontrol.StateInterrupted {
			t.Fatalf("after 410: %v", st)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzHTTPEvents feeds arbitrary bytes to DialHTTP's client as an event
// stream and checks that it delivers exactly what the binding's rules
// take from them (read with internal/sse as a reference): message events
// numbered 1, 2, 3, … in order, repeats skipped, ended by a "close"
// event, a gap, a bad number or an oversized event.
func FuzzHTTPEvents(f *testing.F) {
	for _, s := range []string{
		"id: 1\ndata: {\"a\":1}\n\nid: 2\ndata: {\"b\":2}\n\nevent: close\ndata: {}\n\n",
		"id: 1\ndata: x\n\nid: 1\ndata: x\n\nid: 2\ndata: y\n\n",
		"id: 1\ndata: x\n\nid: 3\ndata: gap\n\n",
		": keep-alive\n\nid: 1\r\ndata: a\r\ndata: b\r\n\r\nevent: later\nid: 2\ndata: ignored\n\nid: 2\ndata: c\n\n",
		"id: x\ndata: bad\n\n",
		"data: no id\n\n",
		"id: 1\ndata: " + strings.Repeat("z", 300) + "\n\n",
		"id: 1\ndata: unterminated",
	} {
		f.Add([]byte(s))
	}
	const maxSize = 256
	f.Fuzz(func(t *testing.T, stream []byte) {
		// The reference: what the client must deliver.
		var want []string
		dec := sse.NewDecoder(bytes.NewReader(stream))
		dec.SetMaxEventSize(maxSize)
		for last := int64(0); ; {
			ev, err := dec.Next()
			if err != nil || ev.Type == "close" {
				break
			}
			if ev.Type != "" && ev.Type != "message" {
				continue
			}
			n, err := strconv.ParseInt(ev.ID, 10, 64)
			if err != nil || n <= 0 || n > last+1 {
				break
			}
			if n == last+1 {
				want, last = append(want, string(ev.Data)), n
			}
		}

		synctest.Test(t, func(t *testing.T) {
			gets := 0
			client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"code":"unknown_session","message":"x"}`)), Request: r}
				switch {
				case r.Method == "POST" && r.URL.Path == "/uiap/sessions":
					resp.StatusCode = http.StatusCreated
					resp.Header.Set("Location", "/uiap/sessions/c1")
					resp.Body = io.NopCloser(strings.NewReader(""))
				case r.Method == "GET" && r.URL.Path == "/uiap/sessions/c1/events" && gets == 0:
					gets++
					resp.StatusCode = http.StatusOK
					resp.Header.Set("Content-Type", "text/event-stream")
					resp.Body = io.NopCloser(bytes.NewReader(stream))
				case r.Method == "DELETE":
					resp.StatusCode = http.StatusNoContent
				}
				return resp, nil
			})}
			tr, err := uicontrol.DialHTTP(context.Background(), "http://fuzz/uiap", &uicontrol.HTTPDialOptions{HTTPClient: client, MaxMessageSize: maxSize})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if err := tr.Send(context.Background(), []byte(wireInitialize)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				b, err := tr.Receive(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, uicontrol.ErrClosed) {
						t.Fatalf("Receive: %v", err)
					}
					break
				}
				got = append(got, string(b))
			}
			if !slices.Equal(got, want) {
				t.Errorf("delivered %q, want %q", got, want)
			}
		})
	})
}
