package grpcmsg

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/grpcmsg/internal/uampv1"
	"github.com/agentry-dev/agentry/messaging/http3msg"
)

const (
	clientDID = "did:web:client.example"
	serverDID = "did:web:server.example"
)

var (
	fixturesOnce                    sync.Once
	serverCert, clientCert, otherCt *messaging.DevCert
	clientKey, serverKey, otherKey  *envelope.PrivateKey
)

// fixtures returns the certificates and keys every test shares: the
// server's, the client's (URI SAN clientDID) and another requester's.
func fixtures() {
	fixturesOnce.Do(func() {
		must := func(err error) {
			if err != nil {
				panic(err)
			}
		}
		var err error
		serverCert, err = messaging.GenerateDevCert(nil)
		must(err)
		clientCert, err = messaging.GenerateDevCert(&messaging.DevCertOptions{URIs: []string{clientDID}})
		must(err)
		otherCt, err = messaging.GenerateDevCert(&messaging.DevCertOptions{URIs: []string{"did:web:other.example"}})
		must(err)
		clientKey, err = envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-1")
		must(err)
		serverKey, err = envelope.GenerateKey(envelope.EdDSA, serverDID+"#key-1")
		must(err)
		otherKey, err = envelope.GenerateKey(envelope.EdDSA, "did:web:other.example#key-1")
		must(err)
	})
}

// testEnv is one messaging.Server served over gRPC (its own TLS 1.3
// listener, whose connections a test can drop) and over HTTPS (SSE and
// WebSocket, httptest) and HTTP/3 (SSE over QUIC), with client
// certificates.
type testEnv struct {
	srv     *messaging.Server
	grpcURL string // https://127.0.0.1:port of the gRPC listener
	conns   *trackingListener
	hs      *httptest.Server
	h3URL   string // https://127.0.0.1:port of the HTTP/3 (UDP) listener
}

func newTestEnv(t testing.TB, h messaging.Handler, opts *messaging.Options) *testEnv {
	t.Helper()
	fixtures()
	var o messaging.Options
	if opts != nil {
		o = *opts
	}
	o.ID, o.Key = serverDID, serverKey
	if o.Keys == nil {
		ks, err := envelope.NewKeySet(clientKey.Public(), otherKey.Public())
		if err != nil {
			t.Fatal(err)
		}
		o.Keys = ks
	}
	srv := messaging.NewServer(h, &o)
	pool := clientCert.Pool()
	pool.AddCert(otherCt.Leaf)
	conf := messaging.TLSConfig(serverCert.TLS, pool)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := &trackingListener{Listener: ln}
	gs := NewServer(srv, conf)
	go gs.Serve(tl)

	hs := httptest.NewUnstartedServer(srv)
	hs.TLS = conf
	hs.EnableHTTP2 = true
	hs.StartTLS()

	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	h3 := http3msg.NewServer(srv, conf)
	go h3.Serve(udp)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		gs.Stop()
		h3.Close()
		udp.Close()
		srv.Close()
	})
	return &testEnv{srv: srv, grpcURL: "https://" + ln.Addr().String(), conns: tl, hs: hs, h3URL: "https://" + udp.LocalAddr().String()}
}

// clientOptions fills in the client's key and TLS configuration.
func clientOptions(opts *messaging.ClientOptions) *messaging.ClientOptions {
	var o messaging.ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Key == nil {
		o.Key = clientKey
	}
	if o.TLS == nil {
		o.TLS = &tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}}
	}
	return &o
}

// client returns a gRPC Client of env.
func (env *testEnv) client(t testing.TB, opts *messaging.ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(env.grpcURL, clientOptions(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// httpClient returns a messaging.Client of env over SSE or WebSocket.
func (env *testEnv) httpClient(t testing.TB, b bool, opts *messaging.ClientOptions) *messaging.Client {
	t.Helper()
	o := clientOptions(opts)
	o.WebSocket = b
	c, err := messaging.NewClient(env.hs.URL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// h3Client returns a messaging.Client of env over HTTP/3.
func (env *testEnv) h3Client(t testing.TB, opts *messaging.ClientOptions) *messaging.Client {
	t.Helper()
	o := clientOptions(opts)
	tr := http3msg.NewTransport(o.TLS)
	t.Cleanup(func() { tr.Close() })
	o.Transport = tr
	c, err := messaging.NewClient(env.h3URL, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// raw returns a bare uamp.v1.Agent client presenting cert (nil: none),
// for what the Client would not send.
func (env *testEnv) raw(t testing.TB, cert *tls.Certificate) uampv1.AgentClient {
	t.Helper()
	conf := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: serverCert.Pool()}
	if cert != nil {
		conf.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(env.grpcURL, "https://"),
		grpc.WithTransportCredentials(credentials.NewTLS(conf)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return uampv1.NewAgentClient(conn)
}

// ask returns a fresh unsigned ask from the client to the server.
func ask(content string) *envelope.Envelope {
	return envelope.New(clientDID, []string{serverDID}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: content})
}

// signed signs e with k and returns its bytes.
func signed(t testing.TB, e *envelope.Envelope, k *envelope.PrivateKey) []byte {
	t.Helper()
	if err := envelope.Sign(e, k); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ack returns the signed ACK of request id up to seq.
func ackOf(t testing.TB, id string, seq int64) []byte {
	e := envelope.New(clientDID, []string{serverDID}, envelope.IntentProgress, envelope.Body{Type: "text/plain"})
	e.ReplyTo = id
	e.Ext = map[string]any{"ack_seq": float64(seq)}
	return signed(t, e, clientKey)
}

func envelopeFrame(b []byte) *uampv1.Frame {
	return &uampv1.Frame{Kind: &uampv1.Frame_Envelope{Envelope: b}}
}

// openError opens a server's error envelope, verified with its key.
func openError(t testing.TB, b []byte) *envelope.Error {
	t.Helper()
	keys, _ := envelope.NewKeySet(serverKey.Public())
	e, err := envelope.Open(context.Background(), b, keys)
	if err != nil {
		t.Fatalf("error envelope %s: %v", b, err)
	}
	if e.Intent != envelope.IntentError || e.From != serverDID {
		t.Fatalf("error envelope %s", b)
	}
	werr, err := envelope.ParseErrorBody(e.Body)
	if err != nil {
		t.Fatal(err)
	}
	return werr
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

// counter is a Handler sending n chunk deltas {"i": k} (n < 0: without
// end) then done, counting what it sent.
type counter struct {
	n     int
	mu    sync.Mutex
	sent  int
	ended chan error
}

func newCounter(n int) *counter { return &counter{n: n, ended: make(chan error, 1)} }

func (c *counter) ServeUAMP(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) (err error) {
	defer func() { c.ended <- err }()
	for i := 0; c.n < 0 || i < c.n; i++ {
		p, _ := json.Marshal(map[string]int{"i": i})
		if err := s.Send(ctx, envelope.DeltaChunk, p); err != nil {
			return err
		}
		c.mu.Lock()
		c.sent++
		c.mu.Unlock()
	}
	return s.Send(ctx, envelope.DeltaDone, nil)
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
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

// collect ranges over a reply, calling each (which may be nil) on every
// delta, and returns the chunk indexes and the final delta.
func collect(t *testing.T, reply *messaging.Reply, each func(*envelope.Delta)) ([]int, *envelope.Delta) {
	t.Helper()
	var idx []int
	var last *envelope.Delta
	for d, err := range reply.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
		last = d
		if d.Type == envelope.DeltaChunk {
			var p struct{ I int }
			if err := json.Unmarshal(d.Payload, &p); err != nil {
				t.Fatal(err)
			}
			idx = append(idx, p.I)
		}
		if each != nil {
			each(d)
		}
	}
	return idx, last
}

func checkSequence(t *testing.T, idx []int, n int) {
	t.Helper()
	if len(idx) != n {
		t.Fatalf("%d chunks, want %d", len(idx), n)
	}
	for i, v := range idx {
		if v != i {
			t.Fatalf("chunk %d carries %d", i, v)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newFakeServer serves agent over gRPC and TLS 1.3 and returns its
// address.
func newFakeServer(t testing.TB, agent uampv1.AgentServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(messaging.TLSConfig(serverCert.TLS, clientCert.Pool()))))
	uampv1.RegisterAgentServer(gs, agent)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}
