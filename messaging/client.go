package messaging

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/messaging/internal/binding"
	"github.com/coder/websocket"
)

// ClientOptions configures a Client.
type ClientOptions struct {
	// Key signs the envelopes the client writes: an ask given unsigned,
	// ACKs and cancels. Required.
	Key *envelope.PrivateKey
	// WebSocket selects the WebSocket binding (/uamp/1/ws, one
	// connection per request, §7). The default is HTTP/2 + SSE:
	// envelopes POSTed to /v1/messages, deltas read from GET
	// /v1/stream/{id} as Server-Sent Events.
	WebSocket bool
	// TLS is the client's TLS configuration (RootCAs, and Certificates
	// for mTLS, such as one from KeyCertificate); it is cloned, and TLS 1.3 is
	// required whatever it says. Default: system roots, no certificate.
	TLS *tls.Config
	// Transport carries the SSE binding's requests instead of the HTTP/2
	// transport made from TLS: an HTTP/3 one (package http3msg) makes
	// the binding HTTP/3, with that transport's TLS configuration.
	// WebSocket handshakes stay on HTTP/1.1 over TLS.
	Transport http.RoundTripper
	// ServerKeys verifies the server's error envelopes; nil reads them
	// unverified (their code still comes from a TLS-authenticated peer).
	ServerKeys envelope.KeyResolver
	// AckEvery is how many deltas the client receives between two ACKs;
	// default half the request's window, at most the window.
	AckEvery int
	// MaxReconnects is how many reconnections in a row may fail before
	// the stream fails; default 5.
	MaxReconnects int
	// ReconnectDelay is the first wait before reconnecting, doubled on
	// each failure in a row; default 50 ms.
	ReconnectDelay time.Duration
}

// Client sends signed requests to a UAMP server and follows their
// streams, ACKing as it reads and resuming after a dropped connection.
// It is safe for concurrent use.
type Client struct {
	base   *url.URL
	opts   ClientOptions
	http   *http.Client // HTTP/2 only, or ClientOptions.Transport
	wsHTTP *http.Client // HTTP/1.1 only, for the WebSocket handshake
}

// NewClient returns a client of the server at baseURL (https://host:port).
func NewClient(baseURL string, opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("messaging: server URL %q is not https://host", baseURL)
	}
	if o.Key == nil {
		return nil, errors.New("messaging: ClientOptions.Key is required (ACKs and cancels are signed)")
	}
	if o.MaxReconnects <= 0 {
		o.MaxReconnects = 5
	}
	if o.ReconnectDelay <= 0 {
		o.ReconnectDelay = 50 * time.Millisecond
	}
	conf := &tls.Config{}
	if o.TLS != nil {
		conf = o.TLS.Clone()
	}
	conf.MinVersion = tls.VersionTLS13
	transport := func(h2 bool) *http.Client {
		var p http.Protocols
		p.SetHTTP2(h2)
		p.SetHTTP1(!h2)
		return &http.Client{Transport: &http.Transport{
			TLSClientConfig: conf.Clone(), Protocols: &p, ForceAttemptHTTP2: h2,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second, IdleConnTimeout: 90 * time.Second,
		}}
	}
	c := &Client{base: u, opts: o, http: transport(true), wsHTTP: transport(false)}
	if o.Transport != nil {
		c.http = &http.Client{Transport: o.Transport}
	}
	return c, nil
}

// CloseIdleConnections closes the client's idle connections.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	c.wsHTTP.CloseIdleConnections()
}

// Reply is the answer to a request being streamed: its deltas, read once
// with Deltas.
type Reply struct {
	c        *Client
	ctx      context.Context
	req      *envelope.Envelope
	streamID string
	ackEvery int64
	stream   string // the SSE stream URL

	ws      *websocket.Conn // the current WebSocket connection
	wsMu    sync.Mutex
	carrier binding.Carrier // askOver's binding
	started atomic.Bool
}

// Ask sends the request req — an ask or subscribe, signed with the
// client's Key when its sig is empty, sent as it is otherwise — and
// returns its Reply. ctx bounds the whole exchange, reading the deltas
// included. Over SSE a refusal is Ask's error (an *envelope.Error); over
// WebSocket the server answers with the stream itself, so a refusal is
// the first error Deltas yields.
func (c *Client) Ask(ctx context.Context, req *envelope.Envelope) (*Reply, error) {
	r, b, err := c.newReply(ctx, req)
	if err != nil {
		return nil, err
	}
	if c.opts.WebSocket {
		conn, err := c.dial(ctx)
		if err != nil {
			return nil, err
		}
		if err := conn.Write(ctx, websocket.MessageBinary, appendFrame(nil, b)); err != nil {
			conn.CloseNow()
			return nil, err
		}
		r.ws = conn
	} else {
		resp, err := c.post(ctx, b)
		if err != nil {
			return nil, err
		}
		loc, err := resp.Location()
		if err != nil {
			return nil, fmt.Errorf("messaging: 202 without a Location: %w", err)
		}
		r.stream = loc.String()
	}
	return r, nil
}

// newReply signs req when its sig is empty and returns its Reply, not
// yet sent, and its bytes.
func (c *Client) newReply(ctx context.Context, req *envelope.Envelope) (*Reply, []byte, error) {
	e := req
	if e.Sig == "" {
		e = req.Clone()
		if err := envelope.Sign(e, c.opts.Key); err != nil {
			return nil, nil, err
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, nil, err
	}
	bare, ok := envelope.ParseID(e.ID)
	if !ok {
		return nil, nil, envelope.NewError(envelope.CodeBadRequest, "id is not a UUID", nil)
	}
	r := &Reply{c: c, ctx: ctx, req: e, streamID: e.StreamID}
	if r.streamID == "" {
		r.streamID = "str-" + bare // the server's default (Server.start)
	}
	r.ackEvery = int64(c.opts.AckEvery)
	if r.ackEvery <= 0 {
		r.ackEvery = int64(max(1, e.Window()/2))
	}
	r.ackEvery = min(r.ackEvery, int64(e.Window()))
	return r, b, nil
}

// StreamID returns the stream_id of the reply.
func (r *Reply) StreamID() string { return r.streamID }

// Request returns the request as sent, signed.
func (r *Reply) Request() *envelope.Envelope { return r.req }

// post POSTs an envelope to /v1/messages and returns the 202 response
// (its body closed), or the error the server answered.
func (c *Client) post(ctx context.Context, body []byte) (*http.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(pathMessages).String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", mediaType)
	telemetry.Inject(ctx, hr.Header)
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil, c.responseError(ctx, resp)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return resp, nil
}

// responseError reads the error envelope of a refusal.
func (c *Client) responseError(ctx context.Context, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, envelope.MaxEnvelopeSize))
	e, err := c.readError(ctx, b)
	if err != nil {
		return envelope.NewError(statusCode(resp.StatusCode), "HTTP "+resp.Status, err)
	}
	if e.Code == envelope.CodeBusy {
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	return e
}

// readError reads an error envelope (verified when ServerKeys is set).
func (c *Client) readError(ctx context.Context, b []byte) (*envelope.Error, error) {
	var env *envelope.Envelope
	var err error
	if c.opts.ServerKeys != nil {
		env, err = envelope.Open(ctx, b, c.opts.ServerKeys)
	} else {
		env, err = envelope.Decode(b)
	}
	if err != nil {
		return nil, err
	}
	if env.Intent != envelope.IntentError {
		return nil, fmt.Errorf("messaging: a %s envelope where an error was expected", env.Intent)
	}
	return envelope.ParseErrorBody(env.Body)
}

// statusCode maps an HTTP status back to a UAMP code, for a refusal
// without a readable error envelope.
func statusCode(status int) envelope.Code {
	for _, c := range []envelope.Code{envelope.CodeBadRequest, envelope.CodeUnauthenticated, envelope.CodeUnauthorized,
		envelope.CodeMissingDeltaSeq, envelope.CodePayloadTooLarge, envelope.CodeUnsupportedMediaType, envelope.CodeBusy} {
		if c.HTTPStatus() == status {
			return c
		}
	}
	return envelope.CodeInternal
}

// dial opens a WebSocket connection to /uamp/1/ws.
func (c *Client) dial(ctx context.Context) (*websocket.Conn, error) {
	u := *c.base.JoinPath(pathWebSocket)
	u.Scheme = "wss"
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.wsHTTP, Subprotocols: []string{subprotocol}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
			if e := c.responseError(ctx, resp); e != nil {
				return nil, e
			}
		}
		return nil, err
	}
	if conn.Subprotocol() != subprotocol {
		conn.CloseNow()
		return nil, errors.New("messaging: server did not select subprotocol " + subprotocol)
	}
	conn.SetReadLimit(envelope.MaxDeltaSize + frameHeaderSize)
	return conn, nil
}

// control returns a signed envelope about the request: an ACK
// (progress, ext.ack_seq) or a cancel.
func (r *Reply) control(intent envelope.Intent, ackSeq int64) ([]byte, error) {
	e := envelope.New(r.req.From, r.req.To, intent, envelope.Body{Type: "text/plain", Content: ""})
	e.ReplyTo = r.req.ID
	if intent == envelope.IntentProgress {
		e.Ext = map[string]any{"ack_seq": float64(ackSeq)}
	}
	if err := envelope.Sign(e, r.c.opts.Key); err != nil {
		return nil, err
	}
	return json.Marshal(e)
}

// send delivers a control envelope: POSTed over SSE, as a record over
// WebSocket.
func (r *Reply) send(ctx context.Context, intent envelope.Intent, ackSeq int64) error {
	b, err := r.control(intent, ackSeq)
	if err != nil {
		return err
	}
	if r.carrier != nil {
		return r.carrier.Send(ctx, b)
	}
	if r.c.opts.WebSocket {
		r.wsMu.Lock()
		conn := r.ws
		r.wsMu.Unlock()
		if conn == nil {
			return errors.New("messaging: not connected")
		}
		return conn.Write(ctx, websocket.MessageBinary, appendFrame(nil, b))
	}
	_, err = r.c.post(ctx, b)
	return err
}

// Cancel asks the server to cancel the request (§4.1 cancel); the stream
// then ends with a cancel delta. A request that has ended is refused
// with 4.09 (envelope.ErrTerminal) over SSE.
func (r *Reply) Cancel(ctx context.Context) error {
	return r.send(ctx, envelope.IntentCancel, 0)
}

// Cancel asks the server to cancel req, a request the client sent with
// Ask (§4.1 cancel), without its Reply: for a requester whose context
// ended, which also closed a WebSocket reply's connection. Over WebSocket
// the cancel goes on a fresh connection, closed after it.
func (c *Client) Cancel(ctx context.Context, req *envelope.Envelope) error {
	r := &Reply{c: c, ctx: ctx, req: req}
	if c.opts.WebSocket {
		conn, err := c.dial(ctx)
		if err != nil {
			return err
		}
		r.ws = conn
		defer r.closeWS()
	}
	return r.Cancel(ctx)
}

// KeyID returns the kid of the key the client signs with
// (ClientOptions.Key).
func (c *Client) KeyID() string { return c.opts.Key.KID() }

// acker sends ACKs in the background, the newest pending one first: the
// reader never waits for an ACK round trip.
type acker struct {
	r       *Reply
	pending chan int64 // cap 1: the newest ack_seq to send
	done    chan struct{}
	sent    atomic.Int64
}

// newAcker starts r's acker, which stops with ctx or stop.
//
// An ACK that fails on the way (a connection closed under it, a server
// out of reach) is sent again, after ReconnectDelay doubled on each
// failure up to a second, until it goes through, a newer ACK replaces
// it, or a server refuses it for good: the producer may be waiting for
// it, with a full window, while the consumer waits for deltas.
func (r *Reply) newAcker(ctx context.Context) *acker {
	a := &acker{r: r, pending: make(chan int64, 1), done: make(chan struct{})}
	a.sent.Store(-1)
	go func() {
		defer close(a.done)
		retry := time.NewTimer(time.Hour)
		retry.Stop()
		defer retry.Stop()
		failed := int64(-1) // the ACK to send again, if any
		delay := r.c.opts.ReconnectDelay
		send := func(seq int64) {
			err := r.send(ctx, envelope.IntentProgress, seq)
			var refused *envelope.Error
			switch {
			case err == nil:
				a.sent.Store(seq)
				failed, delay = -1, r.c.opts.ReconnectDelay
			case ctx.Err() != nil, errors.As(err, &refused) && !refused.Retry:
				failed = -1 // nothing to send it to, or refused for good
			default:
				failed = seq
				retry.Reset(delay)
				delay = min(2*delay, time.Second)
			}
		}
		for {
			select {
			case seq, ok := <-a.pending:
				if !ok {
					return
				}
				send(max(seq, failed))
			case <-retry.C:
				if failed > a.sent.Load() {
					send(failed)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return a
}

// ack queues an ACK of seq, replacing one not yet sent.
func (a *acker) ack(seq int64) {
	for {
		select {
		case a.pending <- seq:
			return
		default:
		}
		select {
		case old := <-a.pending:
			seq = max(seq, old)
		default:
		}
	}
}

func (a *acker) stop() {
	close(a.pending)
	<-a.done
}

// errStreamClosed: the connection ended before the final delta.
var errStreamClosed = errors.New("messaging: stream connection closed before the final delta")

// Deltas returns the reply's deltas in order, once each. It ACKs every
// AckEvery deltas and the final one, and reconnects after a dropped
// connection, resuming after the last delta received. Iteration ends
// after the final delta: done and cancel are yielded; an error delta is
// yielded as its *envelope.Error. A gap is 4.09, and so is a delta after
// the final one; a connection that cannot be re-established ends
// iteration with the last error. Breaking the loop early cancels the
// request. Deltas may be ranged over once.
func (r *Reply) Deltas() iter.Seq2[*envelope.Delta, error] {
	return func(yield func(*envelope.Delta, error) bool) {
		if !r.started.CompareAndSwap(false, true) {
			yield(nil, errors.New("messaging: Reply.Deltas ranged over twice"))
			return
		}
		ctx, cancel := context.WithCancel(r.ctx)
		defer cancel()
		acks := r.newAcker(ctx)
		defer acks.stop()
		seq := &sequencer{streamID: r.streamID}
		lastAck := int64(-1)
		finished := false
		defer func() {
			if !finished && r.ctx.Err() == nil {
				// The consumer broke the loop: cancel the producer.
				cctx, ccancel := context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
				r.Cancel(cctx)
				ccancel()
			}
			r.closeWS()
			if r.carrier != nil {
				r.carrier.Close()
			}
		}()
		// deliver handles one delta; false ends iteration.
		deliver := func(d *envelope.Delta) bool {
			ok, err := seq.accept(d)
			if err != nil {
				yield(nil, err)
				return false
			}
			if !ok {
				return true // duplicate
			}
			if d.Type.Final() {
				finished = true
				// Release the stream on the server now rather than at its linger.
				actx, acancel := context.WithTimeout(ctx, 5*time.Second)
				r.send(actx, envelope.IntentProgress, d.Seq)
				acancel()
				if d.Type == envelope.DeltaError {
					yield(nil, deltaError(d))
				} else {
					yield(d, nil)
				}
				return false
			}
			if !yield(d, nil) {
				return false
			}
			if d.Seq-lastAck >= r.ackEvery {
				lastAck = d.Seq
				acks.ack(d.Seq)
			}
			return true
		}
		var follow func(ctx context.Context, resume bool, deliver func(*envelope.Delta) bool) (bool, error)
		switch {
		case r.carrier != nil:
			follow = func(ctx context.Context, resume bool, deliver func(*envelope.Delta) bool) (bool, error) {
				return r.followCarrier(ctx, resume, seq.last(), deliver)
			}
		case r.c.opts.WebSocket:
			follow = func(ctx context.Context, resume bool, deliver func(*envelope.Delta) bool) (bool, error) {
				return r.followWS(ctx, resume, seq.last(), deliver)
			}
		default:
			follow = func(ctx context.Context, resume bool, deliver func(*envelope.Delta) bool) (bool, error) {
				return r.followSSE(ctx, seq.last(), deliver)
			}
		}
		failures := 0
		delay := r.c.opts.ReconnectDelay
		for attempt := 0; ; attempt++ {
			before := seq.last()
			stop, err := follow(ctx, attempt > 0, deliver)
			if stop {
				return
			}
			if ctx.Err() != nil {
				finished = true // nothing left to cancel with
				yield(nil, ctx.Err())
				return
			}
			if f := (fatal{}); errors.As(err, &f) {
				yield(nil, f.err)
				return
			}
			if e := (*envelope.Error)(nil); errors.As(err, &e) && !e.Retry {
				yield(nil, err)
				return
			}
			if seq.last() > before {
				failures, delay = 0, r.c.opts.ReconnectDelay
			}
			// An ACK may have been lost with the connection: the resumed
			// stream ACKs again (over WebSocket the resume is an ACK).
			if last := seq.last(); last >= 0 && r.carrier == nil && !r.c.opts.WebSocket {
				lastAck = last
				acks.ack(last)
			}
			failures++
			if failures > r.c.opts.MaxReconnects {
				yield(nil, fmt.Errorf("messaging: stream %s lost after %d reconnections: %w", r.streamID, failures-1, err))
				return
			}
			select {
			case <-time.After(delay):
			case <-ctx.Done():
			}
			delay *= 2
		}
	}
}

// deltaError returns the *envelope.Error an error delta carries.
func deltaError(d *envelope.Delta) error {
	var e envelope.Error
	if err := json.Unmarshal(d.Payload, &e); err != nil || e.Code == "" {
		return envelope.NewError(envelope.CodeInternal, "error delta without {code, message, retry}", err)
	}
	return &e
}

// followSSE reads the stream over SSE from the delta after last, until
// deliver stops (stop true) or the connection ends (err).
func (r *Reply) followSSE(ctx context.Context, last int64, deliver func(*envelope.Delta) bool) (stop bool, err error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, r.stream, nil)
	if err != nil {
		return false, err
	}
	hr.Header.Set("Accept", "text/event-stream")
	telemetry.Inject(ctx, hr.Header)
	if last >= 0 {
		hr.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := r.c.http.Do(hr)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, r.c.responseError(ctx, resp)
	}
	if mt := resp.Header.Get("Content-Type"); !strings.HasPrefix(mt, "text/event-stream") {
		return false, fmt.Errorf("messaging: stream of type %q", mt)
	}
	dec := sse.NewDecoder(resp.Body)
	dec.SetMaxEventSize(envelope.MaxDeltaSize)
	for {
		ev, err := dec.Next()
		if err != nil {
			if err == io.EOF {
				err = errStreamClosed
			}
			return false, err
		}
		d, err := decodeDelta(ev.Data)
		if err != nil {
			return false, fatal{err}
		}
		if !deliver(d) {
			return true, nil
		}
	}
}

// fatal marks an error that ends iteration without reconnecting: a
// delta or message the peer should not have sent, or its error envelope.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }
func (f fatal) Unwrap() error { return f.err }

func (r *Reply) closeWS() {
	r.wsMu.Lock()
	conn := r.ws
	r.ws = nil
	r.wsMu.Unlock()
	if conn != nil {
		conn.Close(websocket.StatusNormalClosure, "")
	}
}

// followWS reads the stream over WebSocket. When resume is set it first
// reconnects and sends an ACK of last, which makes the server follow the
// stream on the new connection from the delta after it.
func (r *Reply) followWS(ctx context.Context, resume bool, last int64, deliver func(*envelope.Delta) bool) (stop bool, err error) {
	if resume {
		r.closeWS()
		conn, err := r.c.dial(ctx)
		if err != nil {
			return false, err
		}
		r.wsMu.Lock()
		r.ws = conn
		r.wsMu.Unlock()
		if err := r.send(ctx, envelope.IntentProgress, last); err != nil {
			return false, err
		}
	}
	r.wsMu.Lock()
	conn := r.ws
	r.wsMu.Unlock()
	if conn == nil {
		return false, errStreamClosed
	}
	var buf bytes.Buffer
	for {
		typ, rd, err := conn.Reader(ctx)
		if err != nil {
			return false, err
		}
		if typ != websocket.MessageBinary {
			return false, fatal{envelope.NewError(envelope.CodeBadRequest, "text message on a UAMP WebSocket", nil)}
		}
		buf.Reset()
		if _, err := buf.ReadFrom(rd); err != nil {
			return false, err
		}
		fr := frameReader{msg: buf.Bytes(), max: envelope.MaxDeltaSize}
		for {
			rec, err := fr.next()
			if err != nil {
				return false, fatal{envelope.NewError(envelope.CodeBadRequest, "malformed WebSocket message", err)}
			}
			if rec == nil {
				break
			}
			d, derr := decodeDelta(rec)
			if derr != nil {
				// Not a delta: the server's error envelope answering us.
				if e, err := r.c.readError(ctx, rec); err == nil {
					return false, fatal{e}
				}
				return false, fatal{derr}
			}
			if !deliver(d) {
				return true, nil
			}
		}
	}
}
