package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/discovery"
	"github.com/agentry-dev/agentry/messaging/grpcmsg"
	"github.com/agentry-dev/agentry/runs"
	"google.golang.org/grpc"
)

// uampService is what the TLS listener serves: UAMP over HTTP/2 + SSE,
// WebSocket and gRPC, signed discovery under /.well-known/, and the
// plain handler.
type uampService struct {
	root http.Handler
	conf *tls.Config
	uamp *messaging.Server
	grpc *grpc.Server // uamp.v1.Agent, through the listener's HTTP/2
	log  *slog.Logger
}

func newUAMPService(c *UAMP, replayStore envelope.ReplayStore, plain http.Handler, agents []Agent, svc *runs.Service, logger *slog.Logger) (*uampService, error) {
	switch {
	case c.DID == "":
		return nil, errors.New("server: UAMP needs a DID")
	case c.Key == nil:
		return nil, errors.New("server: UAMP needs an identity Key")
	case len(c.Certificate.Certificate) == 0:
		return nil, errors.New("server: UAMP needs a TLS Certificate")
	}
	h := c.Handler
	if h == nil {
		h = messaging.Echo
	}
	trusted := c.TrustedKeys
	if trusted == nil {
		trusted, _ = envelope.NewKeySet()
	}
	authenticate := messaging.ClientKeys(trusted, c.ClientCAs)
	if c.OAuth != nil {
		bo := *c.OAuth
		if bo.Audience == "" {
			bo.Audience = c.DID
		}
		bearerAuth, err := messaging.BearerJWT(&bo)
		if err != nil {
			return nil, err
		}
		certs := authenticate
		// A request with an Authorization header is authenticated by its
		// bearer token, any other by its client certificate.
		authenticate = func(r *http.Request) (string, error) {
			if r.Header.Get("Authorization") != "" {
				return bearerAuth(r)
			}
			return certs(r)
		}
	}
	manifest := c.Manifest
	if manifest.Agent == "" {
		manifest = envelope.Manifest{
			Agent:     "uamp/1.0",
			Intents:   []string{string(envelope.IntentAsk), string(envelope.IntentSubscribe), string(envelope.IntentProgress), string(envelope.IntentCancel)},
			BodyTypes: []string{"text/plain", "text/markdown"},
			Auth:      []string{"mtls"},
			Limits:    envelope.Limits{MaxBodyKB: envelope.MaxEnvelopeSize >> 10},
		}
	}
	// Each agent at its own DID under the server's (agentDID), its asks
	// governed runs, its signed manifest listed in the hub.
	base := c.BaseURL
	if base == "" {
		host, _, _ := strings.Cut(strings.TrimPrefix(c.DID, "did:web:"), ":")
		if u, err := url.PathUnescape(host); err == nil {
			host = u
		}
		base = "https://" + host
	}
	base = strings.TrimSuffix(base, "/")
	rt := &router{own: h, agents: map[string]messaging.Handler{}}
	var hosted []string
	var children []discovery.HubEntry
	manifests := map[string][]byte{}
	if svc != nil {
		for _, a := range agents {
			did := agentDID(c.DID, a.Name)
			m := manifest
			m.Description = a.Description
			signed, err := envelope.SignManifest(&m, c.Key)
			if err != nil {
				return nil, fmt.Errorf("server: signing the manifest of agent %s: %w", a.Name, err)
			}
			rt.agents[did] = &runHandler{svc: svc, name: a.Name}
			hosted = append(hosted, did)
			children = append(children, discovery.HubEntry{DID: did, URL: base + agentManifestPath(a.Name)})
			manifests[agentManifestPath(a.Name)] = []byte(signed)
		}
	}
	replay := envelope.NewReplayWindow(&envelope.ReplayOptions{Store: replayStore})
	uamp := messaging.NewServer(rt, &messaging.Options{
		ID: c.DID, Hosted: hosted, Key: c.Key, Keys: trusted, Replay: replay,
		Authenticate: authenticate, Logger: logger,
	})
	disc, err := discovery.Handler(&discovery.ServerOptions{DID: c.DID, Key: c.Key, BaseURL: c.BaseURL, Manifest: manifest, Children: children})
	if err != nil {
		uamp.Close()
		return nil, err
	}
	conf := messaging.RequestClientCertificates(messaging.TLSConfig(c.Certificate, nil))
	mux := http.NewServeMux()
	// The paths of the UAMP bindings (UAMP 1.0 §7).
	mux.Handle("/v1/messages", uamp)
	mux.Handle("/v1/stream/", uamp)
	mux.Handle("/uamp/1/ws", uamp)
	mux.Handle("/.well-known/", disc)
	for path, body := range manifests {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", envelope.ManifestMediaType)
			w.Header().Set("Cache-Control", "public, max-age=300")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Write(body)
		})
	}
	mux.Handle("/", plain)
	// gRPC (uamp.v1.Agent) shares the listener: HTTP/2 calls of type
	// application/grpc go to grpc.Server.ServeHTTP (the handshake is the
	// listener's, so its credentials are not used).
	g := grpcmsg.NewServer(uamp, conf)
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			g.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return &uampService{root: root, conf: conf, uamp: uamp, grpc: g, log: logger}, nil
}

// TLSConfig returns the TLS 1.3 configuration TLSHandler is served with
// (it asks for client certificates, which UAMP authenticates per
// request); nil without Config.UAMP.
func (s *Server) TLSConfig() *tls.Config {
	if s.uamp == nil {
		return nil
	}
	return s.uamp.conf.Clone()
}

// close ends the UAMP streams and the gRPC server.
func (u *uampService) close() {
	u.uamp.Close()
	u.grpc.Stop()
}

// serve serves ln until ctx ends, then cancels the UAMP streams and shuts
// the listener down, letting other requests finish.
func (u *uampService) serve(ctx context.Context, ln net.Listener, timeout time.Duration) error {
	hs := messaging.NewHTTPServer(u.root, u.conf)
	// Handshake failures (a client refusing a development certificate, a
	// TLS 1.2 probe) are the client's business.
	hs.ErrorLog = slog.NewLogLogger(u.log.Handler(), slog.LevelDebug)
	errc := make(chan error, 1)
	go func() { errc <- hs.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		u.close()
		return fmt.Errorf("TLS listener: %w", err)
	case <-ctx.Done():
	}
	closed := make(chan struct{})
	go func() { // ends the streams Shutdown would wait for
		u.close()
		close(closed)
	}()
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		hs.Close()
	}
	<-closed
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
