package http3msg

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// The paths and media type of the HTTP binding (UAMP 1.0 §7, §11).
const (
	pathMessages  = "/v1/messages"
	pathStream    = "/v1/stream/"
	pathWebSocket = "/uamp/1/ws"
	mediaType     = "application/uamp+json;v=1"
)

const (
	clientDID = "did:web:client.example"
	serverDID = "did:web:server.example"
)

var (
	fixturesOnce           sync.Once
	serverCert, clientCert *messaging.DevCert
	clientKey, serverKey   *envelope.PrivateKey
)

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
		clientKey, err = envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-1")
		must(err)
		serverKey, err = envelope.GenerateKey(envelope.EdDSA, serverDID+"#key-1")
		must(err)
	})
}

// testEnv is a messaging.Server served over HTTP/3 on loopback; it
// records the protocol of every request and can drop every QUIC
// connection.
type testEnv struct {
	srv *messaging.Server
	url string

	mu     sync.Mutex
	conns  []*quic.Conn
	protos map[string]int
}

func newTestEnv(t testing.TB, h messaging.Handler) *testEnv {
	t.Helper()
	fixtures()
	keys, err := envelope.NewKeySet(clientKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	env := &testEnv{protos: map[string]int{}}
	env.srv = messaging.NewServer(h, &messaging.Options{ID: serverDID, Key: serverKey, Keys: keys})
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env.mu.Lock()
		env.protos[r.Proto]++
		env.mu.Unlock()
		env.srv.ServeHTTP(w, r)
	}), messaging.TLSConfig(serverCert.TLS, clientCert.Pool()))
	hs.ConnContext = func(ctx context.Context, c *quic.Conn) context.Context {
		env.mu.Lock()
		env.conns = append(env.conns, c)
		env.mu.Unlock()
		return ctx
	}
	go hs.Serve(udp)
	t.Cleanup(func() {
		hs.Close()
		env.srv.Close()
		udp.Close()
	})
	env.url = "https://" + udp.LocalAddr().String()
	return env
}

// dropAll closes every QUIC connection accepted so far.
func (env *testEnv) dropAll() {
	env.mu.Lock()
	defer env.mu.Unlock()
	for _, c := range env.conns {
		c.CloseWithError(0, "dropped by the test")
	}
	env.conns = nil
}

// client returns a messaging.Client of env over HTTP/3 with the client
// certificate.
func (env *testEnv) client(t testing.TB, opts *messaging.ClientOptions) *messaging.Client {
	t.Helper()
	var o messaging.ClientOptions
	if opts != nil {
		o = *opts
	}
	o.Key = clientKey
	tr := NewTransport(&tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}})
	t.Cleanup(func() { tr.Close() })
	o.Transport = tr
	c, err := messaging.NewClient(env.url, &o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ask(content string) *envelope.Envelope {
	return envelope.New(clientDID, []string{serverDID}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: content})
}

// counter sends n chunk deltas {"i": k} (n < 0: without end), then done.
func counter(n int, ended chan<- error) messaging.Handler {
	return messaging.HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) (err error) {
		defer func() { ended <- err }()
		for i := 0; n < 0 || i < n; i++ {
			p, _ := json.Marshal(map[string]int{"i": i})
			if err := s.Send(ctx, envelope.DeltaChunk, p); err != nil {
				return err
			}
		}
		return s.Send(ctx, envelope.DeltaDone, nil)
	})
}

// collect reads a reply: the chunk indexes and the final delta.
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
			json.Unmarshal(d.Payload, &p)
			idx = append(idx, p.I)
		}
		if each != nil {
			each(d)
		}
	}
	return idx, last
}

func TestUAMP_7_HTTP3_Echo(t *testing.T) {
	env := newTestEnv(t, messaging.Echo)
	content := strings.Repeat("héllo wörld ", 100)
	reply, err := env.client(t, nil).Ask(context.Background(), ask(content))
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	var last *envelope.Delta
	for d, err := range reply.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
		last = d
		var p struct{ Content string }
		json.Unmarshal(d.Payload, &p)
		got.WriteString(p.Content)
	}
	if got.String() != content || last.Type != envelope.DeltaDone {
		t.Fatalf("echoed %q, last %+v", got.String(), last)
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	// The ask, the stream, the final ACK: all HTTP/3.
	if len(env.protos) != 1 || env.protos["HTTP/3.0"] < 3 {
		t.Fatalf("requests by protocol: %v", env.protos)
	}
}

// TestUAMP_5_HTTP3_ResumeAfterDrop: every QUIC connection is closed twice
// mid-stream; the client reconnects (new QUIC connection, new request
// stream) with Last-Event-ID and gets every delta exactly once, in
// order.
func TestUAMP_5_HTTP3_ResumeAfterDrop(t *testing.T) {
	ended := make(chan error, 1)
	env := newTestEnv(t, counter(1000, ended))
	reply, err := env.client(t, nil).Ask(context.Background(), ask(""))
	if err != nil {
		t.Fatal(err)
	}
	idx, last := collect(t, reply, func(d *envelope.Delta) {
		if d.Seq == 100 || d.Seq == 517 {
			env.dropAll()
		}
	})
	if len(idx) != 1000 || last.Type != envelope.DeltaDone || last.Seq != 1000 {
		t.Fatalf("%d chunks, final %+v", len(idx), last)
	}
	for i, v := range idx {
		if v != i {
			t.Fatalf("chunk %d carries %d", i, v)
		}
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
}

// TestUAMP_4_1_HTTP3_CancelMidStream: a cancel stops the producer and the
// stream ends with a cancel delta.
func TestUAMP_4_1_HTTP3_CancelMidStream(t *testing.T) {
	ended := make(chan error, 1)
	env := newTestEnv(t, counter(-1, ended))
	ctx := context.Background()
	reply, err := env.client(t, nil).Ask(ctx, ask(""))
	if err != nil {
		t.Fatal(err)
	}
	_, last := collect(t, reply, func(d *envelope.Delta) {
		if d.Seq == 10 {
			if err := reply.Cancel(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	if last.Type != envelope.DeltaCancel {
		t.Fatalf("final %s", last.Type)
	}
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "cancelled") {
			t.Fatalf("producer ended with %v", err)
		}
	case <-time.After(10 * time.Second): // a safety net, far beyond the work
		t.Fatal("producer still running")
	}
}

// TestUAMP_9_HTTP3Mapping: refusals over HTTP/3 are the HTTP binding's:
// the status of the code and a signed error envelope.
func TestUAMP_9_HTTP3Mapping(t *testing.T) {
	env := newTestEnv(t, messaging.Echo)
	sign := func(e *envelope.Envelope) []byte {
		if err := envelope.Sign(e, clientKey); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(e)
		return b
	}
	withCert := NewTransport(&tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}})
	noCert := NewTransport(&tls.Config{RootCAs: serverCert.Pool()})
	defer withCert.Close()
	defer noCert.Close()
	serverKeys, _ := envelope.NewKeySet(serverKey.Public())
	tests := []struct {
		name        string
		rt          http.RoundTripper
		method      string
		path        string
		contentType string
		body        []byte
		status      int
		code        envelope.Code
	}{
		{"401 no client certificate", noCert, "POST", pathMessages, mediaType, sign(ask("x")), 401, envelope.CodeUnauthenticated},
		{"401 tampered", withCert, "POST", pathMessages, mediaType, bytes.Replace(sign(ask("2+2")), []byte("2+2"), []byte("2+3"), 1), 401, envelope.CodeUnauthenticated},
		{"415 media type", withCert, "POST", pathMessages, "application/json", sign(ask("x")), 415, envelope.CodeUnsupportedMediaType},
		{"404 no such stream", withCert, "GET", pathStream + "str-none", "", nil, 404, envelope.CodeMissingDeltaSeq},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, env.url+tc.path, bytes.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := tc.rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			e, err := envelope.Open(context.Background(), b, serverKeys)
			if err != nil {
				t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
			}
			werr, err := envelope.ParseErrorBody(e.Body)
			if err != nil || resp.StatusCode != tc.status || werr.Code != tc.code || resp.ProtoMajor != 3 {
				t.Fatalf("%s %d: %+v, %v", resp.Proto, resp.StatusCode, werr, err)
			}
		})
	}
	t.Run("no WebSocket over HTTP/3", func(t *testing.T) {
		req, _ := http.NewRequest("GET", env.url+pathWebSocket, nil)
		req.Header.Set("Sec-WebSocket-Protocol", "uamp.v1")
		resp, err := withCert.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		e, err := envelope.Open(context.Background(), b, serverKeys)
		if err != nil || resp.StatusCode != http.StatusHTTPVersionNotSupported {
			t.Fatalf("WebSocket request over HTTP/3: %s %s, %v", resp.Status, b, err)
		}
		if werr, err := envelope.ParseErrorBody(e.Body); err != nil || werr.Code != envelope.CodeBadRequest {
			t.Fatalf("%+v, %v", werr, err)
		}
	})
}
