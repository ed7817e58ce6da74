package grpcmsg

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/grpcmsg/internal/uampv1"
	"github.com/agentry-dev/agentry/messaging/internal/binding"
)

// closeWait bounds how long closing a call waits for the server to end
// it (so that the last ACK is read rather than reset away with the
// call).
const closeWait = 2 * time.Second

// Client sends signed requests to a UAMP server over gRPC and follows
// their streams: the consumer is messaging's (Reply), so ACKs every
// AckEvery deltas, the final ACK, resume after a dropped connection and
// cancel behave as over SSE and WebSocket. It is safe for concurrent
// use; each request is one Exchange call on a shared connection.
type Client struct {
	mc    *messaging.Client
	conn  *grpc.ClientConn
	agent uampv1.AgentClient
}

// NewClient returns a client of the server at baseURL (https://host:port;
// the gRPC target is host:port). opts are messaging.NewClient's (Key is
// required; Binding is ignored); TLS 1.3 is required whatever opts.TLS
// says.
func NewClient(baseURL string, opts *messaging.ClientOptions) (*Client, error) {
	mc, err := messaging.NewClient(baseURL, opts)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(baseURL) // NewClient parsed it
	conf := &tls.Config{}
	if opts != nil && opts.TLS != nil {
		conf = opts.TLS.Clone()
	}
	conf.MinVersion = tls.VersionTLS13
	conn, err := grpc.NewClient(u.Host,
		grpc.WithTransportCredentials(credentials.NewTLS(conf)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(envelope.MaxDeltaSize+maxBatch+maxFrameOverhead)),
		// The call's span (the global providers), carrying the trace
		// context in the call's metadata.
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
	)
	if err != nil {
		return nil, fmt.Errorf("grpcmsg: %w", err)
	}
	return &Client{mc: mc, conn: conn, agent: uampv1.NewAgentClient(conn)}, nil
}

// Close closes the client's connection.
func (c *Client) Close() error {
	c.mc.CloseIdleConnections()
	return c.conn.Close()
}

// Ask sends the request req — an ask or subscribe, signed with the
// client's Key when its sig is empty, sent as it is otherwise — on a new
// Exchange call and returns its Reply. ctx bounds the whole exchange,
// reading the deltas included. A refusal is the first error the
// Reply's Deltas yields (an *envelope.Error, from the server's signed
// error envelope).
func (c *Client) Ask(ctx context.Context, req *envelope.Envelope) (*messaging.Reply, error) {
	r, err := binding.AskOver(c.mc, ctx, req, func(ctx context.Context, b []byte) (binding.Carrier, error) {
		k := &carrier{agent: c.agent, ctx: ctx}
		if err := k.Reconnect(ctx); err != nil {
			return nil, err
		}
		if err := k.Send(ctx, b); err != nil {
			k.Close()
			return nil, err
		}
		return k, nil
	})
	if err != nil {
		return nil, err
	}
	return r.(*messaging.Reply), nil
}

// carrier is one request's Exchange calls: a binding.Carrier.
type carrier struct {
	agent uampv1.AgentClient
	ctx   context.Context // the request's: every call ends with it

	sendMu sync.Mutex // one sender at a time, and no CloseSend during a send
	mu     sync.Mutex
	call   grpc.BidiStreamingClient[uampv1.Frame, uampv1.Frame]
	cancel context.CancelFunc
}

var errNotConnected = errors.New("grpcmsg: no call")

func (k *carrier) current() grpc.BidiStreamingClient[uampv1.Frame, uampv1.Frame] {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.call
}

// Reconnect starts a new call, ending the previous one.
func (k *carrier) Reconnect(ctx context.Context) error {
	cctx, cancel := context.WithCancel(k.ctx)
	call, err := k.agent.Exchange(cctx)
	if err != nil {
		cancel()
		return err
	}
	k.mu.Lock()
	old := k.cancel
	k.call, k.cancel = call, cancel
	k.mu.Unlock()
	if old != nil {
		old()
	}
	return nil
}

// Send sends an envelope on the current call.
func (k *carrier) Send(ctx context.Context, b []byte) error {
	call := k.current()
	if call == nil {
		return errNotConnected
	}
	k.sendMu.Lock()
	defer k.sendMu.Unlock()
	return call.Send(&uampv1.Frame{Kind: &uampv1.Frame_Envelope{Envelope: b}})
}

// Receive hands the records of the current call to deliver.
func (k *carrier) Receive(ctx context.Context, deliver func([]byte) bool) error {
	k.mu.Lock()
	call, cancel := k.call, k.cancel
	k.mu.Unlock()
	if call == nil {
		return errNotConnected
	}
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	for {
		f, err := call.Recv()
		if err != nil {
			return recvError(err)
		}
		recs, err := serverRecords(f)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if !deliver(rec) {
				return nil
			}
		}
	}
}

// serverRecords returns the records of a server's frame: its deltas, or
// its envelope. A frame with neither is 4.00 (not retryable: the
// Reply ends). The records are checked by the Reply as over WebSocket.
func serverRecords(f *uampv1.Frame) ([][]byte, error) {
	switch kind := f.Kind.(type) {
	case *uampv1.Frame_Deltas:
		return kind.Deltas.GetDelta(), nil
	case *uampv1.Frame_Envelope:
		return [][]byte{kind.Envelope}, nil
	}
	return nil, envelope.NewError(envelope.CodeBadRequest, "a server's frame without deltas or an envelope", nil)
}

// errCallEnded: the server ended the call before the final delta.
var errCallEnded = errors.New("grpcmsg: call ended before the final delta")

// recvError classifies the end of a call: a refusal the gRPC library
// made itself is final (statusError); the rest is a lost call, resumed.
func recvError(err error) error {
	if errors.Is(err, io.EOF) {
		return errCallEnded
	}
	if st, ok := status.FromError(err); ok {
		if e, ok := statusError(st); ok {
			return e
		}
	}
	return err
}

// Close half-closes the call and waits, briefly, for the server to end
// it.
func (k *carrier) Close() error {
	k.mu.Lock()
	call, cancel := k.call, k.cancel
	k.call, k.cancel = nil, nil
	k.mu.Unlock()
	if call == nil {
		return nil
	}
	k.sendMu.Lock()
	call.CloseSend()
	k.sendMu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := call.Recv(); err != nil {
				return
			}
		}
	}()
	t := time.NewTimer(closeWait)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	cancel()
	<-done
	return nil
}
