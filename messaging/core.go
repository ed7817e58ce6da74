package messaging

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/agentry-dev/agentry/envelope"
)

// This file is the seam for bindings that live outside this package
// (the gRPC binding, package grpcmsg, which keeps gRPC out of this
// package's imports): a Server's checks and streams behind Conn, and a
// Client's consumer behind Carrier. Whatever arrives through them is
// checked and answered exactly as over SSE and WebSocket.

// ErrTakenOver is the error of Follower.Read once another consumer
// attached to the stream (a resume on another connection).
var ErrTakenOver = errDetached

// Conn is one authenticated connection of a binding served outside this
// package. Its methods are safe for concurrent use.
type Conn struct {
	s         *Server
	principal string
	ctx       context.Context
	cancel    context.CancelFunc
}

// Connect authenticates the connection r stands for — a binding outside
// this package builds r from its connection's TLS state and metadata —
// with the Server's Authenticator. r must have arrived over TLS 1.3
// (4.03 otherwise, as over HTTP); an unauthenticated one is 4.01. Close
// the Conn when the connection ends.
func (s *Server) Connect(r *http.Request) (*Conn, error) {
	if r.TLS == nil || r.TLS.Version < tls.VersionTLS13 {
		return nil, envelope.NewError(envelope.CodeUnauthorized, "UAMP is served over TLS 1.3 only", nil)
	}
	p, err := s.authenticate(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.connContext(r.Context())
	return &Conn{s: s, principal: p, ctx: ctx, cancel: cancel}, nil
}

// Principal returns the authenticated principal: the from of every
// envelope the connection may send.
func (c *Conn) Principal() string { return c.principal }

// Context returns a context that ends with the request's, when the Conn
// is closed and when the Server closes.
func (c *Conn) Context() context.Context { return c.ctx }

// Close ends the Conn's context.
func (c *Conn) Close() { c.cancel() }

// Open decodes and checks one envelope the connection sent, as the other
// bindings do: at most Options.MaxBodySize bytes (4.13), strictly
// decoded, signature verified, from = the principal and to naming the
// server (4.03), cap_token checked. The envelope is returned with the
// error when it could be decoded, for the reply_to of the refusal.
func (c *Conn) Open(b []byte) (*envelope.Envelope, error) {
	if len(b) > c.s.opts.MaxBodySize {
		return nil, envelope.NewError(envelope.CodePayloadTooLarge, fmt.Sprintf("envelope larger than %d bytes", c.s.opts.MaxBodySize), nil)
	}
	return c.s.open(c.ctx, c.principal, b)
}

// Dispatched is what Dispatch did with an envelope.
type Dispatched struct {
	// Stream is the stream an ask or subscribe opened (Opened), or the
	// one an ACK or a cancel is about.
	Stream *Stream
	// Opened reports that the envelope opened Stream.
	Opened bool
	// Resume is, for an ACK, the delta_seq that a consumer resuming with
	// it wants next: ack_seq + 1.
	Resume int64
}

// Dispatch acts on an opened envelope as the other bindings do: an ask
// or subscribe (replay-checked) opens a stream and runs the Handler, an
// ACK (a progress envelope with ext.ack_seq) moves its stream's window,
// a cancel (replay-checked) cancels its request. Any other intent is
// 4.00.
func (c *Conn) Dispatch(e *envelope.Envelope) (Dispatched, error) {
	res, err := c.s.dispatch(c.ctx, e)
	return Dispatched{Stream: res.stream, Opened: res.started, Resume: res.resume}, err
}

// Follower is the consumer end of a stream on a Conn: it reads the
// stream's log from its position on.
type Follower struct{ cur *cursor }

// Follow makes the connection st's consumer from delta_seq from on,
// taking the stream over from the connection that followed it before.
// The log holds the last delta_window deltas: a from outside it is 4.09,
// not retryable. A stream of another principal is 4.03.
func (c *Conn) Follow(st *Stream, from int64) (*Follower, error) {
	if st.owner != c.principal {
		return nil, envelope.NewError(envelope.CodeUnauthorized, "the stream belongs to another requester", nil)
	}
	cur, err := st.attach(from)
	if err != nil {
		return nil, err
	}
	return &Follower{cur: cur}, nil
}

// Read waits until the log holds deltas after the follower's position,
// then appends up to maxBytes of them (at least one) to dst, each
// through frame (which gets its delta_seq and JSON, valid only during
// the call), and advances. final reports that the last delta appended
// ends the stream; once it was read, Read returns final with nothing
// more. The error is ErrTakenOver once another consumer attached to the
// stream, or ctx's.
func (f *Follower) Read(ctx context.Context, dst []byte, maxBytes int, frame func(dst []byte, seq int64, delta []byte) []byte) (_ []byte, final bool, err error) {
	return f.cur.read(ctx, dst, maxBytes, nil, frame)
}

// Close detaches the follower from its stream (unless another consumer
// took it over already); the stream waits in its log for a resume.
func (f *Follower) Close() { f.cur.detach() }

// ErrorEnvelope returns the signed error envelope answering replyTo (an
// envelope id, or "") with err's wire form — 5.00 without its text for
// an error that is not an *envelope.Error, which is logged — addressed
// to to (the requester; "" before authentication).
func (s *Server) ErrorEnvelope(to, replyTo string, err error) []byte {
	e := envelope.AsError(err)
	if e.Code == envelope.CodeInternal {
		s.opts.Logger.Error("uamp: request failed", "error", err)
	}
	return s.errorEnvelope(to, replyTo, e)
}

// ErrorEnvelope is Server.ErrorEnvelope addressed to the principal.
func (c *Conn) ErrorEnvelope(replyTo string, err error) []byte {
	return c.s.ErrorEnvelope(c.principal, replyTo, err)
}

// Carrier carries one request on a binding spoken outside this package
// (the gRPC binding, package grpcmsg): the Reply that AskOver returns
// sends its envelopes through it and reads its stream from it, with the
// checks, ACKs, resume and cancel of the other bindings. Send is called
// concurrently with itself and with Receive; Receive, Reconnect and
// Close are called from one goroutine.
type Carrier interface {
	// Send sends one envelope (an ACK or a cancel) on the current
	// connection.
	Send(ctx context.Context, envelope []byte) error
	// Receive reads what the server sends on the current connection and
	// hands each record — the JSON of a delta, or of an envelope (the
	// server's error) — to deliver, until deliver returns false (Receive
	// then returns nil) or the connection ends. An *envelope.Error that
	// is not Retry ends the Reply with it; any other error makes the
	// Reply reconnect.
	Receive(ctx context.Context, deliver func(record []byte) bool) error
	// Reconnect replaces a lost connection. The Reply then sends on the
	// new one an ACK of the last delta it holds (-1 for none), which
	// resumes the stream there from the delta after it, as over
	// WebSocket.
	Reconnect(ctx context.Context) error
	// Close ends the connection once the Reply is done with it.
	Close() error
}

// AskOver is Ask over a Carrier: the request is signed with the
// client's Key when its sig is empty, and dial sends its bytes on a new
// connection and returns the Carrier. As over WebSocket, a refusal is
// the first error Deltas yields.
func (c *Client) AskOver(ctx context.Context, req *envelope.Envelope, dial func(ctx context.Context, request []byte) (Carrier, error)) (*Reply, error) {
	r, b, err := c.newReply(ctx, req)
	if err != nil {
		return nil, err
	}
	if r.carrier, err = dial(ctx, b); err != nil {
		return nil, err
	}
	return r, nil
}

// followCarrier reads the stream through the carrier, reconnecting and
// resuming after last first when resume is set.
func (r *Reply) followCarrier(ctx context.Context, resume bool, last int64, deliver func(*envelope.Delta) bool) (stop bool, err error) {
	if resume {
		if err := r.carrier.Reconnect(ctx); err != nil {
			return false, err
		}
		if err := r.send(ctx, envelope.IntentProgress, last); err != nil {
			return false, err
		}
	}
	var failed error
	err = r.carrier.Receive(ctx, func(rec []byte) bool {
		d, derr := decodeDelta(rec)
		if derr != nil {
			// Not a delta: the server's error envelope answering us.
			if e, err := r.c.readError(ctx, rec); err == nil {
				failed = fatal{e}
			} else {
				failed = fatal{derr}
			}
			return false
		}
		if !deliver(d) {
			stop = true
			return false
		}
		return true
	})
	switch {
	case stop:
		return true, nil
	case failed != nil:
		return false, failed
	case err == nil:
		return false, errStreamClosed
	}
	return false, err
}
