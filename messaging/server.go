package messaging

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/domainmetrics"
	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// mediaType is the media type of an envelope on the HTTP binding (§11,
// with the version parameter of Appendix C.1).
const mediaType = "application/uamp+json;v=1"

// The paths of the bindings (§7).
const (
	pathMessages  = "/v1/messages"
	pathStream    = "/v1/stream/" // + stream_id
	pathWebSocket = "/uamp/1/ws"
)

// Handler answers the requests (asks and subscribes) a Server accepts:
// it produces the request's deltas through s and returns when the
// request is answered. The Server ends the stream after it: with a done
// delta when it returns nil without having sent a final delta, with an
// error delta carrying the wire form of a non-nil error (an
// *envelope.Error as it is, anything else as 5.00 without its text),
// and with a cancel delta when the requester cancelled. ctx ends when
// the requester cancels, the stream is abandoned or the Server closes;
// Send then returns the cause. ServeUAMP is called concurrently, once
// per request, and must not use s after it returns.
type Handler interface {
	ServeUAMP(ctx context.Context, req *envelope.Envelope, s *Stream) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *envelope.Envelope, s *Stream) error

// ServeUAMP calls f.
func (f HandlerFunc) ServeUAMP(ctx context.Context, req *envelope.Envelope, s *Stream) error {
	return f(ctx, req, s)
}

// echoChunkSize is the most bytes of content Echo puts in one delta.
const echoChunkSize = 256

// Echo is the built-in echo agent: it streams the request's body.content
// back as chunk deltas, {"content": "<at most EchoChunkSize bytes, cut at
// a character boundary>"}, then done.
var Echo Handler = HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *Stream) error {
	content := req.Body.Content
	for len(content) > 0 {
		n := min(len(content), echoChunkSize)
		for n < len(content) && !utf8.RuneStart(content[n]) {
			n--
		}
		payload, _ := json.Marshal(map[string]string{"content": content[:n]})
		if err := s.Send(ctx, envelope.DeltaChunk, payload); err != nil {
			return err
		}
		content = content[n:]
	}
	return s.Send(ctx, envelope.DeltaDone, nil)
})

// Options configures a Server; the zero value works, but trusts no
// sender key (Keys), so that every envelope is refused with 4.01.
type Options struct {
	// ID is the server's identity (a URI such as did:web:agent.example):
	// envelopes must name it in to (4.03 otherwise), and it is the from
	// of the error envelopes the server writes. Default
	// "did:web:localhost".
	ID string
	// Hosts, when set, reports the other identities the server answers
	// for — the agents it hosts, such as
	// did:web:agent.example:agents:support — which an envelope may name
	// in to instead of ID; the Handler tells them apart by the request's
	// to. It may change its answers while the server runs.
	Hosts func(id string) bool
	// Key signs the server's error envelopes (§6.3: every envelope
	// carries sig); default a fresh Ed25519 key, which nobody trusts.
	Key *envelope.PrivateKey
	// Keys resolves the keys of senders.
	Keys envelope.KeyResolver
	// Authenticate names the principal of a request; from must equal it
	// (4.03 otherwise). Default: the TLS client certificate the
	// handshake verified (TLSConfig with client CAs), which must name
	// exactly one URI, the principal (such as did:web:client.example).
	Authenticate Authenticator
	// Replay refuses replayed asks, subscribes and cancels and a ts out
	// of its window; default envelope.NewReplayWindow(nil). ACKs are
	// idempotent and checked for skew only (MaxSkew).
	Replay envelope.ReplayGuard
	// MaxSkew is how far the ts of an ACK may be from now; default
	// envelope.DefaultReplayWindow.
	MaxSkew time.Duration
	// CapTokens, when set, checks every envelope's cap_token.
	CapTokens *envelope.CapTokenPolicy
	// MaxBodySize bounds an envelope (4.13 beyond); default and at most
	// envelope.MaxEnvelopeSize.
	MaxBodySize int
	// MaxStreams bounds the streams held at once, running or kept for
	// resume; beyond it a request is refused with 5.04. Default 1024.
	MaxStreams int
	// MaxDeltaWindow is the largest delta_window accepted (4.00 beyond:
	// the window bounds the memory a stream holds); default 256.
	MaxDeltaWindow int
	// IdleTimeout is how long a producer blocked on a full window waits
	// for an ACK before the stream is abandoned (its context cancelled).
	// Default one minute.
	IdleTimeout time.Duration
	// Linger is how long a stream is kept for resume after its final
	// delta when that delta is not ACKed. Default one minute.
	Linger time.Duration
	// RetryAfter is the Retry-After of 5.04 answers; default one second.
	RetryAfter time.Duration
	// Logger receives handler panics and failures; default slog.Default().
	Logger *slog.Logger
	// Streams, when set, keeps every stream in a store other Servers
	// share — replicas of one service on one database; agentry serve
	// sets it on PostgreSQL — so that a consumer resumes a stream (GET
	// /v1/stream/{id} with Last-Event-ID), ACKs it and cancels it
	// through any of them while its producer lives, and learns, with an
	// error delta 5.02, when the producer died. nil (the default) keeps
	// streams in this Server's memory only.
	Streams streamlog.Store
	// MeterProvider counts the envelopes refused, by UAMP error code
	// (agentry.uamp.envelopes.refused); nil is the global provider.
	MeterProvider metric.MeterProvider
	// TracerProvider makes a span of each envelope received ("uamp
	// {intent}"); nil is the global provider.
	TracerProvider trace.TracerProvider
}

// Server is an http.Handler serving UAMP over HTTP/2 + SSE (POST
// /v1/messages, GET /v1/stream/{id}) and WebSocket (/uamp/1/ws), over
// TLS 1.3 only: a request that did not arrive over TLS 1.3 (plain HTTP,
// h2c, an older TLS) is refused with 4.03, and the SSE binding refuses
// HTTP/1 (505). Use TLSConfig and NewHTTPServer to serve it.
type Server struct {
	opts    Options
	handler Handler
	mux     *http.ServeMux
	ctx     context.Context
	stop    context.CancelFunc

	shared    *sharing // nil without Options.Streams
	mu        sync.Mutex
	byStream  map[streamKey]*Stream
	byRequest map[streamKey]*Stream
	wg        sync.WaitGroup
	metrics   *domainmetrics.Metrics
	tracer    trace.Tracer
}

// streamKey names a stream or request within its owner's namespace:
// stream ids are chosen by requesters and never collide across them.
type streamKey struct{ owner, id string }

// NewServer returns a Server answering requests with h; opts may be nil.
func NewServer(h Handler, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ID == "" {
		o.ID = "did:web:localhost"
	}
	if o.Key == nil {
		k, err := envelope.GenerateKey(envelope.EdDSA, o.ID+"#ephemeral")
		if err != nil {
			panic(err) // crypto/rand failed
		}
		o.Key = k
	}
	if o.Authenticate == nil {
		o.Authenticate = clientCertificate
	}
	if o.Replay == nil {
		o.Replay = envelope.NewReplayWindow(nil)
	}
	if o.MaxSkew <= 0 {
		o.MaxSkew = envelope.DefaultReplayWindow
	}
	if o.MaxBodySize <= 0 || o.MaxBodySize > envelope.MaxEnvelopeSize {
		o.MaxBodySize = envelope.MaxEnvelopeSize
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxStreams, 1024)
	def(&o.MaxDeltaWindow, 256)
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defd(&o.IdleTimeout, time.Minute)
	defd(&o.Linger, time.Minute)
	defd(&o.RetryAfter, time.Second)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{opts: o, handler: h, mux: http.NewServeMux(), ctx: ctx, stop: stop,
		byStream: map[streamKey]*Stream{}, byRequest: map[streamKey]*Stream{}, metrics: domainmetrics.Of(o.MeterProvider),
		tracer: telemetry.Tracer(o.TracerProvider)}
	s.mux.HandleFunc("POST "+pathMessages, s.postMessage)
	s.mux.HandleFunc("GET "+pathStream+"{id}", s.getStream)
	s.mux.HandleFunc("GET "+pathWebSocket, s.serveWebSocket)
	if o.Streams != nil {
		s.shared = newSharing(o.Streams, o.Linger)
		s.wg.Add(1)
		go s.sweepShared()
	}
	return s
}

// ServeHTTP serves the UAMP endpoints; other paths are 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil || r.TLS.Version < tls.VersionTLS13 {
		s.writeError(w, "", "", envelope.NewError(envelope.CodeUnauthorized, "UAMP is served over TLS 1.3 only", nil))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close cancels every stream, ends the SSE responses and WebSocket
// connections it serves and waits for the handlers to return. Listeners
// are the http.Server's to close.
func (s *Server) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

// connContext returns a context for serving a connection: it ends with
// parent and when the Server closes.
func (s *Server) connContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// streams returns the number of streams held.
func (s *Server) streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byStream)
}

// busy is the 5.04 of an overloaded server.
func (s *Server) busy(msg string) *envelope.Error {
	e := envelope.NewError(envelope.CodeBusy, msg, nil)
	e.RetryAfter = s.opts.RetryAfter
	return e
}

// errorEnvelope returns the signed wire form of an error envelope for
// err, answering replyTo and addressed to to (the requester, or the
// anonymous "urn:uamp:anonymous" when unknown).
func (s *Server) errorEnvelope(to, replyTo string, err *envelope.Error) []byte {
	s.metrics.UAMPRefused(s.ctx, string(err.Code))
	if to == "" {
		to = "urn:uamp:anonymous"
	}
	e := envelope.NewErrorEnvelope(s.opts.ID, []string{to}, replyTo, err)
	if serr := envelope.Sign(e, s.opts.Key); serr != nil {
		s.opts.Logger.Error("uamp: cannot sign an error envelope", "error", serr)
	}
	b, _ := json.Marshal(e)
	return b
}

// writeError answers with the error envelope of err and the HTTP status
// of its code (Retry-After for 5.04).
func (s *Server) writeError(w http.ResponseWriter, to, replyTo string, err error) {
	s.writeErrorStatus(w, 0, to, replyTo, err)
}

func (s *Server) writeErrorStatus(w http.ResponseWriter, status int, to, replyTo string, err error) {
	e := envelope.AsError(err)
	if e.Code == envelope.CodeInternal {
		s.opts.Logger.Error("uamp: request failed", "error", err)
	}
	if status == 0 {
		status = e.HTTPStatus()
	}
	if e.Code == envelope.CodeBusy {
		secs := max(1, int((e.RetryAfter+time.Second-1)/time.Second))
		if e.RetryAfter <= 0 {
			secs = max(1, int(s.opts.RetryAfter/time.Second))
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	b := s.errorEnvelope(to, replyTo, e)
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// authenticate returns the principal of r, refusing with 4.01.
func (s *Server) authenticate(r *http.Request) (string, error) {
	p, err := s.opts.Authenticate(r)
	if err != nil {
		if e := (*envelope.Error)(nil); errors.As(err, &e) {
			return "", e
		}
		return "", envelope.NewError(envelope.CodeUnauthenticated, "not authenticated", err)
	}
	if p == "" {
		return "", envelope.NewError(envelope.CodeUnauthenticated, "not authenticated", nil)
	}
	return p, nil
}

// checkMediaType accepts application/uamp+json with v absent or 1 and
// charset absent or utf-8 (4.15 otherwise).
func checkMediaType(ct string) error {
	mt, params, err := mime.ParseMediaType(ct)
	bad := envelope.NewError(envelope.CodeUnsupportedMediaType, "Content-Type must be "+mediaType, nil)
	if err != nil || mt != "application/uamp+json" {
		return bad
	}
	if v, ok := params["v"]; ok && v != "1" {
		return bad
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return bad
	}
	return nil
}

// readBody reads at most limit bytes of r's body (4.13 beyond).
func readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	tooLarge := envelope.NewError(envelope.CodePayloadTooLarge, fmt.Sprintf("envelope larger than %d bytes", limit), nil)
	if r.ContentLength > int64(limit) {
		return nil, tooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
	if err != nil {
		if e := (*http.MaxBytesError)(nil); errors.As(err, &e) {
			return nil, tooLarge
		}
		return nil, envelope.NewError(envelope.CodeBadRequest, "cannot read the request body", err)
	}
	return b, nil
}

// open decodes and checks an envelope from principal: signature, from
// = principal, addressed to this server, cap_token. Replay and skew
// are checked by dispatch, which knows the intent.
func (s *Server) open(ctx context.Context, principal string, b []byte) (*envelope.Envelope, error) {
	e, err := envelope.Decode(b)
	if err != nil {
		return nil, err
	}
	if err := envelope.Verify(ctx, e, s.opts.Keys); err != nil {
		return e, err
	}
	if e.From != principal {
		return e, envelope.NewError(envelope.CodeUnauthorized, "from is not the authenticated principal", nil)
	}
	if !slices.Contains(e.To, s.opts.ID) && !slices.ContainsFunc(e.To, s.hosts) {
		return e, envelope.NewError(envelope.CodeUnauthorized, "envelope is not addressed to "+s.opts.ID, nil)
	}
	if s.opts.CapTokens != nil {
		if _, err := s.opts.CapTokens.Check(ctx, e); err != nil {
			return e, err
		}
	}
	return e, nil
}

// hosts reports whether the server answers for id too (Options.Hosts).
func (s *Server) hosts(id string) bool { return s.opts.Hosts != nil && s.opts.Hosts(id) }

// result is what dispatch did with an envelope.
type result struct {
	stream  *Stream // the stream an ask opened, or an ACK named
	resume  int64   // for an ACK: the delta_seq a consumer resuming would want
	started bool    // an ask opened stream
}

// dispatch acts on an opened envelope (dispatchEnvelope) within its
// span.
func (s *Server) dispatch(ctx context.Context, e *envelope.Envelope) (result, error) {
	ctx, span := s.startEnvelope(ctx, e)
	res, err := s.dispatchEnvelope(ctx, e)
	endEnvelope(span, err)
	return res, err
}

// dispatchEnvelope acts on an opened envelope: an ask or subscribe opens
// a stream, a progress envelope with ext.ack_seq ACKs one, a cancel
// cancels one. Other intents are refused (4.00).
func (s *Server) dispatchEnvelope(ctx context.Context, e *envelope.Envelope) (result, error) {
	switch e.Intent {
	case envelope.IntentAsk, envelope.IntentSubscribe:
		if err := s.checkFresh(ctx, e); err != nil {
			return result{}, err
		}
		st, err := s.start(ctx, e)
		return result{stream: st, started: true}, err
	case envelope.IntentProgress:
		seq, err := ackSeq(e)
		if err != nil {
			return result{}, err
		}
		ts, _ := e.Time() // Decode checked it
		if err := envelope.CheckSkew(ts, time.Now(), s.opts.MaxSkew); err != nil {
			return result{}, err
		}
		st, err := s.lookupRequest(e.From, e.ReplyTo)
		if err != nil {
			return result{}, err
		}
		return result{stream: st, resume: seq + 1}, st.ack(seq)
	case envelope.IntentCancel:
		if err := s.checkFresh(ctx, e); err != nil {
			return result{}, err
		}
		st, err := s.lookupRequest(e.From, e.ReplyTo)
		if err != nil {
			return result{}, err
		}
		return result{stream: st}, st.requestCancel()
	}
	return result{}, envelope.NewError(envelope.CodeBadRequest, fmt.Sprintf("intent %q is not served here", e.Intent), nil)
}

func (s *Server) checkFresh(ctx context.Context, e *envelope.Envelope) error {
	ts, _ := e.Time()
	return s.opts.Replay.Check(ctx, e.From, e.ID, ts)
}

// ackSeq reads ext.ack_seq: an integer, -1 (nothing received, for a
// consumer resuming from the start) or more.
func ackSeq(e *envelope.Envelope) (int64, error) {
	f, ok := e.Ext["ack_seq"].(float64)
	if !ok || e.ReplyTo == "" || f < -1 || f > envelope.MaxDeltaSeq || f != float64(int64(f)) {
		return 0, envelope.NewError(envelope.CodeBadRequest, "a progress envelope to a server is an ACK: reply_to and an integer ext.ack_seq ≥ -1", nil)
	}
	return int64(f), nil
}

// lookupRequest finds the stream of owner's request id; an unknown one is
// 4.09, not retryable (its deltas cannot be delivered).
func (s *Server) lookupRequest(owner, id string) (*Stream, error) {
	key, _ := envelope.ParseID(id)
	s.mu.Lock()
	st := s.byRequest[streamKey{owner, key}]
	s.mu.Unlock()
	if st == nil {
		e := noStream("no stream for request " + id)
		e = envelope.NewError(e.Code, e.Message, errNoRequest)
		e.Retry = false
		return nil, e
	}
	return st, nil
}

// errNoRequest is the cause of lookupRequest's refusal: the request may
// be another Server's (Options.Streams).
var errNoRequest = errors.New("messaging: no stream for the request here")

func noStream(msg string) *envelope.Error {
	e := envelope.NewError(envelope.CodeMissingDeltaSeq, msg, nil)
	e.Retry = false
	return e
}

// validStreamID reports whether a requester's stream_id can name a
// stream: 1 to 128 characters among letters, digits and "-._~:", so
// that it is one path segment as it is.
func validStreamID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~:", c) >= 0) {
			return false
		}
	}
	return true
}

// start opens the stream of request e and runs the handler.
func (s *Server) start(ctx context.Context, e *envelope.Envelope) (*Stream, error) {
	reqID, _ := envelope.ParseID(e.ID)
	id := e.StreamID
	if id == "" {
		id = "str-" + reqID
	} else if !validStreamID(id) {
		return nil, envelope.NewError(envelope.CodeBadRequest, "stream_id must be 1 to 128 of A-Z a-z 0-9 - . _ ~ :", nil)
	}
	// A smaller window than asked would deadlock a consumer that ACKs
	// every N ≤ delta_window deltas: refuse instead.
	window := e.Window()
	if window > s.opts.MaxDeltaWindow {
		return nil, envelope.NewError(envelope.CodeBadRequest, fmt.Sprintf("delta_window %d is above this server's maximum, %d", window, s.opts.MaxDeltaWindow), nil)
	}
	parent := s.ctx
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// The handler runs in the envelope's trace (the stream outlives
		// the request: only the span context is kept).
		parent = trace.ContextWithSpanContext(parent, sc)
	}
	st := newStream(parent, id, e.From, reqID, window, s.opts.IdleTimeout)
	sk, rk := streamKey{e.From, id}, streamKey{e.From, reqID}
	s.mu.Lock()
	switch {
	case s.ctx.Err() != nil:
		s.mu.Unlock()
		return nil, s.busy("server shutting down")
	case len(s.byStream) >= s.opts.MaxStreams:
		s.mu.Unlock()
		return nil, s.busy("too many streams")
	case s.byStream[sk] != nil || s.byRequest[rk] != nil:
		s.mu.Unlock()
		e := envelope.NewError(envelope.CodeMissingDeltaSeq, "stream_id "+strconv.Quote(id)+" is in use", nil)
		e.Retry = false
		return nil, e
	}
	s.byStream[sk], s.byRequest[rk] = st, st
	s.mu.Unlock()
	var kp *keeping
	if s.shared != nil {
		cctx, cancel := context.WithTimeout(ctx, s.shared.call)
		err := s.shared.store.Create(cctx, streamlog.Head{Key: st.key(), RequestID: reqID}, s.shared.terms)
		cancel()
		if err != nil {
			s.mu.Lock()
			delete(s.byStream, sk)
			delete(s.byRequest, rk)
			s.mu.Unlock()
			if errors.Is(err, streamlog.ErrExists) {
				e := envelope.NewError(envelope.CodeMissingDeltaSeq, "stream_id "+strconv.Quote(id)+" is in use", err)
				e.Retry = false
				return nil, e
			}
			return nil, s.storeFailed(err)
		}
		st.mu.Lock()
		st.stored, st.dirty = true, make(chan struct{}, 1)
		st.mu.Unlock()
		kp = &keeping{unkeep: make(chan struct{}), kept: make(chan struct{})}
		s.wg.Add(1)
		go s.keep(st, kp.unkeep, kp.kept)
	}
	s.wg.Add(1)
	go s.run(st, e, sk, rk, kp)
	return st, nil
}

// keeping is the keeper of a stream kept in the shared store: run closes
// unkeep to stop it, the keeper closes kept when it stopped.
type keeping struct {
	unkeep chan struct{}
	kept   chan struct{}
}

// closeFlush is how long a closing Server waits for a stream's final
// delta to be stored, so that a consumer resuming on another Server
// reads how the stream ended.
const closeFlush = 2 * time.Second

// run runs the handler of st, ends the stream and keeps it for resume
// until its final delta is ACKed or Linger passes; a stream kept in the
// shared store is then deleted from it (unless the Server is closing:
// other Servers are to read its end there).
func (s *Server) run(st *Stream, req *envelope.Envelope, sk, rk streamKey, kp *keeping) {
	defer s.wg.Done()
	err := s.serve(st, req)
	st.finish(s.ctx, err, s.opts.Linger)
	linger := time.NewTimer(s.opts.Linger)
	select {
	case <-st.released:
	case <-linger.C:
	case <-s.ctx.Done():
	}
	linger.Stop()
	st.cancel(context.Canceled)
	s.mu.Lock()
	delete(s.byStream, sk)
	delete(s.byRequest, rk)
	s.mu.Unlock()
	if kp != nil {
		closing := s.ctx.Err() != nil
		select {
		case <-st.ended:
			if closing { // the end is in the ring: let the keeper store it
				select {
				case <-kp.kept:
				case <-time.After(closeFlush):
				}
			}
		default:
		}
		close(kp.unkeep)
		<-kp.kept
		if !closing {
			ctx, cancel := context.WithTimeout(context.Background(), s.shared.call)
			if err := s.shared.store.Delete(ctx, st.key()); err != nil {
				s.opts.Logger.Warn("uamp: cannot delete a released stream from the store; it expires", "stream_id", st.id, "error", err)
			}
			cancel()
		}
	}
}

func (s *Server) serve(st *Stream, req *envelope.Envelope) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.opts.Logger.Error("uamp: handler panicked", "panic", p, "stack", string(debug.Stack()))
			err = envelope.NewError(envelope.CodeInternal, "", fmt.Errorf("panic: %v", p))
		}
	}()
	return s.handler.ServeUAMP(st.ctx, req, st)
}

// postMessage serves POST /v1/messages: an ask or subscribe (202 +
// Location of its stream), an ACK or a cancel (202).
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor < 2 {
		s.writeErrorStatus(w, http.StatusHTTPVersionNotSupported, "", "", envelope.NewError(envelope.CodeBadRequest, "the SSE binding is served over HTTP/2", nil))
		return
	}
	principal, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, "", "", err)
		return
	}
	if err := checkMediaType(r.Header.Get("Content-Type")); err != nil {
		s.writeError(w, principal, "", err)
		return
	}
	b, err := readBody(w, r, s.opts.MaxBodySize)
	if err != nil {
		s.writeError(w, principal, "", err)
		return
	}
	e, err := s.open(r.Context(), principal, b)
	if err == nil {
		var res result
		res, err = s.dispatch(r.Context(), e)
		if err != nil && s.shared != nil && errors.Is(err, errNoRequest) {
			err = s.dispatchStored(r.Context(), e, err)
		}
		if err == nil {
			if res.started {
				w.Header().Set("Location", pathStream+url.PathEscape(res.stream.id))
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
	}
	replyTo := ""
	if e != nil {
		replyTo = e.ID
	}
	s.writeError(w, principal, replyTo, err)
}

// getStream serves GET /v1/stream/{id} as Server-Sent Events, from the
// delta after Last-Event-ID when it is given.
func (s *Server) getStream(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor < 2 {
		s.writeErrorStatus(w, http.StatusHTTPVersionNotSupported, "", "", envelope.NewError(envelope.CodeBadRequest, "the SSE binding is served over HTTP/2", nil))
		return
	}
	principal, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, "", "", err)
		return
	}
	s.mu.Lock()
	st := s.byStream[streamKey{principal, r.PathValue("id")}]
	s.mu.Unlock()
	if st == nil && s.shared != nil {
		s.followStored(w, r, principal, r.PathValue("id"))
		return
	}
	if st == nil {
		s.writeErrorStatus(w, http.StatusNotFound, principal, "", noStream("no such stream"))
		return
	}
	from, err := lastEventID(r)
	if err != nil {
		s.writeError(w, principal, "", err)
		return
	}
	c, err := st.attach(from)
	if err != nil {
		s.writeError(w, principal, "", err)
		return
	}
	defer c.detach()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	ctx, cancel := s.connContext(r.Context())
	defer cancel()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	buf := make([]byte, 0, 64<<10)
	for {
		var final bool
		buf, final, err = c.read(ctx, buf[:0], 32<<10, heartbeat.C, sseFrame)
		if err != nil {
			return
		}
		if len(buf) == 0 {
			buf = append(buf, ":\n\n"...) // keep idle connections and proxies alive
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
		if err := rc.Flush(); err != nil || final {
			return
		}
	}
}

// lastEventID returns the delta_seq after Last-Event-ID, 0 without it.
func lastEventID(r *http.Request) (int64, error) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(last, 10, 64)
	if err != nil || n < 0 {
		return 0, envelope.NewError(envelope.CodeBadRequest, "Last-Event-ID must be a delta_seq", nil)
	}
	return n + 1, nil
}

// sseFrame appends a delta as one SSE event whose id is its delta_seq.
// A delta as appendDelta writes it is one line: compact JSON, whose
// strings hold no raw line breaks.
func sseFrame(dst []byte, seq int64, delta []byte) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, delta...)
	return append(dst, "\n\n"...)
}
