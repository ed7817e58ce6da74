package messaging

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/coder/websocket"
)

// unsignedEnvelopes are asks that are well formed but for their sig:
// absent, empty, not a string. The rest is as a signed ask would be, so
// that only the missing signature can be what is refused.
func unsignedEnvelopes(t *testing.T) map[string][]byte {
	t.Helper()
	b, err := json.Marshal(ask("unsigned"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"sig"`)) {
		t.Fatalf("an unsigned envelope encodes with a sig: %s", b)
	}
	withSig := func(v string) []byte {
		return append(bytes.TrimSuffix(bytes.Clone(b), []byte("}")), `,"sig":`+v+`}`...)
	}
	return map[string][]byte{
		"no sig":           b,
		"empty sig":        withSig(`""`),
		"sig not a string": withSig(`{"alg":"none"}`),
	}
}

// TestUAMP_6_3_UnsignedEnvelope: "every envelope MUST carry sig" (§6.3).
// An envelope without one is unauthenticated — 4.01, HTTP 401, as
// docs/spec-notes/uamp.md maps a missing sig — on POST /v1/messages and
// on /uamp/1/ws, and the handler never sees it; the same ask signed is
// accepted.
func TestUAMP_6_3_UnsignedEnvelope(t *testing.T) {
	var served atomic.Int32
	h := HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *Stream) error {
		served.Add(1)
		return nil
	})
	ck, _ := testKeys(t)
	keys, _ := envelope.NewKeySet(ck.Public())
	env := newTestEnv(t, h, &Options{Keys: keys})
	withCert := env.rawClient(&env.clientCert.TLS)

	for name, body := range unsignedEnvelopes(t) {
		t.Run("HTTP "+name, func(t *testing.T) {
			status, _, werr := env.post(t, withCert, mediaType, body)
			if status != 401 || werr == nil || werr.Code != envelope.CodeUnauthenticated || werr.Retry {
				t.Fatalf("HTTP %d %+v, want 401 with 4.01", status, werr)
			}
			if !strings.Contains(werr.Message, "sig") {
				t.Errorf("message %q does not say the sig is missing", werr.Message)
			}
		})
		t.Run("WebSocket "+name, func(t *testing.T) {
			conn, _, err := websocket.Dial(context.Background(), "wss"+strings.TrimPrefix(env.hs.URL, "https")+pathWebSocket,
				&websocket.DialOptions{HTTPClient: env.client(t, true, nil).wsHTTP, Subprotocols: []string{subprotocol}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.CloseNow()
			if err := conn.Write(context.Background(), websocket.MessageBinary, appendFrame(nil, body)); err != nil {
				t.Fatal(err)
			}
			_, b, err := conn.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			r := frameReader{msg: b, max: 1 << 20}
			rec, err := r.next()
			if err != nil {
				t.Fatal(err)
			}
			if werr := env.errorBody(t, rec); werr.Code != envelope.CodeUnauthenticated || werr.Retry {
				t.Fatalf("%+v, want 4.01", werr)
			}
		})
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the handler served %d unsigned envelopes", n)
	}
	if status, _, werr := env.post(t, withCert, mediaType, signed(t, ask("signed"), ck)); status != 202 {
		t.Fatalf("the signed ask: HTTP %d %+v", status, werr)
	}
}
