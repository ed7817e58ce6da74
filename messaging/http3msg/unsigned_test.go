package http3msg

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// TestUAMP_6_3_HTTP3UnsignedEnvelope: over HTTP/3 as over HTTP/2, an
// envelope whose sig is absent, empty or not a string is unauthenticated
// (§6.3: every envelope must carry sig): 401 with a signed error
// envelope carrying 4.01.
func TestUAMP_6_3_HTTP3UnsignedEnvelope(t *testing.T) {
	env := newTestEnv(t, messaging.Echo)
	withCert := NewTransport(&tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}})
	defer withCert.Close()
	serverKeys, _ := envelope.NewKeySet(serverKey.Public())
	b, err := json.Marshal(ask("unsigned"))
	if err != nil || bytes.Contains(b, []byte(`"sig"`)) {
		t.Fatalf("unsigned envelope %s, %v", b, err)
	}
	withSig := func(v string) []byte {
		return append(bytes.TrimSuffix(bytes.Clone(b), []byte("}")), `,"sig":`+v+`}`...)
	}
	for name, body := range map[string][]byte{"no sig": b, "empty sig": withSig(`""`), "sig not a string": withSig(`1`)} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", env.url+pathMessages, bytes.NewReader(body))
			req.Header.Set("Content-Type", mediaType)
			resp, err := withCert.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rb, _ := io.ReadAll(resp.Body)
			e, err := envelope.Open(context.Background(), rb, serverKeys)
			if err != nil {
				t.Fatalf("%d %s: %v", resp.StatusCode, rb, err)
			}
			werr, err := envelope.ParseErrorBody(e.Body)
			if err != nil || resp.ProtoMajor != 3 || resp.StatusCode != http.StatusUnauthorized || werr.Code != envelope.CodeUnauthenticated {
				t.Fatalf("%s %d: %+v, %v; want 401 with 4.01", resp.Proto, resp.StatusCode, werr, err)
			}
		})
	}
}
