package grpcmsg

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/grpcmsg/internal/uampv1"
	"github.com/agentry-dev/agentry/messaging/internal/binding"
)

// maxBatch is the size up to which the server packs the deltas that are
// ready into one frame (one delta is sent whatever its size), as the
// WebSocket binding packs records into one message.
const maxBatch = 32 << 10

// maxFrameOverhead bounds what protobuf adds around the bytes of a frame.
const maxFrameOverhead = 64

// finalGrace is how long the server waits, after a stream's final delta,
// for the client to half-close the call (its last ACK comes first).
const finalGrace = time.Minute

// NewServer returns a gRPC server serving srv as uamp.v1.Agent over TLS
// 1.3 (conf, from messaging.TLSConfig: it is cloned and TLS 1.3 is
// required whatever it says), receiving envelopes of up to
// envelope.MaxEnvelopeSize bytes (srv's own limit is then checked:
// 4.13). opts are appended to these.
func NewServer(srv *messaging.Server, conf *tls.Config, opts ...grpc.ServerOption) *grpc.Server {
	c := conf.Clone()
	c.MinVersion = tls.VersionTLS13
	s := grpc.NewServer(append([]grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(c)),
		grpc.MaxRecvMsgSize(envelope.MaxEnvelopeSize + maxFrameOverhead),
	}, opts...)...)
	register(s, srv)
	return s
}

// register registers uamp.v1.Agent, served by srv, on s. Calls that did
// not arrive over TLS 1.3 are refused with 4.03 (PermissionDenied), so
// s must have TLS credentials (NewServer), or be served through
// grpc.Server.ServeHTTP on a TLS 1.3 http.Server.
func register(s grpc.ServiceRegistrar, srv *messaging.Server) {
	uampv1.RegisterAgentServer(s, &service{srv: srv})
}

type service struct {
	uampv1.UnimplementedAgentServer
	srv *messaging.Server
}

// connRequest is the HTTP form of a call for messaging's Authenticator:
// the connection's TLS state, the call's metadata as headers (binary
// ones left out), method POST, the gRPC method as the path.
func connRequest(ctx context.Context) *http.Request {
	method, _ := grpc.Method(ctx)
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: method}, RequestURI: method,
		Proto: "HTTP/2.0", ProtoMajor: 2, Header: http.Header{},
	}
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			r.RemoteAddr = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			st := ti.State
			r.TLS = &st
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vs := range md {
		switch {
		case k == ":authority":
			if len(vs) > 0 {
				r.Host = vs[0]
			}
		case strings.HasPrefix(k, ":"), strings.HasSuffix(k, "-bin"):
		default:
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
	}
	return r.WithContext(ctx)
}

// Exchange serves one request's call.
func (svc *service) Exchange(call grpc.BidiStreamingServer[uampv1.Frame, uampv1.Frame]) error {
	x := &exchange{call: call}
	conn, err := binding.Connect(svc.srv, connRequest(call.Context()))
	if err != nil {
		return x.refuse(binding.ErrorEnvelope(svc.srv, "", "", err), err)
	}
	defer conn.Close()
	x.conn = conn
	return x.serve()
}

// exchange is one Exchange call.
type exchange struct {
	call grpc.BidiStreamingServer[uampv1.Frame, uampv1.Frame]
	conn binding.Conn

	sendMu sync.Mutex
	ended  bool // the handler returned: no more sends
}

// send sends one frame; sends are serialized (gRPC allows one sender at
// a time) and refused once the call has ended.
func (x *exchange) send(f *uampv1.Frame) error {
	x.sendMu.Lock()
	defer x.sendMu.Unlock()
	if x.ended {
		return io.EOF
	}
	return x.call.Send(f)
}

func (x *exchange) end() {
	x.sendMu.Lock()
	x.ended = true
	x.sendMu.Unlock()
}

// refuse sends the error envelope b for err and returns the status that
// ends the call.
func (x *exchange) refuse(b []byte, err error) error {
	x.send(&uampv1.Frame{Kind: &uampv1.Frame_Envelope{Envelope: b}})
	e := envelope.AsError(err)
	if e.Code == envelope.CodeBusy {
		secs := max(1, int((e.RetryAfter+time.Second-1)/time.Second))
		x.call.SetTrailer(metadata.Pairs("retry-after", strconv.Itoa(secs)))
	}
	return status.Error(statusCode(e), e.Message)
}

// recvEnvelope receives the next frame, which must be an envelope.
func (x *exchange) recvEnvelope() ([]byte, error) {
	f, err := x.call.Recv()
	if err != nil {
		return nil, err
	}
	return clientEnvelope(f)
}

// clientEnvelope returns the envelope a client's frame carries; anything
// else is 4.00.
func clientEnvelope(f *uampv1.Frame) ([]byte, error) {
	b := f.GetEnvelope()
	if len(b) == 0 {
		return nil, envelope.NewError(envelope.CodeBadRequest, "a client's frame is one envelope", nil)
	}
	return b, nil
}

// serve runs the call: the first envelope opens or resumes a stream,
// whose deltas a writer sends while the reader acts on the client's
// ACKs and cancel.
func (x *exchange) serve() error {
	defer x.end()
	ctx := x.conn.Context()
	b, err := x.recvEnvelope()
	if err != nil {
		return x.recvError(err, true)
	}
	e, err := x.conn.Open(b)
	var d binding.Dispatched
	if err == nil {
		d, err = x.conn.Dispatch(e)
	}
	if err != nil {
		return x.refuse(x.conn.ErrorEnvelope(replyTo(e), err), err)
	}
	var from int64
	switch {
	case d.Opened:
	case e.Intent == envelope.IntentProgress:
		from = d.Resume
	default:
		return nil // a cancel: done
	}
	f, err := x.conn.Follow(d.Stream, from)
	if err != nil {
		return x.refuse(x.conn.ErrorEnvelope(e.ID, err), err)
	}
	// The writer has exited before the call ends: a send after the
	// handler returned would race with gRPC closing the call.
	wctx, stopWriter := context.WithCancel(ctx)
	written := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		written <- x.write(wctx, f)
	}()
	defer wg.Wait()
	defer stopWriter()
	read := make(chan error, 1)
	go func() { read <- x.read() }()
	select {
	case err := <-written:
		if err != nil {
			return x.writeError(err)
		}
		// The final delta is out: wait for the client's last ACK and
		// half-close.
		t := time.NewTimer(finalGrace)
		defer t.Stop()
		select {
		case err := <-read:
			return x.recvError(err, false)
		case <-ctx.Done():
		case <-t.C:
		}
		return nil
	case err := <-read:
		// The client half-closed before the final delta (it will not ACK
		// any more: the stream waits in its log for a resume), or the
		// call failed.
		return x.recvError(err, false)
	}
}

func replyTo(e *envelope.Envelope) string {
	if e == nil {
		return ""
	}
	return e.ID
}

// read acts on the envelopes after the first: ACKs and cancels of the
// call's stream (or any the principal holds); a refusal is answered with
// its error envelope and the call goes on. It returns at the client's
// half-close (io.EOF), when the call ends, or with the error that ends
// the call (a malformed frame).
func (x *exchange) read() error {
	for {
		b, err := x.recvEnvelope()
		if err != nil {
			return err
		}
		e, err := x.conn.Open(b)
		if err == nil {
			if e.Intent == envelope.IntentAsk || e.Intent == envelope.IntentSubscribe {
				err = envelope.NewError(envelope.CodeBadRequest, "one request per Exchange call", nil)
			} else {
				_, err = x.conn.Dispatch(e)
			}
		}
		if err != nil {
			x.send(&uampv1.Frame{Kind: &uampv1.Frame_Envelope{Envelope: x.conn.ErrorEnvelope(replyTo(e), err)}})
		}
	}
}

// recvError is the status ending the call after a receive failed: a
// malformed frame is refused with its error envelope; io.EOF (the client
// half-closed) is the end of a call that has nothing more to send, or a
// call without a request when first is set.
func (x *exchange) recvError(err error, first bool) error {
	if e := (*envelope.Error)(nil); errors.As(err, &e) {
		return x.refuse(x.errorEnvelope("", e), e)
	}
	if errors.Is(err, io.EOF) {
		if first {
			e := envelope.NewError(envelope.CodeBadRequest, "no envelope before the half-close", nil)
			return x.refuse(x.errorEnvelope("", e), e)
		}
		return nil
	}
	// A message over gRPC's limit (NewServer: envelope.MaxEnvelopeSize)
	// is ResourceExhausted without an error envelope, gRPC's own
	// answer: the form of 4.13 on this binding, as close 1009 is over
	// WebSocket.
	return err
}

func (x *exchange) errorEnvelope(replyTo string, err error) []byte {
	return x.conn.ErrorEnvelope(replyTo, err)
}

// writeError is the status ending the call after its writer stopped
// before the final delta.
func (x *exchange) writeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, binding.ErrTakenOver):
		return status.Error(codes.Aborted, "the stream was resumed on another call")
	case x.call.Context().Err() != nil:
		return status.FromContextError(x.call.Context().Err()).Err()
	}
	// The server is closing.
	return status.Error(codes.Unavailable, "server shutting down")
}

// write sends the stream's deltas, packed, until the final one (nil), a
// takeover or the end of the call.
func (x *exchange) write(ctx context.Context, f binding.Follower) error {
	defer f.Close()
	var ends []int
	frame := func(dst []byte, _ int64, delta []byte) []byte {
		dst = append(dst, delta...)
		ends = append(ends, len(dst))
		return dst
	}
	buf := make([]byte, 0, maxBatch+4<<10)
	batch := &uampv1.Deltas{}
	msg := &uampv1.Frame{Kind: &uampv1.Frame_Deltas{Deltas: batch}}
	for {
		ends = ends[:0]
		var final bool
		var err error
		buf, final, err = f.Read(ctx, buf[:0], maxBatch, frame)
		if err != nil {
			return err
		}
		batch.Delta = batch.Delta[:0]
		start := 0
		for _, end := range ends {
			batch.Delta = append(batch.Delta, buf[start:end])
			start = end
		}
		if len(batch.Delta) > 0 {
			if err := x.send(msg); err != nil {
				return err
			}
		}
		if final {
			return nil
		}
	}
}
