package messaging

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging/internal/binding"
)

// This file sets the hooks of package binding, the seam for bindings
// that live outside this package (the gRPC binding, package grpcmsg,
// which keeps gRPC out of this package's imports): a Server's checks
// and streams behind binding.Conn, and a Client's consumer behind
// binding.Carrier. Whatever arrives through them is checked and
// answered exactly as over SSE and WebSocket.

func init() {
	binding.Connect = func(srv http.Handler, r *http.Request) (binding.Conn, error) {
		return srv.(*Server).connect(r)
	}
	binding.ErrorEnvelope = func(srv http.Handler, to, replyTo string, err error) []byte {
		return srv.(*Server).errorEnvelopeFor(to, replyTo, err)
	}
	binding.AskOver = func(c any, ctx context.Context, req *envelope.Envelope, dial binding.Dial) (any, error) {
		r, err := c.(*Client).askOver(ctx, req, dial)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// conn is a binding.Conn: one authenticated connection of a binding
// served outside this package.
type conn struct {
	s         *Server
	principal string
	ctx       context.Context
	cancel    context.CancelFunc
}

// connect is binding.Connect.
func (s *Server) connect(r *http.Request) (*conn, error) {
	if r.TLS == nil || r.TLS.Version < tls.VersionTLS13 {
		return nil, envelope.NewError(envelope.CodeUnauthorized, "UAMP is served over TLS 1.3 only", nil)
	}
	p, err := s.authenticate(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.connContext(r.Context())
	return &conn{s: s, principal: p, ctx: ctx, cancel: cancel}, nil
}

func (c *conn) Principal() string { return c.principal }

func (c *conn) Context() context.Context { return c.ctx }

func (c *conn) Close() { c.cancel() }

func (c *conn) Open(b []byte) (*envelope.Envelope, error) {
	if len(b) > c.s.opts.MaxBodySize {
		return nil, envelope.NewError(envelope.CodePayloadTooLarge, fmt.Sprintf("envelope larger than %d bytes", c.s.opts.MaxBodySize), nil)
	}
	return c.s.open(c.ctx, c.principal, b)
}

func (c *conn) Dispatch(e *envelope.Envelope) (binding.Dispatched, error) {
	res, err := c.s.dispatch(c.ctx, e)
	d := binding.Dispatched{Opened: res.started, Resume: res.resume}
	if res.stream != nil {
		d.Stream = res.stream
	}
	return d, err
}

func (c *conn) Follow(bst binding.Stream, from int64) (binding.Follower, error) {
	st, ok := bst.(*Stream)
	if !ok || st.owner != c.principal {
		return nil, envelope.NewError(envelope.CodeUnauthorized, "the stream belongs to another requester", nil)
	}
	cur, err := st.attach(from)
	if err != nil {
		return nil, err
	}
	return follower{cur}, nil
}

func (c *conn) ErrorEnvelope(replyTo string, err error) []byte {
	return c.s.errorEnvelopeFor(c.principal, replyTo, err)
}

// follower is a binding.Follower.
type follower struct{ cur *cursor }

func (f follower) Read(ctx context.Context, dst []byte, maxBytes int, frame func(dst []byte, seq int64, delta []byte) []byte) (_ []byte, final bool, err error) {
	return f.cur.read(ctx, dst, maxBytes, nil, frame)
}

func (f follower) Close() { f.cur.detach() }

// errorEnvelopeFor is binding.ErrorEnvelope.
func (s *Server) errorEnvelopeFor(to, replyTo string, err error) []byte {
	e := envelope.AsError(err)
	if e.Code == envelope.CodeInternal {
		s.opts.Logger.Error("uamp: request failed", "error", err)
	}
	return s.errorEnvelope(to, replyTo, e)
}

// askOver is binding.AskOver.
func (c *Client) askOver(ctx context.Context, req *envelope.Envelope, dial binding.Dial) (*Reply, error) {
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
