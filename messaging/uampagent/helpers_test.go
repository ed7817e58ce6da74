package uampagent_test

import (
	"crypto/tls"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

const (
	clientDID = "did:web:client.example"
	serverDID = "did:web:server.example"
)

var (
	setupOnce  sync.Once
	serverCert *messaging.DevCert
	clientCert tls.Certificate
	clientKey  *envelope.PrivateKey
	serverKey  *envelope.PrivateKey
)

// setup makes the keys and certificates the tests share: the server's TLS
// certificate, the client's signing key and a client certificate made
// from it (messaging.KeyCertificate), which the server trusts.
func setup(t testing.TB) {
	t.Helper()
	setupOnce.Do(func() {
		var err error
		if serverCert, err = messaging.GenerateDevCert(nil); err != nil {
			panic(err)
		}
		if clientKey, err = envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-1"); err != nil {
			panic(err)
		}
		if serverKey, err = envelope.GenerateKey(envelope.EdDSA, serverDID+"#key-1"); err != nil {
			panic(err)
		}
		if clientCert, err = messaging.KeyCertificate(clientKey, clientDID, 0); err != nil {
			panic(err)
		}
	})
}

// testEnv is a UAMP server answering with a handler behind an httptest
// TLS 1.3 server that asks for client certificates.
type testEnv struct {
	hs *httptest.Server
}

func newTestEnv(t *testing.T, h messaging.Handler) *testEnv {
	t.Helper()
	setup(t)
	trusted, err := envelope.NewKeySet(clientKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	srv := messaging.NewServer(h, &messaging.Options{ID: serverDID, Key: serverKey, Keys: trusted,
		Authenticate: messaging.ClientKeys(trusted, nil)})
	hs := httptest.NewUnstartedServer(srv)
	hs.TLS = messaging.RequestClientCertificates(messaging.TLSConfig(serverCert.TLS, nil))
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Close()
	})
	return &testEnv{hs: hs}
}

// client returns a client of the env over binding b.
func (env *testEnv) client(t *testing.T, b bool) *messaging.Client {
	t.Helper()
	c, err := messaging.NewClient(env.hs.URL, &messaging.ClientOptions{Key: clientKey, WebSocket: b,
		TLS: &tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// ask returns a fresh unsigned ask from the client to the server.
func ask(content string) *envelope.Envelope {
	return envelope.New(clientDID, []string{serverDID}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: content})
}

func bindings() []struct {
	name string
	b    bool
} {
	return []struct {
		name string
		b    bool
	}{{"SSE", false}, {"WebSocket", true}}
}

// wait waits for ch; the timeout is a safety net far beyond the work.
func wait(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}
