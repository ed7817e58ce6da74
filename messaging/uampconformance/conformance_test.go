package uampconformance_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/discovery"
	"github.com/agentry-dev/agentry/messaging/uampconformance"
)

// server is a UAMP server put together as agentry serve does it: the
// echo agent at did:web:127.0.0.1%3A<port>, client certificates made with
// trusted keys, signed discovery.
type server struct {
	url  string
	cert *messaging.DevCert
}

// newServer serves the echo agent trusting keys; wrap, when set, wraps
// the whole handler (a broken server).
func newServer(t *testing.T, keys *envelope.KeySet, wrap func(http.Handler) http.Handler) *server {
	t.Helper()
	cert, err := messaging.GenerateDevCert(nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(nil)
	did := "did:web:" + strings.ReplaceAll(hs.Listener.Addr().String(), ":", "%3A")
	id, err := envelope.GenerateKey(envelope.EdDSA, did+"#key-1")
	if err != nil {
		t.Fatal(err)
	}
	srv := messaging.NewServer(messaging.Echo, &messaging.Options{ID: did, Key: id, Keys: keys, Authenticate: messaging.ClientKeys(keys, nil),
		MaxBodySize: 64 << 10}) // as the manifest says
	disc, err := discovery.Handler(&discovery.ServerOptions{DID: did, Key: id, BaseURL: "https://" + hs.Listener.Addr().String(),
		Manifest: envelope.Manifest{Agent: "uamp/1.0", Description: "echo", Intents: []string{"ask", "cancel"}, BodyTypes: []string{"text/plain"},
			Auth: []string{"mtls"}, Limits: envelope.Limits{MaxBodyKB: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/.well-known/", disc)
	mux.Handle("/", srv)
	var h http.Handler = mux
	if wrap != nil {
		h = wrap(h)
	}
	hs.Config.Handler = h
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the TLS 1.2 and plain HTTP probes
	hs.TLS = messaging.RequestClientCertificates(messaging.TLSConfig(cert.TLS, nil))
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Close()
	})
	return &server{url: hs.URL, cert: cert}
}

func keySet(t *testing.T, keys ...*envelope.PrivateKey) *envelope.KeySet {
	t.Helper()
	s, err := envelope.NewKeySet()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := s.Add(k.Public()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func run(t *testing.T, s *server, key *envelope.PrivateKey) *uampconformance.Report {
	t.Helper()
	rep := uampconformance.Run(context.Background(), &uampconformance.Options{BaseURL: s.url, Key: key, RootCAs: s.cert.Pool()})
	for _, r := range rep.Results {
		t.Log(r)
	}
	return rep
}

func TestUAMP_ConformancePasses(t *testing.T) {
	bare, _ := envelope.GenerateKey(envelope.EdDSA, "")
	didKey, _ := envelope.GenerateKey(envelope.ES256, "did:web:client.example#key-1")
	s := newServer(t, keySet(t, bare, didKey), nil)

	rep := run(t, s, bare)
	if rep.Failed() != 0 || rep.Skipped() != 0 || rep.Passed() != 20 {
		t.Errorf("bare kid: %d passed, %d failed, %d skipped; want 20 passed", rep.Passed(), rep.Failed(), rep.Skipped())
	}
	if !strings.HasPrefix(rep.Agent, "did:web:127.0.0.1%3A") {
		t.Errorf("agent %q", rep.Agent)
	}
	// A kid that is a DID URL cannot sign for another sender: the 403
	// check is skipped, not failed.
	rep = run(t, s, didKey)
	if r, _ := rep.Find("auth/403-from-not-principal"); rep.Failed() != 0 || rep.Passed() != 19 || !r.Skipped {
		t.Errorf("DID kid: %d passed, %d failed, %d skipped", rep.Passed(), rep.Failed(), rep.Skipped())
	}
}

func TestUAMP_ConformanceFailures(t *testing.T) {
	key, _ := envelope.GenerateKey(envelope.EdDSA, "")
	for _, tc := range []struct {
		name   string
		wrap   func(http.Handler) http.Handler
		trust  bool
		failed []string
	}{
		{
			name: "any content type accepted",
			wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost {
						r.Header.Set("Content-Type", "application/uamp+json;v=1")
					}
					h.ServeHTTP(w, r)
				})
			},
			trust:  true,
			failed: []string{"http/415-media-type"},
		},
		{
			name: "unsigned discovery",
			wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == discovery.HubPath {
						w.Write([]byte(`{"did":"did:web:example.invalid","manifests":[],"keys":{"keys":[]}}`))
						return
					}
					h.ServeHTTP(w, r)
				})
			},
			trust:  true,
			failed: []string{"discovery/hub"},
		},
		{
			// UAMP 1.0 §6.3: the server answers an envelope without sig
			// as malformed (400) rather than unauthenticated (401).
			name: "unsigned envelope a bad request",
			wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost && r.URL.Path == "/v1/messages" {
						b, _ := io.ReadAll(r.Body)
						r.Body = io.NopCloser(bytes.NewReader(b))
						if !bytes.Contains(b, []byte(`"sig"`)) {
							w = unauthorizedAsBadRequest{w}
						}
					}
					h.ServeHTTP(w, r)
				})
			},
			trust:  true,
			failed: []string{"auth/401-no-sig"},
		},
		{
			name:   "key not trusted",
			trust:  false,
			failed: []string{"http/415-media-type", "auth/replay", "echo/sse", "echo/websocket", "stream/window", "stream/cancel"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := keySet(t)
			if tc.trust {
				keys = keySet(t, key)
			}
			rep := run(t, newServer(t, keys, tc.wrap), key)
			for _, name := range tc.failed {
				if r, ok := rep.Find(name); !ok || r.Passed || r.Skipped {
					t.Errorf("%s: %v", name, r)
				}
			}
			if rep.Failed() == 0 {
				t.Error("no check failed")
			}
		})
	}
}

// unauthorizedAsBadRequest answers 400 where the server answers 401.
type unauthorizedAsBadRequest struct{ http.ResponseWriter }

func (w unauthorizedAsBadRequest) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		code = http.StatusBadRequest
	}
	w.ResponseWriter.WriteHeader(code)
}

func TestUAMP_ConformanceOptions(t *testing.T) {
	key, _ := envelope.GenerateKey(envelope.EdDSA, "")
	for name, o := range map[string]uampconformance.Options{
		"plain http": {BaseURL: "http://127.0.0.1:1", Key: key},
		"no key":     {BaseURL: "https://127.0.0.1:1"},
	} {
		rep := uampconformance.Run(context.Background(), &o)
		if rep.Failed() != 1 || rep.Results[0].Name != "setup" {
			t.Errorf("%s: %v", name, rep.Results)
		}
	}
}
