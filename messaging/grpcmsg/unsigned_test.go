package grpcmsg

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// TestUAMP_6_3_GRPCUnsignedEnvelope: over gRPC as over HTTP, an envelope
// whose sig is absent, empty or not a string is unauthenticated (§6.3:
// every envelope must carry sig): an error envelope with 4.01, the call
// ended Unauthenticated, the handler never called.
func TestUAMP_6_3_GRPCUnsignedEnvelope(t *testing.T) {
	var served atomic.Int32
	h := messaging.HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) error {
		served.Add(1)
		return nil
	})
	env := newTestEnv(t, h, nil)
	withCert := env.raw(t, &clientCert.TLS)
	b, err := json.Marshal(ask("unsigned"))
	if err != nil || bytes.Contains(b, []byte(`"sig"`)) {
		t.Fatalf("unsigned envelope %s, %v", b, err)
	}
	withSig := func(v string) []byte {
		return append(bytes.TrimSuffix(bytes.Clone(b), []byte("}")), `,"sig":`+v+`}`...)
	}
	for name, body := range map[string][]byte{"no sig": b, "empty sig": withSig(`""`), "sig not a string": withSig(`[]`)} {
		t.Run(name, func(t *testing.T) {
			call, err := withCert.Exchange(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			call.Send(envelopeFrame(body))
			call.CloseSend()
			werr, st, _ := refusal(t, call)
			if werr.Code != envelope.CodeUnauthenticated || werr.Retry || st.Code() != codes.Unauthenticated {
				t.Fatalf("%+v, %v; want 4.01, Unauthenticated", werr, st)
			}
		})
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the handler served %d unsigned envelopes", n)
	}
}
