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
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/discovery"
	"github.com/agentry-dev/agentry/messaging/grpcmsg"
	"github.com/agentry-dev/agentry/runs"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
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

	// The agents, each at its DID under did (agentDID).
	own      messaging.Handler // answers asks to did itself
	svc      *runs.Service     // nil: no agents
	did      string
	key      *envelope.PrivateKey
	base     string // the public https URL, without a final /
	manifest envelope.Manifest
	disc     discovery.ServerOptions // without Children
	table    atomic.Pointer[agentTable]
}

func newUAMPService(c *UAMP, replayStore envelope.ReplayStore, streams streamlog.Store, plain http.Handler, agents []Agent, svc *runs.Service, logger *slog.Logger, mp metric.MeterProvider, tp trace.TracerProvider) (*uampService, error) {
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
	u := &uampService{own: h, svc: svc, did: c.DID, key: c.Key, base: strings.TrimSuffix(base, "/"), manifest: manifest,
		disc: discovery.ServerOptions{DID: c.DID, Key: c.Key, BaseURL: c.BaseURL, Manifest: manifest}, log: logger}
	if err := u.setAgents(agents); err != nil {
		return nil, err
	}
	replay := envelope.NewReplayWindow(&envelope.ReplayOptions{Store: replayStore})
	u.uamp = messaging.NewServer(messaging.HandlerFunc(u.serveUAMP), &messaging.Options{
		ID: c.DID, Hosts: u.hosts, Key: c.Key, Keys: trusted, Replay: replay,
		Authenticate: authenticate, Logger: logger, Streams: streams, MeterProvider: mp, TracerProvider: tp,
	})
	conf := messaging.RequestClientCertificates(messaging.TLSConfig(c.Certificate, nil))
	mux := http.NewServeMux()
	// The paths of the UAMP bindings (UAMP 1.0 §7).
	mux.Handle("/v1/messages", u.uamp)
	mux.Handle("/v1/stream/", u.uamp)
	mux.Handle("/uamp/1/ws", u.uamp)
	mux.HandleFunc("/.well-known/", func(w http.ResponseWriter, r *http.Request) { u.table.Load().disc.ServeHTTP(w, r) })
	mux.HandleFunc("GET /agents/{name}/.well-known/agent-manifest.json", u.serveManifest)
	mux.Handle("/", plain)
	// gRPC (uamp.v1.Agent) shares the listener: HTTP/2 calls of type
	// application/grpc go to grpc.Server.ServeHTTP (the handshake is the
	// listener's, so its credentials are not used).
	g := grpcmsg.NewServer(u.uamp, conf, grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp), otelgrpc.WithMeterProvider(mp))))
	u.root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			g.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	u.conf, u.grpc = conf, g
	return u, nil
}

// agentTable is what the TLS listener serves of the agents: their
// handlers by DID, their signed manifests by name, and the discovery
// documents whose hub lists them. SetAgents replaces it whole.
type agentTable struct {
	handlers  map[string]messaging.Handler
	manifests map[string][]byte
	disc      http.Handler
}

// setAgents serves agents (the runs service's, by name) at their DIDs,
// signing their manifests and a hub listing them.
func (u *uampService) setAgents(agents []Agent) error {
	t := &agentTable{handlers: map[string]messaging.Handler{}, manifests: map[string][]byte{}}
	var children []discovery.HubEntry
	if u.svc != nil {
		for _, a := range agents {
			did := agentDID(u.did, a.Name)
			m := u.manifest
			m.Description = a.Description
			signed, err := envelope.SignManifest(&m, u.key)
			if err != nil {
				return fmt.Errorf("server: signing the manifest of agent %s: %w", a.Name, err)
			}
			t.handlers[did] = &runHandler{svc: u.svc, name: a.Name}
			t.manifests[a.Name] = []byte(signed)
			children = append(children, discovery.HubEntry{DID: did, URL: u.base + agentManifestPath(a.Name)})
		}
	}
	do := u.disc
	do.Children = children
	disc, err := discovery.Handler(&do)
	if err != nil {
		return err
	}
	t.disc = disc
	u.table.Store(t)
	return nil
}

// hosts reports whether id is the DID of an agent served now.
func (u *uampService) hosts(id string) bool {
	_, ok := u.table.Load().handlers[id]
	return ok
}

// serveUAMP answers an ask with the handler of the agent it is addressed
// to, and any other with the server's own handler.
func (u *uampService) serveUAMP(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) error {
	t := u.table.Load()
	for _, to := range req.To {
		if h, ok := t.handlers[to]; ok {
			return h.ServeUAMP(ctx, req, s)
		}
	}
	return u.own.ServeUAMP(ctx, req, s)
}

func (u *uampService) serveManifest(w http.ResponseWriter, r *http.Request) {
	body, ok := u.table.Load().manifests[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", envelope.ManifestMediaType)
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(body)
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
