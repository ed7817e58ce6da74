package uicontrol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// The http@0.1 binding (docs/spec-notes/uiap.md, "HTTP binding"). One
// connection — what a WebSocket is to ws@0.1 — is made of requests:
//
//	POST   /uiap/sessions               the connection's first message; 201 Created,
//	                                    Location: /uiap/sessions/{id}, body: the first answer
//	POST   /uiap/sessions/{id}/messages  one agent→app message; 202 Accepted
//	GET    /uiap/sessions/{id}/events    app→agent messages as server-sent events,
//	                                    "id" = the message's number; resumed with Last-Event-ID
//	DELETE /uiap/sessions/{id}           the agent closes the connection; 204
//
// {id} names the connection, not the UIAP session: a session outlives its
// connections (session.resume opens a new one) and a connection exists
// before any session does.

// Defaults and limits of the HTTP binding.
const (
	defaultHTTPIdle        = 30 * time.Second // no event stream for this long: the connection is lost
	defaultHTTPConnections = 1024
	httpBuffer             = 64               // messages queued in the handler, per direction, before a sender waits
	httpClientBuffer       = 16               // messages the client holds before it stops reading the stream
	httpReplay             = 256              // messages kept, once written, for a Last-Event-ID
	httpWriteTimeout       = 10 * time.Second // per write of an event stream
	httpKeepAlive          = 15 * time.Second // a comment on an idle event stream
	httpFirstAnswerWait    = 5 * time.Second  // how long POST /uiap/sessions waits for the answer
	httpRetries            = 3                // retries of a failed event-stream request before a client gives up
)

// HTTPOptions configures NewHTTPHandler. The zero value works.
type HTTPOptions struct {
	// MaxBodySize bounds a POSTed message in bytes; a larger one is
	// answered 413. 0 means DefaultMaxMessageSize.
	MaxBodySize int64
	// MaxConnections bounds the open connections; one more is answered
	// 503 (rate_limited). 0 means 1024.
	MaxConnections int
	// IdleTimeout is how long a connection may go without an event stream
	// before it is closed (a transport loss: its session waits for a
	// resume). 0 means 30 s.
	IdleTimeout time.Duration
	// Logger receives operational records; nil is slog.Default().
	Logger *slog.Logger
}

// HTTPHandler is the server side of the http@0.1 binding: an http.Handler
// for the paths under /uiap/sessions that runs serve over each connection
// an agent opens. serve is usually an App's Serve method:
//
//	h := uicontrol.NewHTTPHandler(app.Serve, nil)
//	mux.Handle("/uiap/sessions", h)
//	mux.Handle("/uiap/sessions/", h)
//
// Errors of the binding itself (unknown connection, body too large, …)
// are answered with a JSON body holding a §10 error payload
// ({"code", "message", "retryable"}). Its methods are safe for
// concurrent use.
type HTTPHandler struct {
	serve  func(context.Context, Transport) error
	opts   HTTPOptions
	log    *slog.Logger
	mux    *http.ServeMux
	ctx    context.Context // ends at Close; serve runs under it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[string]*httpConn
	closed bool
}

// NewHTTPHandler returns an HTTPHandler running serve over each
// connection; opts may be nil.
func NewHTTPHandler(serve func(context.Context, Transport) error, opts *HTTPOptions) *HTTPHandler {
	h := &HTTPHandler{serve: serve, conns: map[string]*httpConn{}, mux: http.NewServeMux()}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.MaxBodySize <= 0 {
		h.opts.MaxBodySize = DefaultMaxMessageSize
	}
	if h.opts.MaxConnections <= 0 {
		h.opts.MaxConnections = defaultHTTPConnections
	}
	if h.opts.IdleTimeout <= 0 {
		h.opts.IdleTimeout = defaultHTTPIdle
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.Default()
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.mux.HandleFunc("POST /uiap/sessions", h.create)
	h.mux.HandleFunc("POST /uiap/sessions/{id}/messages", h.post)
	h.mux.HandleFunc("GET /uiap/sessions/{id}/events", h.events)
	h.mux.HandleFunc("DELETE /uiap/sessions/{id}", h.delete)
	for path, allow := range map[string]string{"/uiap/sessions": "POST", "/uiap/sessions/{id}/messages": "POST",
		"/uiap/sessions/{id}/events": "GET", "/uiap/sessions/{id}": "DELETE"} {
		h.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeHTTPError(w, http.StatusMethodNotAllowed, newErrorf(CodeBadRequest, "method %s not allowed", r.Method))
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, NewError(CodeBadRequest, "no such resource"))
	})
	return h
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Close closes every connection (a transport loss for their sessions)
// and waits for the serve calls to return. Requests after it are
// answered 503.
func (h *HTTPHandler) Close() error {
	h.mu.Lock()
	h.closed = true
	conns := make([]*httpConn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	h.cancel()
	for _, c := range conns {
		c.lose()
	}
	h.wg.Wait()
	return nil
}

// httpStatusError is a binding error: an HTTP status and the §10 payload.
type httpStatusError struct {
	status int
	err    *Error
}

func writeHTTPError(w http.ResponseWriter, status int, e *Error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}

// mediaType is the media type of a UIAP message: the HTTP binding accepts
// it as a POSTed body's Content-Type, as it accepts application/json.
const mediaType = "application/uiap+json"

// jsonMediaType reports whether a Content-Type names a UIAP message:
// application/json or application/uiap+json, in any case, with any
// parameters (charset=utf-8).
func jsonMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType) // lower-cases the type
	return err == nil && (mt == "application/json" || mt == mediaType)
}

// readBody reads a POSTed message: Content-Type application/json or
// application/uiap+json, at most MaxBodySize bytes, passed on as it is
// (the receiving side decodes it).
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *httpStatusError) {
	if !jsonMediaType(r.Header.Get("Content-Type")) {
		return nil, &httpStatusError{http.StatusUnsupportedMediaType,
			NewError(CodeInvalidMessage, "Content-Type must be application/json or "+mediaType)}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodySize))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &httpStatusError{http.StatusRequestEntityTooLarge,
				newErrorf(CodeInvalidMessage, "message exceeds %d bytes", h.opts.MaxBodySize)}
		}
		return nil, &httpStatusError{http.StatusBadRequest, NewError(CodeInvalidMessage, "body could not be read")}
	}
	return b, nil
}

// lookup returns the connection named by the request's {id}.
func (h *HTTPHandler) lookup(r *http.Request) (*httpConn, *httpStatusError) {
	h.mu.Lock()
	c := h.conns[r.PathValue("id")]
	h.mu.Unlock()
	if c == nil {
		return nil, &httpStatusError{http.StatusNotFound, NewError(CodeUnknownSession, "unknown connection")}
	}
	return c, nil
}

// create serves POST /uiap/sessions: a new connection whose first message
// is the body, answered 201 with the connection's URL and, in the body,
// the first message the app sends on it (session.initialized, or an
// error) if one comes within a few seconds.
func (h *HTTPHandler) create(w http.ResponseWriter, r *http.Request) {
	body, herr := h.readBody(w, r)
	if herr != nil {
		writeHTTPError(w, herr.status, herr.err)
		return
	}
	c := &httpConn{h: h, id: randomToken(16), in: make(chan []byte, httpBuffer), closed: make(chan struct{}),
		gone: make(chan struct{}), changed: make(chan struct{}), next: 1}
	c.in <- body
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		writeHTTPError(w, http.StatusServiceUnavailable, NewError(CodeRateLimited, "shutting down"))
		return
	case len(h.conns) >= h.opts.MaxConnections:
		h.mu.Unlock()
		writeHTTPError(w, http.StatusServiceUnavailable, NewError(CodeRateLimited, "too many connections"))
		return
	}
	h.conns[c.id] = c
	c.mu.Lock()
	c.idle = time.AfterFunc(h.opts.IdleTimeout, c.idleExpired)
	c.mu.Unlock()
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		if err := h.serve(h.ctx, c); err != nil && !errors.Is(err, context.Canceled) {
			h.log.Debug("uicontrol: http connection ended", "err", err)
		}
		_ = c.Close()
	}()

	first := c.firstAnswer(r.Context())
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+c.id)
	w.Header().Set("Cache-Control", "no-store")
	if first == nil {
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(first)
}

// post serves POST /uiap/sessions/{id}/messages: the body is handed to
// the connection's receiving side, in the order the requests arrive.
func (h *HTTPHandler) post(w http.ResponseWriter, r *http.Request) {
	c, herr := h.lookup(r)
	if herr == nil {
		var body []byte
		if body, herr = h.readBody(w, r); herr == nil {
			herr = c.deliver(r.Context(), body)
		}
	}
	if herr != nil {
		writeHTTPError(w, herr.status, herr.err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// delete serves DELETE /uiap/sessions/{id}: the agent closes the
// connection.
func (h *HTTPHandler) delete(w http.ResponseWriter, r *http.Request) {
	c, herr := h.lookup(r)
	if herr != nil {
		writeHTTPError(w, herr.status, herr.err)
		return
	}
	c.lose()
	w.WriteHeader(http.StatusNoContent)
}

// events serves GET /uiap/sessions/{id}/events: the connection's app→agent
// messages from the one after Last-Event-ID (or after those already
// delivered), each an event whose id is its number and whose data is the
// message; when the app side has closed the connection and everything
// was written, an event of type "close" ends the stream. A newer stream
// replaces an older one.
func (h *HTTPHandler) events(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet { // a HEAD would replace the stream with one that goes nowhere
		w.Header().Set("Allow", "GET")
		writeHTTPError(w, http.StatusMethodNotAllowed, newErrorf(CodeBadRequest, "method %s not allowed", r.Method))
		return
	}
	c, herr := h.lookup(r)
	if herr != nil {
		writeHTTPError(w, herr.status, herr.err)
		return
	}
	after, has := int64(0), false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || !isDigits(v) {
			writeHTTPError(w, http.StatusBadRequest, NewError(CodeBadRequest, "Last-Event-ID is not a message number"))
			return
		}
		after, has = n, true
	}
	stop, from, herr := c.attach(after, has)
	if herr != nil {
		writeHTTPError(w, herr.status, herr.err)
		return
	}
	stream := sse.Start(w, httpWriteTimeout)
	if stream.Flush() != nil {
		c.detach(stop)
		return
	}
	keep := time.NewTicker(httpKeepAlive)
	defer keep.Stop()
	for {
		batch, end, changed := c.pending(from)
		if len(batch) > 0 || end {
			stream.Extend()
			var err error
			for _, m := range batch {
				if err = sse.Write(w, sse.Event{ID: strconv.FormatInt(m.n, 10), Data: m.b}); err != nil {
					break
				}
			}
			if err == nil && end {
				err = sse.Write(w, sse.Event{Type: "close", Data: []byte("{}")})
			}
			if err == nil {
				err = stream.Flush()
			}
			if err != nil {
				c.detach(stop)
				return
			}
			if len(batch) > 0 {
				from = batch[len(batch)-1].n + 1
				c.wrote(from - 1)
			}
			if end {
				c.lose() // all delivered: forget the connection
				return
			}
			keep.Reset(httpKeepAlive)
			continue
		}
		select {
		case <-changed:
		case <-keep.C:
			if _, err := io.WriteString(w, ":\n"); err != nil || stream.Flush() != nil {
				c.detach(stop)
				return
			}
		case <-stop: // replaced by a newer stream
			return
		case <-c.gone:
			return
		case <-r.Context().Done():
			c.detach(stop)
			return
		}
	}
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// httpMsg is an app→agent message and its number on the connection.
type httpMsg struct {
	n int64
	b []byte
}

// httpConn is the app side of one HTTP connection: a Transport whose
// Receive yields the POSTed messages and whose Send queues messages for
// the event stream. Sent messages are numbered from 1; they are kept
// until written, and then for the last httpReplay of them, so that a
// stream resumed with Last-Event-ID misses nothing.
type httpConn struct {
	h      *HTTPHandler
	id     string
	in     chan []byte
	closed chan struct{} // the app side closed it (Close)
	gone   chan struct{} // the agent side is gone: DELETE, idle timeout, lost events, handler closed
	closeO sync.Once
	goneO  sync.Once

	mu      sync.Mutex
	out     []httpMsg     // kept messages, numbered consecutively
	next    int64         // the number of the next message sent
	written int64         // the highest number written to a stream (or the POST answer)
	acked   int64         // the highest number the agent said it has (Last-Event-ID)
	start   int64         // where a stream without Last-Event-ID starts after
	changed chan struct{} // closed and replaced when out, written or closed change
	stream  chan struct{} // closed to stop the current event stream; nil when none
	idle    *time.Timer
}

func (c *httpConn) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *httpConn) Send(ctx context.Context, msg []byte) error {
	for {
		select {
		case <-c.closed:
			return ErrClosed
		case <-c.gone:
			return ErrClosed
		default:
		}
		c.mu.Lock()
		if c.next-1-c.written < httpBuffer {
			c.out = append(c.out, httpMsg{n: c.next, b: msg})
			c.next++
			c.signal()
			c.mu.Unlock()
			return nil
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-c.closed:
		case <-c.gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *httpConn) Receive(ctx context.Context) ([]byte, error) {
	select {
	case <-c.closed:
		return nil, ErrClosed
	default:
	}
	select {
	case b := <-c.in:
		return b, nil
	case <-c.gone:
		select { // what was POSTed before
		case b := <-c.in:
			return b, nil
		default:
			return nil, ErrClosed
		}
	case <-c.closed:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes the connection from the app side: what was sent is still
// delivered to the event stream, then the "close" event.
func (c *httpConn) Close() error {
	c.closeO.Do(func() {
		close(c.closed)
		c.mu.Lock()
		c.signal()
		c.mu.Unlock()
	})
	return nil
}

// lose ends the connection from the agent side and forgets it.
func (c *httpConn) lose() {
	c.goneO.Do(func() {
		close(c.gone)
		c.mu.Lock()
		if c.idle != nil {
			c.idle.Stop()
		}
		if c.stream != nil {
			close(c.stream)
			c.stream = nil
		}
		c.signal()
		c.mu.Unlock()
		c.h.mu.Lock()
		if c.h.conns[c.id] == c {
			delete(c.h.conns, c.id)
		}
		c.h.mu.Unlock()
	})
}

func (c *httpConn) idleExpired() {
	c.mu.Lock()
	streaming := c.stream != nil
	c.mu.Unlock()
	if !streaming {
		c.lose()
	}
}

// deliver hands a POSTed message to the receiving side.
func (c *httpConn) deliver(ctx context.Context, b []byte) *httpStatusError {
	gone := &httpStatusError{http.StatusNotFound, NewError(CodeUnknownSession, "unknown connection")}
	select {
	case <-c.closed:
		return gone
	default:
	}
	select {
	case c.in <- b:
		return nil
	case <-c.closed:
		return gone
	case <-c.gone:
		return gone
	case <-ctx.Done():
		return &httpStatusError{http.StatusServiceUnavailable, NewError(CodeTimeout, "message not taken in time")}
	}
}

// firstAnswer waits for the first message sent on a new connection and
// returns it (nil if none comes in time); the event stream starts after it.
func (c *httpConn) firstAnswer(ctx context.Context) []byte {
	t := time.NewTimer(httpFirstAnswerWait)
	defer t.Stop()
	for {
		c.mu.Lock()
		if len(c.out) > 0 && c.out[0].n == 1 {
			m := c.out[0]
			c.start = 1
			c.written = max(c.written, 1)
			c.signal()
			c.mu.Unlock()
			return m.b
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-c.closed:
			return nil
		case <-c.gone:
			return nil
		case <-t.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// attach makes a new event stream the connection's current one and
// returns where it starts: after the message numbered after, if has, or
// after those already delivered. A start no longer kept loses the
// connection (410).
func (c *httpConn) attach(after int64, has bool) (stop chan struct{}, from int64, herr *httpStatusError) {
	c.mu.Lock()
	select {
	case <-c.gone:
		c.mu.Unlock()
		return nil, 0, &httpStatusError{http.StatusNotFound, NewError(CodeUnknownSession, "unknown connection")}
	default:
	}
	if !has {
		after = max(c.acked, c.start)
	}
	if after >= c.next {
		c.mu.Unlock()
		return nil, 0, &httpStatusError{http.StatusBadRequest, newErrorf(CodeBadRequest, "Last-Event-ID %d is beyond the last message sent (%d)", after, c.next-1)}
	}
	first := c.next
	if len(c.out) > 0 {
		first = c.out[0].n
	}
	if after+1 < first {
		c.mu.Unlock()
		c.lose()
		return nil, 0, &httpStatusError{http.StatusGone, newErrorf(CodeUnknownSession, "messages after %d are no longer kept", after)}
	}
	if has {
		c.acked = max(c.acked, after)
		c.trim()
	}
	if c.stream != nil {
		close(c.stream)
	}
	stop = make(chan struct{})
	c.stream = stop
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	return stop, after + 1, nil
}

// detach ends stream stop; without a stream the idle timeout runs.
func (c *httpConn) detach(stop chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream != stop {
		return
	}
	c.stream = nil
	if c.idle != nil {
		c.idle.Reset(c.h.opts.IdleTimeout)
	}
}

// pending returns the kept messages from number from on, whether the
// stream ends after them (closed, all written), and a channel closed at
// the next change.
func (c *httpConn) pending(from int64) (batch []httpMsg, end bool, changed chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) > 0 {
		if i := from - c.out[0].n; i >= 0 && i < int64(len(c.out)) {
			batch = c.out[i:]
		}
	}
	select {
	case <-c.closed:
		end = from+int64(len(batch)) == c.next
	default:
	}
	return batch, end, c.changed
}

// wrote records that the messages up to n were written to a stream.
func (c *httpConn) wrote(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.written {
		c.written = n
		c.trim()
		c.signal()
	}
}

// trim drops the messages the agent has, and written ones beyond the
// last httpReplay. The caller holds c.mu.
func (c *httpConn) trim() {
	i := 0
	for i < len(c.out) {
		n := c.out[i].n
		if n > c.acked && (n > c.written || c.written-n < httpReplay) {
			break
		}
		i++
	}
	if i > 0 {
		c.out = append(c.out[:0:0], c.out[i:]...)
	}
}

// HTTPDialOptions configures DialHTTP. The zero value works.
type HTTPDialOptions struct {
	// HTTPClient makes the requests; nil is http.DefaultClient. Its
	// Timeout must be zero: the event stream is one long response.
	HTTPClient *http.Client
	// Header is added to every request (e.g. Authorization).
	Header http.Header
	// MaxMessageSize bounds a received message; 0 means
	// DefaultMaxMessageSize.
	MaxMessageSize int
}

// DialHTTP returns an http@0.1 connection to the binding at baseURL (the
// prefix of its paths, e.g. "http://127.0.0.1:8080/uiap") for an agent to
// Connect over. It makes no request: the first Send opens the connection
// (POST baseURL/sessions), later ones POST to it, and an event stream
// (reopened with Last-Event-ID when it breaks) yields what the app sends.
// Close deletes the connection. opts may be nil.
func DialHTTP(ctx context.Context, baseURL string, opts *HTTPDialOptions) (Transport, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/") + "/sessions")
	if err != nil {
		return nil, fmt.Errorf("uicontrol: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("uicontrol: %q is not an http or https URL", baseURL)
	}
	t := &httpClientConn{sessions: u, in: make(chan []byte, httpClientBuffer), done: make(chan struct{}), gone: make(chan struct{})}
	if opts != nil {
		t.client, t.header, t.maxSize = opts.HTTPClient, opts.Header, opts.MaxMessageSize
	}
	if t.client == nil {
		t.client = http.DefaultClient
	}
	if t.maxSize <= 0 {
		t.maxSize = DefaultMaxMessageSize
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// httpClientConn is the agent side of an HTTP connection.
type httpClientConn struct {
	client   *http.Client
	header   http.Header
	sessions *url.URL
	maxSize  int
	in       chan []byte
	done     chan struct{} // closed by Close
	gone     chan struct{} // the connection ended; goneErr is set before
	goneErr  error
	closeO   sync.Once
	goneO    sync.Once
	ctx      context.Context // ends the event stream at Close
	cancel   context.CancelFunc

	mu   sync.Mutex
	conn string // the connection's URL, once opened
	last int64  // the number of the last message received
}

func (t *httpClientConn) fail(err error) {
	t.goneO.Do(func() {
		if err == nil || errors.Is(err, ErrClosed) {
			t.goneErr = ErrClosed
		} else {
			t.goneErr = fmt.Errorf("%w: %w", ErrClosed, err)
		}
		close(t.gone)
	})
}

func (t *httpClientConn) request(ctx context.Context, method, u string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	telemetry.Inject(ctx, req.Header)
	for k, v := range t.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return t.client.Do(req)
}

// statusError turns a binding error response into an error: the §10
// payload it carries as *Error, else the status.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e Error
	if json.Unmarshal(b, &e) == nil && e.Code != "" {
		return &e
	}
	return fmt.Errorf("uicontrol: %s", resp.Status)
}

func (t *httpClientConn) Send(ctx context.Context, msg []byte) error {
	select {
	case <-t.done:
		return ErrClosed
	case <-t.gone:
		return t.goneErr
	default:
	}
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn == "" {
		return t.open(ctx, msg)
	}
	resp, err := t.request(ctx, http.MethodPost, conn+"/messages", msg)
	if err != nil {
		// The message may or may not have arrived: the connection is in an
		// unknown state, as a WebSocket is after a write cut short.
		t.fail(err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return t.goneErr
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusOK, http.StatusNoContent:
		return nil
	case http.StatusNotFound, http.StatusGone:
		t.fail(nil)
		return ErrClosed
	}
	return statusError(resp)
}

// open opens the connection with its first message.
func (t *httpClientConn) open(ctx context.Context, msg []byte) error {
	resp, err := t.request(ctx, http.MethodPost, t.sessions.String(), msg)
	if err != nil {
		return fmt.Errorf("uicontrol: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return statusError(resp)
	}
	loc, err := t.sessions.Parse(resp.Header.Get("Location"))
	if err != nil || resp.Header.Get("Location") == "" {
		return fmt.Errorf("uicontrol: POST %s: no connection URL in the response", t.sessions)
	}
	first, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.maxSize)+1))
	if err != nil {
		return fmt.Errorf("uicontrol: %w", err)
	}
	if len(first) > t.maxSize {
		return fmt.Errorf("uicontrol: first answer exceeds %d bytes", t.maxSize)
	}
	t.mu.Lock()
	t.conn = loc.String()
	if len(first) > 0 {
		t.last = 1
		t.in <- first // the buffer is empty: nothing was received before
	}
	t.mu.Unlock()
	go t.stream()
	return nil
}

// stream follows the event stream until the connection ends, reopening
// it with Last-Event-ID when it breaks.
func (t *httpClientConn) stream() {
	failures := 0
	for {
		err, fatal, progressed := t.streamOnce()
		select {
		case <-t.done:
			return
		case <-t.gone:
			return
		default:
		}
		if fatal {
			t.fail(err)
			return
		}
		if progressed {
			failures = 0
		}
		if failures++; failures > httpRetries {
			t.fail(err)
			return
		}
		backoff := time.NewTimer(time.Duration(failures-1) * 500 * time.Millisecond)
		select {
		case <-backoff.C:
		case <-t.done:
			backoff.Stop()
			return
		}
	}
}

// streamOnce reads one event-stream response. progressed reports that
// the server answered it.
func (t *httpClientConn) streamOnce() (err error, fatal, progressed bool) {
	t.mu.Lock()
	u, last := t.conn+"/events", t.last
	t.mu.Unlock()
	req, err := http.NewRequestWithContext(t.ctx, http.MethodGet, u, nil)
	if err != nil {
		return err, true, false
	}
	for k, v := range t.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err, false, false
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return statusError(resp), true, true
	case resp.StatusCode != http.StatusOK:
		return statusError(resp), resp.StatusCode < 500, true
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("uicontrol: event stream has Content-Type %q", mt), true, true
	}
	dec := sse.NewDecoder(resp.Body)
	dec.SetMaxEventSize(t.maxSize)
	for {
		ev, err := dec.Next()
		if err != nil {
			return err, errors.Is(err, sse.ErrTooLarge), true
		}
		switch ev.Type {
		case "close":
			t.fail(nil)
			return nil, true, true
		case "", "message":
		default:
			continue // an event type of a later version
		}
		n, perr := strconv.ParseInt(ev.ID, 10, 64)
		if perr != nil || n <= 0 {
			return fmt.Errorf("uicontrol: event without a message number"), true, true
		}
		if n <= last {
			continue // already received
		}
		if n != last+1 {
			return fmt.Errorf("uicontrol: event stream skipped from %d to %d", last, n), true, true
		}
		select {
		case t.in <- bytes.Clone(ev.Data):
		case <-t.done:
			return ErrClosed, true, true
		}
		last = n
		t.mu.Lock()
		t.last = n
		t.mu.Unlock()
	}
}

func (t *httpClientConn) Receive(ctx context.Context) ([]byte, error) {
	select {
	case <-t.done:
		return nil, ErrClosed
	default:
	}
	select {
	case b := <-t.in:
		return b, nil
	case <-t.gone:
		select { // what arrived before the end
		case b := <-t.in:
			return b, nil
		default:
			return nil, t.goneErr
		}
	case <-t.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the event stream and deletes the connection (in the
// background, for at most 5 s: Close does not wait for the network).
func (t *httpClientConn) Close() error {
	t.closeO.Do(func() {
		close(t.done)
		t.cancel()
		t.mu.Lock()
		conn := t.conn
		t.mu.Unlock()
		if conn == "" {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if resp, err := t.request(ctx, http.MethodDelete, conn, nil); err == nil {
				_ = resp.Body.Close()
			}
		}()
	})
	return nil
}
