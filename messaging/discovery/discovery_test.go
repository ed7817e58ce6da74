package discovery_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging/discovery"
)

var ctx = context.Background()

func manifest() envelope.Manifest {
	return envelope.Manifest{Agent: "uamp/1.0", Description: "echo", Intents: []string{"ask", "cancel"},
		BodyTypes: []string{"text/plain"}, Auth: []string{"mtls"}, Limits: envelope.Limits{MaxBodyKB: 1024}}
}

// server starts an https server whose did:web is its own address, with
// the discovery handler (wrapped by wrap when set).
func server(t *testing.T, wrap func(http.Handler) http.Handler) (srv *httptest.Server, did string, key *envelope.PrivateKey) {
	t.Helper()
	srv = httptest.NewUnstartedServer(nil)
	// did:web percent-encodes the port's colon.
	did = "did:web:" + strings.ReplaceAll(srv.Listener.Addr().String(), ":", "%3A")
	key, err := envelope.GenerateKey(envelope.EdDSA, did+"#key-1")
	if err != nil {
		t.Fatal(err)
	}
	h, err := discovery.Handler(&discovery.ServerOptions{DID: did, Key: key, Manifest: manifest(), BaseURL: "https://" + srv.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		h = wrap(h)
	}
	srv.Config.Handler = h
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, did, key
}

func wantCode(t *testing.T, err error, code envelope.Code) {
	t.Helper()
	var e *envelope.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want a %s *envelope.Error", err, code)
	}
}

func TestUAMP_8_Discover(t *testing.T) {
	srv, did, key := server(t, nil)
	d, err := discovery.Discover(ctx, srv.URL, &discovery.ClientOptions{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if d.Manifest.Description != "echo" || d.Hub.DID != did || len(d.Hub.Manifests) != 1 || d.Hub.Manifests[0].DID != did {
		t.Errorf("discovery %+v, manifest %+v", d.Hub, d.Manifest)
	}
	if k, ok := d.Keys.Key(key.KID()); !ok || k.Algorithm() != envelope.EdDSA {
		t.Errorf("the hub's keys lack the identity key %s", key.KID())
	}

	// Served with the spec's media type, as a compact JWS.
	resp, err := srv.Client().Get(srv.URL + discovery.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != envelope.ManifestMediaType || strings.Count(string(b), ".") != 2 {
		t.Errorf("manifest served as %q: %s", ct, b)
	}

	// With explicit trust anchors instead of did:web.
	trust, _ := envelope.NewKeySet(key.Public())
	if _, err := discovery.Discover(ctx, srv.URL, &discovery.ClientOptions{HTTPClient: srv.Client(), Trust: trust}); err != nil {
		t.Errorf("Discover with the identity key as trust anchor: %v", err)
	}
	other, _ := envelope.GenerateKey(envelope.EdDSA, key.KID())
	untrusted, _ := envelope.NewKeySet(other.Public())
	_, err = discovery.Discover(ctx, srv.URL, &discovery.ClientOptions{HTTPClient: srv.Client(), Trust: untrusted})
	wantCode(t, err, envelope.CodeUnauthenticated)
}

// TestUAMP_8_TamperedHub: a hub changed in transit — an extra child, or
// a key swapped in — fails verification.
func TestUAMP_8_TamperedHub(t *testing.T) {
	for name, edit := range map[string]func([]byte) []byte{
		"child added": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"manifests":[`), []byte(`"manifests":[{"did":"did:web:evil.example","url":"https://evil.example/m"},`), 1)
		},
		"description": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"did":"did:web:`), []byte(`"did":"did:web:x`), 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _, _ := server(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != discovery.HubPath {
						h.ServeHTTP(w, r)
						return
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					w.Write(edit(rec.Body.Bytes()))
				})
			})
			_, err := discovery.Discover(ctx, srv.URL, &discovery.ClientOptions{HTTPClient: srv.Client()})
			if err == nil {
				t.Fatal("a tampered hub was trusted")
			}
			var e *envelope.Error
			if !errors.As(err, &e) || (e.Code != envelope.CodeUnauthenticated && e.Code != envelope.CodeBadRequest) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestUAMP_8_ForeignManifest: a manifest signed by a key the hub does
// not list is refused, though the hub verifies.
func TestUAMP_8_ForeignManifest(t *testing.T) {
	var forged string
	srv, did, _ := server(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == discovery.ManifestPath {
				w.Header().Set("Content-Type", envelope.ManifestMediaType)
				io.WriteString(w, forged)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	mallory, _ := envelope.GenerateKey(envelope.EdDSA, did+"#key-2")
	m := manifest()
	m.Description = "forged"
	var err error
	if forged, err = envelope.SignManifest(&m, mallory); err != nil {
		t.Fatal(err)
	}
	_, err = discovery.Discover(ctx, srv.URL, &discovery.ClientOptions{HTTPClient: srv.Client()})
	wantCode(t, err, envelope.CodeUnauthenticated)
}

func TestUAMP_8_HTTPSOnly(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := discovery.Discover(ctx, srv.URL, &discovery.ClientOptions{})
	wantCode(t, err, envelope.CodeUnauthenticated)
	if !strings.Contains(err.Error(), "https") {
		t.Errorf("err = %v, want it to say https", err)
	}
}

func TestHandlerRefusesBadDID(t *testing.T) {
	key, _ := envelope.GenerateKey(envelope.EdDSA, "k")
	for _, did := range []string{"", "did:key:z6Mk", "did:web:", "did:web:host:a%2Fb", "did:web:ho/st"} {
		if _, err := discovery.Handler(&discovery.ServerOptions{DID: did, Key: key, Manifest: manifest()}); err == nil {
			t.Errorf("Handler accepted DID %q", did)
		}
	}
	if _, err := discovery.Handler(&discovery.ServerOptions{DID: "did:web:a.example", Manifest: manifest()}); err == nil {
		t.Error("Handler accepted no key")
	}
}

// TestUAMP_8_DIDWeb: the did:web resolver finds the identity key under
// its DID URL, its fragment or its bare name, refuses other DIDs' keys
// and reports an unknown key as ErrKeyNotFound.
func TestUAMP_8_DIDWeb(t *testing.T) {
	srv, did, key := server(t, nil)
	r := discovery.DIDWeb(&discovery.ClientOptions{HTTPClient: srv.Client()})
	for _, kid := range []string{key.KID(), "#key-1", "key-1"} {
		k, err := r.ResolveKey(ctx, did, kid)
		if err != nil {
			t.Errorf("ResolveKey(%q): %v", kid, err)
			continue
		}
		if k.KID() != kid || k.Algorithm() != envelope.EdDSA {
			t.Errorf("ResolveKey(%q) = %s %s", kid, k.KID(), k.Algorithm())
		}
	}
	if _, err := r.ResolveKey(ctx, did, "#key-9"); !errors.Is(err, envelope.ErrKeyNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := r.ResolveKey(ctx, "did:web:"+strings.ReplaceAll(srv.Listener.Addr().String(), ":", "%3A")+":other", "key-1"); err == nil {
		t.Error("resolved a key of a DID the server does not publish")
	}
	// An envelope signed with the identity key verifies through did:web.
	e := envelope.New(did, []string{"did:web:b.example"}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "hi"})
	if err := envelope.Sign(e, key); err != nil {
		t.Fatal(err)
	}
	if err := envelope.Verify(ctx, e, r); err != nil {
		t.Errorf("Verify through did:web: %v", err)
	}
}
