package messaging

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/coder/websocket"
)

// rawClient is an HTTP/2 client with the client certificate cert (nil:
// none), for requests the Client would not send.
func (env *testEnv) rawClient(cert *tls.Certificate) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLSConfig(env.serverCert.Pool(), cert), Protocols: &p}}
}

// post POSTs body and returns the status, the headers and the error the
// error envelope carries (verified with the server's key).
func (env *testEnv) post(t *testing.T, hc *http.Client, contentType string, body []byte) (int, http.Header, *envelope.Error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.hs.URL+pathMessages, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		return resp.StatusCode, resp.Header, nil
	}
	return resp.StatusCode, resp.Header, env.errorBody(t, b)
}

// errorBody opens an error envelope of the server.
func (env *testEnv) errorBody(t *testing.T, b []byte) *envelope.Error {
	t.Helper()
	keys, _ := envelope.NewKeySet(env.serverKey.Public())
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

func signed(t *testing.T, e *envelope.Envelope, k *envelope.PrivateKey) []byte {
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

// TestUAMP_9_HTTPMapping pins the HTTP form of every refusal (DESIGN §5):
// the status of the code, a signed error envelope carrying {code,
// message, retry}, Retry-After on 5.04.
func TestUAMP_9_HTTPMapping(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	h := HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *Stream) error {
		if req.Body.Content == "block" {
			select {
			case <-block:
			case <-ctx.Done():
			}
		}
		return nil
	})
	ck, _ := testKeys(t)
	other, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:other.example#key-1")
	keys, _ := envelope.NewKeySet(ck.Public(), other.Public())
	env := newTestEnv(t, h, &Options{Keys: keys, MaxBodySize: 2048, MaxStreams: 1, RetryAfter: 3 * time.Second})
	untrusted, _ := envelope.GenerateKey(envelope.EdDSA, clientDID+"#key-9")
	withCert := env.rawClient(&env.clientCert.TLS)
	_, _, oc := testCerts(t)

	big := ask(strings.Repeat("x", 4096))
	tests := []struct {
		name        string
		client      *http.Client
		contentType string
		body        []byte
		status      int
		code        envelope.Code
	}{
		{"415 media type", withCert, "application/json", signed(t, ask("x"), ck), 415, envelope.CodeUnsupportedMediaType},
		{"415 version", withCert, "application/uamp+json;v=2", signed(t, ask("x"), ck), 415, envelope.CodeUnsupportedMediaType},
		{"413 body limit", withCert, mediaType, signed(t, big, ck), 413, envelope.CodePayloadTooLarge},
		{"401 no client certificate", env.rawClient(nil), mediaType, signed(t, ask("x"), ck), 401, envelope.CodeUnauthenticated},
		{"401 unknown key", withCert, mediaType, signed(t, ask("x"), untrusted), 401, envelope.CodeUnauthenticated},
		{"401 tampered", withCert, mediaType, bytes.Replace(signed(t, ask("2+2"), ck), []byte("2+2"), []byte("2+3"), 1), 401, envelope.CodeUnauthenticated},
		{"401 stale ts", withCert, mediaType, func() []byte {
			e := ask("x")
			e.TS = time.Now().Add(-time.Hour).UTC().Format(envelope.TimeFormat)
			return signed(t, e, ck)
		}(), 401, envelope.CodeUnauthenticated},
		{"403 from is not the principal", env.rawClient(&oc.TLS), mediaType, signed(t, ask("x"), ck), 403, envelope.CodeUnauthorized},
		{"403 signed by another sender", withCert, mediaType, func() []byte {
			e := ask("x")
			e.From = "did:web:other.example"
			return signed(t, e, other)
		}(), 403, envelope.CodeUnauthorized},
		{"403 not addressed here", withCert, mediaType, func() []byte {
			e := ask("x")
			e.To = []string{"did:web:elsewhere.example"}
			return signed(t, e, ck)
		}(), 403, envelope.CodeUnauthorized},
		{"400 not JSON", withCert, mediaType, []byte("{"), 400, envelope.CodeBadRequest},
		{"400 window above the maximum", withCert, mediaType, func() []byte {
			e := ask("x")
			e.DeltaWindow = 100000
			return signed(t, e, ck)
		}(), 400, envelope.CodeBadRequest},
		{"409 ACK of an unknown request", withCert, mediaType, func() []byte {
			e := envelope.New(clientDID, []string{serverDID}, envelope.IntentProgress, envelope.Body{Type: "text/plain"})
			e.ReplyTo = ids.New()
			e.Ext = map[string]any{"ack_seq": 3.0}
			return signed(t, e, ck)
		}(), 409, envelope.CodeMissingDeltaSeq},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, werr := env.post(t, tc.client, tc.contentType, tc.body)
			if status != tc.status || werr == nil || werr.Code != tc.code || werr.Retry != tc.code.Retryable() && tc.code != envelope.CodeMissingDeltaSeq {
				t.Fatalf("HTTP %d %+v, want %d %s", status, werr, tc.status, tc.code)
			}
		})
	}
	t.Run("503 overload", func(t *testing.T) {
		if status, _, werr := env.post(t, withCert, mediaType, signed(t, ask("block"), ck)); status != 202 {
			t.Fatalf("first ask: %d %v", status, werr)
		}
		status, hdr, werr := env.post(t, withCert, mediaType, signed(t, ask("x"), ck))
		if status != 503 || werr.Code != envelope.CodeBusy || !werr.Retry || hdr.Get("Retry-After") != "3" {
			t.Fatalf("HTTP %d Retry-After %q %+v", status, hdr.Get("Retry-After"), werr)
		}
		// The Client reads it as the *envelope.Error, Retry-After included.
		_, err := env.client(t, false, nil).Ask(context.Background(), ask("x"))
		var e *envelope.Error
		if !errors.As(err, &e) || e.Code != envelope.CodeBusy || e.RetryAfter != 3*time.Second {
			t.Fatalf("client: %v", err)
		}
	})
	t.Run("404 unknown stream", func(t *testing.T) {
		resp, err := withCert.Get(env.hs.URL + pathStream + "str-none")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if werr := env.errorBody(t, b); resp.StatusCode != 404 || werr.Code != envelope.CodeMissingDeltaSeq || werr.Retry {
			t.Fatalf("HTTP %d %+v", resp.StatusCode, werr)
		}
	})
	t.Run("413 WebSocket record", func(t *testing.T) {
		conn, _, err := websocket.Dial(context.Background(), "wss"+strings.TrimPrefix(env.hs.URL, "https")+pathWebSocket,
			&websocket.DialOptions{HTTPClient: env.client(t, true, nil).wsHTTP, Subprotocols: []string{subprotocol}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		// A record whose length is over the limit, in a message within it.
		msg := binary.BigEndian.AppendUint32(nil, 1<<20)
		msg = append(msg, `{}`...)
		conn.Write(context.Background(), websocket.MessageBinary, msg)
		_, b, err := conn.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		r := frameReader{msg: b, max: 1 << 20}
		rec, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if werr := env.errorBody(t, rec); werr.Code != envelope.CodePayloadTooLarge {
			t.Fatalf("%+v", werr)
		}
		_, _, err = conn.Read(context.Background())
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("close: %v", err)
		}
	})
}

// TestUAMP_6_1_TLS13Only: UAMP is refused over plain HTTP and h2c (4.03)
// and the SSE binding over HTTP/1.1 (505); the TLS configuration
// refuses TLS 1.2 at the handshake.
func TestUAMP_6_1_TLS13Only(t *testing.T) {
	ck, _ := testKeys(t)
	srv := NewServer(Echo, &Options{ID: serverDID})
	defer srv.Close()
	t.Run("plain HTTP", func(t *testing.T) {
		hs := httptest.NewServer(srv)
		defer hs.Close()
		resp, err := http.Post(hs.URL+pathMessages, mediaType, bytes.NewReader(signed(t, ask("x"), ck)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("HTTP %d", resp.StatusCode)
		}
	})
	t.Run("h2c", func(t *testing.T) {
		hs := httptest.NewUnstartedServer(srv)
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		hs.Config.Protocols = &p
		hs.Start()
		defer hs.Close()
		var cp http.Protocols
		cp.SetUnencryptedHTTP2(true)
		hc := &http.Client{Transport: &http.Transport{Protocols: &cp}}
		resp, err := hc.Post(hs.URL+pathMessages, mediaType, bytes.NewReader(signed(t, ask("x"), ck)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 403 || resp.ProtoMajor != 2 {
			t.Fatalf("HTTP/%d %d", resp.ProtoMajor, resp.StatusCode)
		}
	})
	sc, cc, _ := testCerts(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hsrv := NewHTTPServer(srv, TLSConfig(sc.TLS, cc.Pool()))
	go hsrv.ServeTLS(ln, "", "")
	defer hsrv.Close()
	base := "https://" + ln.Addr().String()
	t.Run("TLS 1.2", func(t *testing.T) {
		conf := clientTLSConfig(sc.Pool(), nil)
		conf.MinVersion, conf.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		c, err := tls.Dial("tcp", ln.Addr().String(), conf)
		if err == nil {
			c.Close()
			t.Fatal("TLS 1.2 handshake accepted")
		}
	})
	t.Run("plain HTTP to the TLS port", func(t *testing.T) {
		resp, err := http.Post("http://"+ln.Addr().String()+pathMessages, mediaType, strings.NewReader("{}"))
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != 400 { // net/http: "client sent an HTTP request to an HTTPS server"
				t.Fatalf("HTTP %d", resp.StatusCode)
			}
		}
	})
	t.Run("HTTP/1.1 over TLS 1.3", func(t *testing.T) {
		var p http.Protocols
		p.SetHTTP1(true)
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLSConfig(sc.Pool(), &cc.TLS), Protocols: &p}}
		resp, err := hc.Post(base+pathMessages, mediaType, bytes.NewReader(signed(t, ask("x"), ck)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusHTTPVersionNotSupported || resp.TLS.Version != tls.VersionTLS13 {
			t.Fatalf("HTTP %d", resp.StatusCode)
		}
	})
	t.Run("HTTP/2 over TLS 1.3", func(t *testing.T) {
		keys, _ := envelope.NewKeySet(ck.Public())
		srv2 := NewServer(Echo, &Options{ID: serverDID, Keys: keys})
		defer srv2.Close()
		hsrv.Handler = srv2
		c, err := NewClient(base, &ClientOptions{Key: ck, TLS: clientTLSConfig(sc.Pool(), &cc.TLS)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		reply, err := c.Ask(context.Background(), ask("over h2"))
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range reply.Deltas() {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// fakeStream serves a crafted SSE stream and WebSocket, for the checks
// a consumer makes on what it receives.
func fakeStream(t *testing.T, deltas ...string) *testEnv {
	env := newTestEnv(t, Echo, nil)
	streamID := ""
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathMessages, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e, _ := envelope.Decode(b)
		if e.Intent == envelope.IntentAsk {
			bare, _ := envelope.ParseID(e.ID)
			streamID = "str-" + bare
			w.Header().Set("Location", pathStream+streamID)
		}
		w.WriteHeader(http.StatusAccepted)
	})
	frame := func(i int, d string) []byte { return []byte(fmt.Sprintf(d, streamID)) }
	mux.HandleFunc("GET "+pathStream+"{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, d := range deltas {
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", i, frame(i, d))
		}
	})
	mux.HandleFunc("GET "+pathWebSocket, func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{subprotocol}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		_, b, _ := c.Read(r.Context())
		e, _ := envelope.Decode(b[4:])
		bare, _ := envelope.ParseID(e.ID)
		streamID = "str-" + bare
		for i, d := range deltas {
			c.Write(r.Context(), websocket.MessageBinary, appendFrame(nil, frame(i, d)))
		}
		// Keep the connection open until the client closes it: closing it
		// here could reach the client before its verdict on the frames.
		for {
			if _, _, err := c.Read(r.Context()); err != nil {
				return
			}
		}
	})
	env.hs.Config.Handler = mux
	return env
}

// TestUAMP_5_ConsumerChecks: a gap is 4.09 and so is a frame after the
// final delta; a duplicate is dropped.
func TestUAMP_5_ConsumerChecks(t *testing.T) {
	const d = `{"delta_seq":%d,"stream_id":"%%s","ts":"2025-07-10T10:00:00Z","type":"%s"}`
	cases := []struct {
		name   string
		deltas []string
		want   envelope.Code
		n      int // deltas yielded before the error
	}{
		{"gap", []string{fmt.Sprintf(d, 0, "chunk"), fmt.Sprintf(d, 2, "chunk")}, envelope.CodeMissingDeltaSeq, 1},
		{"missing first", []string{fmt.Sprintf(d, 1, "chunk")}, envelope.CodeMissingDeltaSeq, 0},
		{"after done", []string{fmt.Sprintf(d, 0, "done"), fmt.Sprintf(d, 1, "chunk")}, "", 1},
		{"duplicate", []string{fmt.Sprintf(d, 0, "chunk"), fmt.Sprintf(d, 0, "chunk"), fmt.Sprintf(d, 1, "done")}, "", 2},
		{"malformed", []string{`{"delta_seq":0}`}, envelope.CodeBadRequest, 0},
	}
	for _, bc := range bindings() {
		for _, tc := range cases {
			t.Run(bc.name+"/"+tc.name, func(t *testing.T) {
				env := fakeStream(t, tc.deltas...)
				reply, err := env.client(t, bc.b, &ClientOptions{MaxReconnects: 1, ReconnectDelay: time.Millisecond}).Ask(context.Background(), ask("x"))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				var got error
				for _, err := range reply.Deltas() {
					if err != nil {
						got = err
						break
					}
					n++
				}
				if n != tc.n || (tc.want == "") != (got == nil) || got != nil && envelope.AsError(got).Code != tc.want {
					t.Fatalf("%d deltas, then %v; want %d then %q", n, got, tc.n, tc.want)
				}
			})
		}
	}
}

// An envelope may be addressed to an identity of Options.Hosts instead of the
// server's ID (UAMP 1.0 §9, the hub's child agents); the handler sees to.
func TestUAMP_9_HostedIdentities(t *testing.T) {
	const hosted = serverDID + ":agents:support"
	got := make(chan []string, 1)
	h := HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *Stream) error {
		got <- req.To
		return nil
	})
	ck, _ := testKeys(t)
	keys, _ := envelope.NewKeySet(ck.Public())
	env := newTestEnv(t, h, &Options{Keys: keys, Hosts: func(id string) bool { return id == hosted }})
	withCert := env.rawClient(&env.clientCert.TLS)
	e := ask("x")
	e.To = []string{hosted}
	if status, _, werr := env.post(t, withCert, mediaType, signed(t, e, ck)); status != 202 {
		t.Fatalf("ask to a hosted identity: HTTP %d %+v, want 202", status, werr)
	}
	if to := <-got; len(to) != 1 || to[0] != hosted {
		t.Errorf("the handler saw to = %v", to)
	}
	e = ask("x")
	e.To = []string{serverDID + ":agents:other"}
	if status, _, werr := env.post(t, withCert, mediaType, signed(t, e, ck)); status != 403 || werr == nil || werr.Code != envelope.CodeUnauthorized {
		t.Fatalf("ask to an identity not hosted: HTTP %d %+v, want 403", status, werr)
	}
}
