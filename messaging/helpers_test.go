package messaging

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

const (
	clientDID = "did:web:client.example"
	serverDID = "did:web:server.example"
)

// testEnv is a Server behind an httptest TLS 1.3 server with client
// certificates, and what a client needs to talk to it.
type testEnv struct {
	t          *testing.T
	srv        *Server
	hs         *httptest.Server
	conns      *trackingListener
	clientKey  *envelope.PrivateKey
	serverKey  *envelope.PrivateKey
	serverCert *DevCert
	clientCert *DevCert
}

var (
	certsOnce            sync.Once
	serverCert, clientCA *DevCert
	otherCert            *DevCert
	keysOnce             sync.Once
	clientKey, serverKey *envelope.PrivateKey
)

func testCerts(t testing.TB) (server, client, other *DevCert) {
	certsOnce.Do(func() {
		var err error
		if serverCert, err = GenerateDevCert(nil); err != nil {
			panic(err)
		}
		if clientCA, err = GenerateDevCert(&DevCertOptions{URIs: []string{clientDID}}); err != nil {
			panic(err)
		}
		if otherCert, err = GenerateDevCert(&DevCertOptions{URIs: []string{"did:web:other.example"}}); err != nil {
			panic(err)
		}
	})
	return serverCert, clientCA, otherCert
}

func testKeys(t testing.TB) (client, server *envelope.PrivateKey) {
	keysOnce.Do(func() {
		var err error
		if clientKey, err = envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-1"); err != nil {
			panic(err)
		}
		if serverKey, err = envelope.GenerateKey(envelope.EdDSA, serverDID+"#key-1"); err != nil {
			panic(err)
		}
	})
	return clientKey, serverKey
}

// newTestEnv starts a Server answering with h. opts may set limits; its
// ID, Key and Keys are filled in.
func newTestEnv(t testing.TB, h Handler, opts *Options) *testEnv {
	sc, cc, oc := testCerts(t)
	ck, sk := testKeys(t)
	var o Options
	if opts != nil {
		o = *opts
	}
	o.ID, o.Key = serverDID, sk
	if o.Keys == nil {
		other, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:other.example#key-1")
		ks, err := envelope.NewKeySet(ck.Public(), other.Public())
		if err != nil {
			t.Fatal(err)
		}
		o.Keys = ks
	}
	srv := NewServer(h, &o)
	hs := httptest.NewUnstartedServer(srv)
	tl := &trackingListener{Listener: hs.Listener}
	hs.Listener = tl
	pool := cc.Pool()
	pool.AddCert(oc.Leaf)
	hs.TLS = TLSConfig(sc.TLS, pool)
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Close()
	})
	tt, _ := t.(*testing.T)
	return &testEnv{t: tt, srv: srv, hs: hs, conns: tl, clientKey: ck, serverKey: sk, serverCert: sc, clientCert: cc}
}

// client returns a Client of the env with the client certificate.
func (env *testEnv) client(t testing.TB, b bool, opts *ClientOptions) *Client {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	o.WebSocket = b
	if o.Key == nil {
		o.Key = env.clientKey
	}
	if o.TLS == nil {
		o.TLS = clientTLSConfig(env.serverCert.Pool(), &env.clientCert.TLS)
	}
	c, err := NewClient(env.hs.URL, &o)
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

// trackingListener remembers its connections, so that a test can drop
// them all at once (a network failure).
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// dropAll closes every connection accepted so far.
func (l *trackingListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// counter is a Handler sending n chunk deltas {"i": k} then done, and
// recording the most un-ACKed deltas it saw.
type counter struct {
	n        int
	mu       sync.Mutex
	maxAhead int64
	window   int
	ended    chan error
}

func newCounter(n int) *counter { return &counter{n: n, ended: make(chan error, 1)} }

func (c *counter) ServeUAMP(ctx context.Context, req *envelope.Envelope, s *Stream) (err error) {
	defer func() { c.ended <- err }()
	c.mu.Lock()
	c.window = s.Window()
	c.mu.Unlock()
	for i := 0; c.n < 0 || i < c.n; i++ {
		p, _ := json.Marshal(map[string]int{"i": i})
		if err := s.Send(ctx, envelope.DeltaChunk, p); err != nil {
			return err
		}
		s.mu.Lock()
		ahead := s.next - s.acked - 1
		s.mu.Unlock()
		c.mu.Lock()
		c.maxAhead = max(c.maxAhead, ahead)
		c.mu.Unlock()
	}
	return s.Send(ctx, envelope.DeltaDone, nil)
}

// patience bounds a wait for something that happens at once unless the
// code is broken: a safety net far beyond the work even on a loaded
// machine, never the thing under test.
const patience = 10 * time.Second

// waitEnded waits for the handler to return and gives its error.
func (c *counter) waitEnded(t testing.TB) error {
	t.Helper()
	select {
	case err := <-c.ended:
		return err
	case <-time.After(patience):
		t.Fatalf("handler still running %v later", patience)
		return nil
	}
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

var _ http.Handler = (*Server)(nil)

// clientTLSConfig returns the client side: TLS 1.3 only, servers
// verified against roots (nil: the system roots), and the client
// certificate cert when not nil (mTLS).
func clientTLSConfig(roots *x509.CertPool, cert *tls.Certificate) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}
