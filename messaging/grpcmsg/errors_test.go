package grpcmsg

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/grpcmsg/internal/uampv1"
)

// refusal reads a refused call: the error envelope (verified with the
// server's key), then the status ending the call, and its trailer.
func refusal(t *testing.T, call uampv1.Agent_ExchangeClient) (*envelope.Error, *status.Status, []string) {
	t.Helper()
	f, err := call.Recv()
	if err != nil {
		t.Fatalf("no error envelope before %v", err)
	}
	werr := openError(t, f.GetEnvelope())
	_, err = call.Recv()
	if err == nil {
		t.Fatal("the call goes on after a refusal")
	}
	return werr, status.Convert(err), call.Trailer().Get("retry-after")
}

// TestUAMP_9_GRPCMapping pins the gRPC form of every refusal of a first
// envelope (StatusCode): a signed error envelope carrying {code,
// message, retry}, then the call's status; retry-after on 5.04 (the
// HTTP binding's TestUAMP_9_HTTPMapping, case for case).
func TestUAMP_9_GRPCMapping(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	blocking := make(chan struct{}, 1) // the "block" ask holds its stream
	h := messaging.HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) error {
		if req.Body.Content == "block" {
			blocking <- struct{}{}
			select {
			case <-block:
			case <-ctx.Done():
			}
		}
		return nil
	})
	env := newTestEnv(t, h, &messaging.Options{MaxBodySize: 2048, MaxStreams: 1, RetryAfter: 3 * time.Second})
	untrusted, _ := envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-9")
	withCert := env.raw(t, &clientCert.TLS)
	replayed := signed(t, ask("once"), clientKey)
	tests := []struct {
		name   string
		client uampv1.AgentClient
		frames []*uampv1.Frame
		code   envelope.Code
		status codes.Code
	}{
		{"4.01 no client certificate", env.raw(t, nil), []*uampv1.Frame{envelopeFrame(signed(t, ask("x"), clientKey))}, envelope.CodeUnauthenticated, codes.Unauthenticated},
		{"4.01 unknown key", withCert, []*uampv1.Frame{envelopeFrame(signed(t, ask("x"), untrusted))}, envelope.CodeUnauthenticated, codes.Unauthenticated},
		{"4.01 tampered", withCert, []*uampv1.Frame{envelopeFrame(bytes.Replace(signed(t, ask("2+2"), clientKey), []byte("2+2"), []byte("2+3"), 1))}, envelope.CodeUnauthenticated, codes.Unauthenticated},
		{"4.01 stale ts", withCert, []*uampv1.Frame{envelopeFrame(func() []byte {
			e := ask("x")
			e.TS = time.Now().Add(-time.Hour).UTC().Format(envelope.TimeFormat)
			return signed(t, e, clientKey)
		}())}, envelope.CodeUnauthenticated, codes.Unauthenticated},
		{"4.01 replayed", withCert, []*uampv1.Frame{envelopeFrame(replayed)}, envelope.CodeUnauthenticated, codes.Unauthenticated},
		{"4.03 from is not the certificate's", env.raw(t, &otherCt.TLS), []*uampv1.Frame{envelopeFrame(signed(t, ask("x"), clientKey))}, envelope.CodeUnauthorized, codes.PermissionDenied},
		{"4.03 addressed to another agent", withCert, []*uampv1.Frame{envelopeFrame(func() []byte {
			e := ask("x")
			e.To = []string{"did:web:elsewhere.example"}
			return signed(t, e, clientKey)
		}())}, envelope.CodeUnauthorized, codes.PermissionDenied},
		{"4.13 body limit", withCert, []*uampv1.Frame{envelopeFrame(signed(t, ask(strings.Repeat("x", 4096)), clientKey))}, envelope.CodePayloadTooLarge, codes.ResourceExhausted},
		{"4.00 window above the maximum", withCert, []*uampv1.Frame{envelopeFrame(func() []byte {
			e := ask("x")
			e.DeltaWindow = 1000
			return signed(t, e, clientKey)
		}())}, envelope.CodeBadRequest, codes.InvalidArgument},
		{"4.00 intent not served", withCert, []*uampv1.Frame{envelopeFrame(func() []byte {
			e := ask("x")
			e.Intent = envelope.IntentInform
			return signed(t, e, clientKey)
		}())}, envelope.CodeBadRequest, codes.InvalidArgument},
		{"4.00 malformed envelope", withCert, []*uampv1.Frame{envelopeFrame([]byte(`{"id":1}`))}, envelope.CodeBadRequest, codes.InvalidArgument},
		{"4.00 deltas from a client", withCert, []*uampv1.Frame{{Kind: &uampv1.Frame_Deltas{Deltas: &uampv1.Deltas{Delta: [][]byte{[]byte(`{}`)}}}}}, envelope.CodeBadRequest, codes.InvalidArgument},
		{"4.00 empty frame", withCert, []*uampv1.Frame{{}}, envelope.CodeBadRequest, codes.InvalidArgument},
		{"4.00 half-close without an envelope", withCert, nil, envelope.CodeBadRequest, codes.InvalidArgument},
		{"4.09 resume of an unknown request", withCert, []*uampv1.Frame{envelopeFrame(ackOf(t, ids.New(), 3))}, envelope.CodeMissingDeltaSeq, codes.FailedPrecondition},
	}
	// The replayed envelope is accepted once first.
	ctx := context.Background()
	call, err := withCert.Exchange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call.Send(envelopeFrame(replayed))
	call.CloseSend()
	for {
		if _, err := call.Recv(); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			call, err := tc.client.Exchange(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.frames {
				call.Send(f)
			}
			call.CloseSend()
			werr, st, _ := refusal(t, call)
			if werr.Code != tc.code || st.Code() != tc.status || werr.Retry != tc.code.Retryable() && tc.code != envelope.CodeMissingDeltaSeq {
				t.Fatalf("%+v, %v; want %s, %v", werr, st, tc.code, tc.status)
			}
			if st.Code() != statusCode(werr) {
				t.Fatalf("status %v for %+v", st.Code(), werr)
			}
		})
	}
	t.Run("4.13 gRPC message limit", func(t *testing.T) {
		// gRPC refuses the message itself: ResourceExhausted, no
		// envelope. The Client reads it as 4.13.
		call, err := withCert.Exchange(ctx)
		if err != nil {
			t.Fatal(err)
		}
		call.Send(envelopeFrame(bytes.Repeat([]byte("x"), envelope.MaxEnvelopeSize+1024)))
		_, err = call.Recv()
		e, ok := statusError(status.Convert(err))
		if status.Code(err) != codes.ResourceExhausted || !ok || e.Code != envelope.CodePayloadTooLarge || e.Retry {
			t.Fatalf("%v: %+v", err, e)
		}
	})
	t.Run("5.04 busy", func(t *testing.T) {
		// A server of its own: the stream of the replayed envelope above,
		// never ACKed, still holds the only slot of env (kept for resume).
		env := newTestEnv(t, h, &messaging.Options{MaxStreams: 1, RetryAfter: 3 * time.Second})
		withCert := env.raw(t, &clientCert.TLS)
		first, err := withCert.Exchange(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first.Send(envelopeFrame(signed(t, ask("block"), clientKey))) // holds the only stream
		select {
		case <-blocking:
		case <-time.After(patience):
			t.Fatalf("the first ask never reached the handler")
		}
		call, err := withCert.Exchange(ctx)
		if err != nil {
			t.Fatal(err)
		}
		call.Send(envelopeFrame(signed(t, ask("x"), clientKey)))
		werr, st, retryAfter := refusal(t, call)
		if werr.Code != envelope.CodeBusy || !werr.Retry || st.Code() != codes.Unavailable || len(retryAfter) != 1 || retryAfter[0] != "3" {
			t.Fatalf("%+v, %v, retry-after %q", werr, st, retryAfter)
		}
	})
}

// TestUAMP_9_GRPCRefusalThroughClient: the Client yields a refusal as
// the first error of Deltas, the *envelope.Error of the server's signed
// error envelope.
func TestUAMP_9_GRPCRefusalThroughClient(t *testing.T) {
	env := newTestEnv(t, messaging.Echo, nil)
	untrusted, _ := envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-9")
	serverKeys, _ := envelope.NewKeySet(serverKey.Public())
	reply, err := env.client(t, &messaging.ClientOptions{Key: untrusted, ServerKeys: serverKeys}).Ask(context.Background(), ask("x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range reply.Deltas() {
		if !errors.Is(err, envelope.CodeUnauthenticated) {
			t.Fatalf("first result %v", err)
		}
		break
	}
}

// TestUAMP_9_GRPCMidCallRefusals: a refused envelope after the first is
// answered with its error envelope (reply_to = its id) and the call goes
// on, as over WebSocket.
func TestUAMP_9_GRPCMidCallRefusals(t *testing.T) {
	h := newCounter(10)
	env := newTestEnv(t, h, nil)
	ctx := context.Background()
	call, err := env.raw(t, &clientCert.TLS).Exchange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := ask("")
	req.DeltaWindow = 4
	call.Send(envelopeFrame(signed(t, req, clientKey)))
	badAck := ackOf(t, req.ID, 50) // beyond what was sent
	second := signed(t, ask("again"), clientKey)
	call.Send(envelopeFrame(badAck))
	call.Send(envelopeFrame(second))
	var refused []*envelope.Error
	var replyTos []string
	seen := int64(-1)
	for len(refused) < 2 || seen < 3 {
		f, err := call.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if b := f.GetEnvelope(); b != nil {
			refused = append(refused, openError(t, b))
			e, _ := envelope.Decode(b)
			replyTos = append(replyTos, e.ReplyTo)
		}
		for _, b := range f.GetDeltas().GetDelta() {
			d, err := envelope.DecodeDelta(b)
			if err != nil || d.Seq != seen+1 {
				t.Fatalf("delta %+v, %v after %d", d, err, seen)
			}
			seen = d.Seq
		}
	}
	ids := func(b []byte) string { e, _ := envelope.Decode(b); return e.ID }
	if refused[0].Code != envelope.CodeMissingDeltaSeq || refused[0].Retry || replyTos[0] != ids(badAck) ||
		refused[1].Code != envelope.CodeBadRequest || replyTos[1] != ids(second) {
		t.Fatalf("refusals %+v %+v, reply_to %q", refused[0], refused[1], replyTos)
	}
	// The stream goes on: ACK everything, read to the end.
	call.Send(envelopeFrame(ackOf(t, req.ID, seen)))
	for {
		f, err := call.Recv()
		if err != nil {
			t.Fatal(err)
		}
		done := false
		for _, b := range f.GetDeltas().GetDelta() {
			d, _ := envelope.DecodeDelta(b)
			seen = d.Seq
			done = d.Type == envelope.DeltaDone
		}
		call.Send(envelopeFrame(ackOf(t, req.ID, seen)))
		if done {
			break
		}
	}
	call.CloseSend()
	if _, err := call.Recv(); err != io.EOF {
		t.Fatalf("call ended with %v", err)
	}
}

// TestUAMP_6_1_GRPCTLS13Only: the service refuses calls that did not
// arrive over TLS 1.3 with 4.03, whatever the grpc.Server it is
// registered on; NewServer's listener does not complete a TLS 1.2
// handshake.
func TestUAMP_6_1_GRPCTLS13Only(t *testing.T) {
	fixtures()
	keys, _ := envelope.NewKeySet(clientKey.Public())
	srv := messaging.NewServer(messaging.Echo, &messaging.Options{ID: serverDID, Key: serverKey, Keys: keys})
	defer srv.Close()
	serve := func(creds credentials.TransportCredentials) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var opts []grpc.ServerOption
		if creds != nil {
			opts = append(opts, grpc.Creds(creds))
		}
		gs := grpc.NewServer(opts...)
		register(gs, srv)
		go gs.Serve(ln)
		t.Cleanup(gs.Stop)
		return ln.Addr().String()
	}
	call := func(addr string, creds credentials.TransportCredentials) (*envelope.Error, *status.Status) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		c, err := uampv1.NewAgentClient(conn).Exchange(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.Send(envelopeFrame(signed(t, ask("x"), clientKey)))
		werr, st, _ := refusal(t, c)
		return werr, st
	}
	t.Run("plaintext", func(t *testing.T) {
		werr, st := call(serve(nil), insecure.NewCredentials())
		if werr.Code != envelope.CodeUnauthorized || st.Code() != codes.PermissionDenied {
			t.Fatalf("%+v, %v", werr, st)
		}
	})
	t.Run("TLS 1.2", func(t *testing.T) {
		conf := messaging.TLSConfig(serverCert.TLS, clientCert.Pool())
		conf.MinVersion = tls.VersionTLS12
		conf.MaxVersion = tls.VersionTLS12
		cc := &tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}}
		cc.MinVersion, cc.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		werr, st := call(serve(credentials.NewTLS(conf)), credentials.NewTLS(cc))
		if werr.Code != envelope.CodeUnauthorized || st.Code() != codes.PermissionDenied {
			t.Fatalf("%+v, %v", werr, st)
		}
	})
	t.Run("NewServer refuses a TLS 1.2 handshake", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		conf := messaging.TLSConfig(serverCert.TLS, clientCert.Pool())
		conf.MinVersion = tls.VersionTLS12 // NewServer requires 1.3 anyway
		gs := NewServer(srv, conf)
		go gs.Serve(ln)
		defer gs.Stop()
		cc := &tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}}
		cc.MinVersion, cc.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cc)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		c, err := uampv1.NewAgentClient(conn).Exchange(ctx)
		if err == nil {
			_, err = c.Recv()
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("a TLS 1.2 client got %v", err)
		}
	})
}
