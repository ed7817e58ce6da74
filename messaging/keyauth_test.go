package messaging

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

// keyEnv serves Echo with the ClientKeys authenticator: keys trusted for
// envelopes also authenticate the certificates they make; caCert's
// certificates are accepted as issued by a CA.
func keyEnv(t *testing.T, keys *envelope.KeySet, ca *DevCert) *httptest.Server {
	t.Helper()
	sc, _, _ := testCerts(t)
	_, sk := testKeys(t)
	var pool = ca.Pool()
	srv := NewServer(Echo, &Options{ID: serverDID, Key: sk, Keys: keys, Authenticate: ClientKeys(keys, pool)})
	hs := httptest.NewUnstartedServer(srv)
	hs.TLS = RequestClientCertificates(TLSConfig(sc.TLS, nil))
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Close()
	})
	return hs
}

// echoOnce asks the server to echo "hi" from from, signed by key, with
// the client certificate cert, over b.
func echoOnce(t *testing.T, hs *httptest.Server, b bool, key *envelope.PrivateKey, from string, cert *tls.Certificate) error {
	t.Helper()
	sc, _, _ := testCerts(t)
	c, err := NewClient(hs.URL, &ClientOptions{Key: key, WebSocket: b, TLS: clientTLSConfig(sc.Pool(), cert)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	req := envelope.New(from, []string{serverDID}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "hi"})
	reply, err := c.Ask(context.Background(), req)
	if err != nil {
		return err
	}
	var got []envelope.DeltaType
	for d, err := range reply.Deltas() {
		if err != nil {
			return err
		}
		got = append(got, d.Type)
	}
	if len(got) != 2 || got[1] != envelope.DeltaDone {
		t.Errorf("deltas %v", got)
	}
	return nil
}

func TestUAMP_6_2_ClientKeyCertificates(t *testing.T) {
	didKey, err := envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-1")
	if err != nil {
		t.Fatal(err)
	}
	bareKey, err := envelope.GenerateKey(envelope.ES256, "")
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:stranger.example#key-1")
	keys, err := envelope.NewKeySet(didKey.Public(), bareKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	_, caCert, _ := testCerts(t) // issues certificates naming clientDID
	hs := keyEnv(t, keys, caCert)
	cert := func(k *envelope.PrivateKey, principal string) *tls.Certificate {
		c, err := KeyCertificate(k, principal, 0)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	for _, b := range bindings() {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				key  *envelope.PrivateKey
				from string
				cert *tls.Certificate
				code envelope.Code // "" for success
			}{
				{"Ed25519 key with a DID kid", didKey, clientDID, cert(didKey, clientDID), ""},
				{"P-256 key with a bare kid", bareKey, "did:web:anyone.example", cert(bareKey, "did:web:anyone.example"), ""},
				{"CA-issued certificate", didKey, clientDID, &caCert.TLS, ""},
				{"certificate for another DID than the kid's", didKey, "did:web:other.example", cert(didKey, "did:web:other.example"), envelope.CodeUnauthenticated},
				{"untrusted key", stranger, "did:web:stranger.example", cert(stranger, "did:web:stranger.example"), envelope.CodeUnauthenticated},
				{"no certificate", didKey, clientDID, nil, envelope.CodeUnauthenticated},
				{"from is not the principal", bareKey, "did:web:someone-else.example", cert(bareKey, "did:web:anyone.example"), envelope.CodeUnauthorized},
			} {
				err := echoOnce(t, hs, b.b, tc.key, tc.from, tc.cert)
				switch {
				case tc.code == "" && err != nil:
					t.Errorf("%s: %v", tc.name, err)
				case tc.code != "" && envelope.AsError(err).Code != tc.code:
					t.Errorf("%s: got %v, want code %s", tc.name, err, tc.code)
				}
			}
		})
	}
}
