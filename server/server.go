package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/internal/domainmetrics"
	"github.com/agentry-dev/agentry/internal/mcpserve"
	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/web"
	"github.com/agentry-dev/agentry/workflow"
	"go.opentelemetry.io/otel/metric"
)

// Server is agentry's server: the protocols of a Config on one plain
// HTTP listener and, with UAMP, one TLS 1.3 listener. It is safe for
// concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	core   *core
	st     *store.Store
	own    bool // st was opened by New: Shutdown closes it
	engine *workflow.Engine
	gov    *govern.Governor
	runs   *runs.Service
	uamp   *uampService // nil without Config.UAMP
	// console, with a Token, issues and checks the console's sessions.
	console *consoleAuth

	mcpAgents atomic.Pointer[[]mcpserve.Agent] // what /mcp/agents lists

	bg     context.Context // background work: the session sweep, audit exports
	stopBG context.CancelFunc
	bgWG   sync.WaitGroup

	closers []func() // run by Shutdown, last first

	setMu    sync.Mutex // serialises SetAgents
	agentsMu sync.Mutex
	retire   []func() // closes the resources of the agents of New and of every SetAgents

	mu       sync.Mutex
	serving  bool
	stop     chan struct{} // closed by Shutdown: Serve stops
	served   chan struct{} // closed when Serve returned
	shutdown sync.Once
	shutErr  error
}

// New assembles a server from cfg: it opens the store (in memory when
// cfg.Store is nil), registers the workflows, builds the governor on the
// store's journal and recovers what a crash left open (a run in doubt is
// rolled back and closed; a run whose approved calls had not started
// goes on), builds the agents under it, resumes runs whose approvals were
// decided while no server ran, and prepares UAMP. It listens on nothing:
// Serve does, or mount Handler (and TLSHandler) yourself. ctx bounds
// New's own work; the server lives until Shutdown.
func New(ctx context.Context, cfg *Config) (_ *Server, err error) {
	if cfg == nil {
		cfg = &Config{}
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = defaultMaxInFlight
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = defaultSessionTTL
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = workflow.DefaultMaxBody
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.TLSAddr == "" {
		c.TLSAddr = defaultTLSAddr
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{cfg: c, log: c.Logger, st: c.Store, bg: bg, stopBG: stopBG, stop: make(chan struct{}), served: make(chan struct{})}
	defer func() {
		if err != nil {
			s.release(context.WithoutCancel(ctx))
		}
	}()
	if s.st == nil {
		if s.st, err = store.Open(ctx, "memory:"); err != nil {
			return nil, err
		}
		s.own = true
	}
	s.core = newCore(coreOptions{Logger: c.Logger, MaxInFlight: c.MaxInFlight, MetricsBearerToken: c.Token,
		ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		IdleTimeout: c.IdleTimeout, ShutdownTimeout: c.ShutdownTimeout,
		TracerProvider: c.TracerProvider, MeterProvider: c.MeterProvider})
	if c.Token != "" {
		s.console = newConsoleAuth(c.Token)
	}
	s.core.front = s.front
	if err := s.mountWorkflows(); err != nil {
		return nil, err
	}
	if len(c.Workflows) > 0 {
		if err := s.mountUIAP(); err != nil {
			return nil, err
		}
		s.mountMCPWorkflows()
	}
	if c.WebDemo {
		s.mountWeb()
	}
	if c.Console {
		s.mountConsole()
	}
	// The audit exports start first so that they stop last: the records
	// of runs that Shutdown stops go out too.
	for _, x := range c.Audit {
		if err := s.startAudit(x); err != nil {
			return nil, err
		}
	}
	if err := s.startGovernance(ctx); err != nil {
		return nil, err
	}
	if c.UAMP != nil {
		// Replicas on one database share UAMP's streams: a consumer
		// resumes on any of them. The SQL store's replay store keeps the
		// streams too (internal/sqlstore); alone, a server keeps them in
		// memory.
		var streams streamlog.Store
		if s.st.Shared() {
			streams, _ = s.st.Replay().(streamlog.Store)
		}
		if s.uamp, err = newUAMPService(c.UAMP, s.st.Replay(), streams, s.core.handler(), c.Agents, s.runs, c.Logger, c.MeterProvider, c.TracerProvider); err != nil {
			return nil, err
		}
		s.closers = append(s.closers, s.uamp.close)
	}
	return s, nil
}

func (s *Server) mountWorkflows() error {
	sessions := s.st.Sessions()
	eo := &workflow.EngineOptions{SessionTTL: s.cfg.SessionTTL, Logger: s.log, MeterProvider: s.cfg.MeterProvider}
	if !s.st.Shared() {
		// One server process uses the store: cache sessions between
		// actions instead of reading (decoding) them back before every
		// action.
		eo.CacheSessions = 10_000
	}
	s.engine = workflow.NewEngine(sessions, eo)
	seen := map[string]bool{}
	for _, w := range s.cfg.Workflows {
		if w == nil {
			return errors.New("server: a nil workflow")
		}
		if seen[w.Name] {
			return fmt.Errorf("server: two workflows named %q", w.Name)
		}
		seen[w.Name] = true
		if err := s.engine.Register(w); err != nil {
			return fmt.Errorf("workflow %q: %w", w.Name, err)
		}
	}
	uaip := workflow.NewHandler(s.engine, &workflow.HandlerOptions{MaxBodyBytes: s.cfg.MaxBodyBytes, BearerToken: s.cfg.Token, CORSOrigins: s.cfg.CORSOrigins, Logger: s.log})
	for _, p := range []string{"/initialize", "/execute", "/api/workflows", "/api/workflows/", "/api/sessions/", "/"} {
		s.core.handle(p, uaip)
	}
	s.core.addHealthCheck("sessions", func(ctx context.Context) error {
		_, err := sessions.Get(ctx, "healthcheck-probe")
		if errors.Is(err, workflow.ErrSessionNotFound) {
			return nil
		}
		return err
	})
	s.bgWG.Go(func() { sweep(s.bg, s.engine, s.log, time.Minute) })
	return nil
}

func (s *Server) mountWeb() {
	s.core.handle("/web/", web.Handler())
	if s.cfg.Token == "" {
		s.core.handle("/web/demo/ws", web.DemoAgentHandler(&web.DemoOptions{OriginPatterns: s.cfg.CORSOrigins, Logger: s.log}))
		return
	}
	// A browser cannot send the token on a WebSocket, and the demo agent
	// should not run for anyone: with a token it is off.
	s.core.handle("/web/demo/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "the web demo is off: this server requires a token (agentry serve --token)", http.StatusNotFound)
	}))
}

// decisionWatcher is what a journal shared by replicas may offer
// (sqlstore's on PostgreSQL): every replica hears of each approval
// decision journaled, by any of them, once it commits.
type decisionWatcher interface {
	WatchDecisions(wake func(requestID, approvalID, node string))
}

// decisionGrace is how long a replica leaves the replica that decided an
// approval to resume its run before trying itself.
const decisionGrace = time.Second

// startGovernance builds the governor on the store's journal, recovers
// what a crash left open, builds the agents and starts the run service,
// resuming runs whose approvals were decided while no server ran.
func (s *Server) startGovernance(ctx context.Context) error {
	var gopts govern.Options
	if s.cfg.Governance != nil {
		gopts = *s.cfg.Governance
	}
	if gopts.Journal == nil {
		gopts.Journal = s.st.Journal()
	}
	if gopts.Logger == nil {
		gopts.Logger = s.log
	}
	if gopts.MeterProvider == nil {
		gopts.MeterProvider = s.cfg.MeterProvider
	}
	if gopts.TracerProvider == nil {
		gopts.TracerProvider = s.cfg.TracerProvider
	}
	userDecision := gopts.OnDecision
	var svc *runs.Service
	gopts.OnDecision = func(req govern.ApprovalRequest) {
		if svc != nil {
			svc.OnDecision(req)
		}
		if userDecision != nil {
			userDecision(req)
		}
	}
	g, err := govern.New(ctx, &gopts)
	if err != nil {
		return fmt.Errorf("governance: %w", err)
	}
	s.gov = g
	s.countApprovals()
	var reap time.Duration
	if l, ok := gopts.Journal.(leases); ok && gopts.Lease > 0 {
		if err := s.claimNode(ctx, l, gopts.Node, gopts.Lease); err != nil {
			return fmt.Errorf("governance: %w", err)
		}
		reap = gopts.Lease / 3
	}
	rep, err := g.Recover(ctx)
	if err != nil {
		return fmt.Errorf("governance: recovering the journal: %w", err)
	}
	if len(rep.Closed) > 0 || rep.RollbackFailures > 0 {
		s.log.Warn("governed runs left open by a crash were closed", "runs", len(rep.Closed), "rolled_back", rep.RolledBack, "rollback_failures", rep.RollbackFailures)
	}
	if len(rep.Resumable) > 0 {
		s.log.Info("governed runs whose resume a crash interrupted continue", "runs", len(rep.Resumable))
	}
	cat, err := s.buildAgents(s.cfg.Agents)
	if err != nil {
		return err
	}
	// The agents' resources (MCP servers…) are released after the runs
	// stop: Shutdown runs closers last first.
	s.closers = append(s.closers, s.closeAgents)
	svc, err = runs.New(s.bg, &runs.Options{Governor: g, Agents: cat.Agents, Descriptions: cat.Descriptions, Timeouts: cat.Timeouts, Results: s.st.Checkpoints(), Logger: s.log, Reap: reap})
	if err != nil {
		return err
	}
	s.runs = svc
	s.closers = append(s.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout())
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			s.log.Warn("runs still executing at shutdown were cancelled: they failed safe", "error", err)
		}
	})
	if err := svc.ResumeDecided(ctx); err != nil {
		s.log.Error("resuming decided runs", "error", err)
	}
	if w, ok := gopts.Journal.(decisionWatcher); ok && reap > 0 {
		w.WatchDecisions(func(requestID, approvalID, node string) {
			if node == gopts.Node {
				return // decided here: resumed here (OnDecision)
			}
			// The deciding replica resumes the run at once; if it died
			// first (or runs no such agent), whichever replica claims the
			// run after the grace resumes it. The reaper's scan is the
			// fallback for a notification lost.
			time.AfterFunc(decisionGrace, func() {
				if s.bg.Err() == nil { // not shutting down
					svc.OnDecision(govern.ApprovalRequest{ID: approvalID, RequestID: requestID})
				}
			})
		})
	}
	s.log.Info("governance", "agents", len(cat.Agents), "paused_runs", len(rep.Paused))
	approvals := approvalapi.NewHandler(g, &approvalapi.Options{BearerToken: s.cfg.Token, Logger: s.log})
	s.core.handle("/v1/approvals", approvals)
	s.core.handle("/v1/approvals/", approvals)
	runsHTTP := bearer(s.cfg.Token, svc.Handler())
	s.core.handle("/v1/runs", runsHTTP)
	s.core.handle("/v1/runs/", runsHTTP)
	s.core.handle("/v1/agents", runsHTTP)
	s.core.handle("/v1/agents/", runsHTTP)
	s.setMCPAgents(s.cfg.Agents)
	s.mountMCPAgents()
	return nil
}

// startAudit exports the journal to x.Sink until Shutdown, which exports
// what is left first. The position is kept in the store, so a restart
// neither repeats nor skips records.
func (s *Server) startAudit(x AuditExport) error {
	if x.Name == "" || x.Sink == nil {
		return errors.New("server: an audit export needs a Name and a Sink")
	}
	ctx, cancel := context.WithCancel(s.bg)
	done := make(chan struct{})
	h := &auditHold{} // the exporter to finish with at Shutdown
	if l, lease, node, ok := s.auditLease(); ok {
		go func() {
			defer close(done)
			s.leasedAudit(ctx, x, l, lease, node, h)
		}()
	} else {
		e := audit.NewExporter(s.st.Journal(), x.Sink, &audit.Options{Logger: s.log, Cursor: s.st.AuditCursor(x.Name)})
		h.set(e, nil)
		go func() {
			defer close(done)
			e.Run(ctx)
		}()
	}
	s.closers = append(s.closers, func() {
		cancel()
		<-done
		final, cancelFinal := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelFinal()
		if e, release := h.get(); e != nil {
			if _, err := e.ExportPending(final); err != nil {
				s.log.Warn("audit export: records left for the next start", "export", x.Name, "error", err)
			}
			if release != nil {
				release(final)
			}
		}
		if c, ok := x.Sink.(io.Closer); ok {
			c.Close()
		}
	})
	return nil
}

// Handler returns the plain HTTP handler: UAIP, UIAP, governed runs,
// approvals, /healthz and /metrics (and /web/ with WebDemo). UAMP is
// never served on it.
func (s *Server) Handler() http.Handler { return s.core.handler() }

// TLSHandler returns the handler of the TLS listener: UAMP (HTTP/2 +
// SSE, WebSocket and gRPC), the discovery documents, and everything
// Handler serves; nil without Config.UAMP. Serve it over TLSConfig
// (messaging.NewHTTPServer does).
func (s *Server) TLSHandler() http.Handler {
	if s.uamp == nil {
		return nil
	}
	return s.uamp.root
}

// Handle mounts h at a ServeMux pattern of the plain handler (and so of
// the TLS one), instrumented in /metrics under that pattern. Mount
// before serving.
func (s *Server) Handle(pattern string, h http.Handler) { s.core.handle(pattern, h) }

// Runs returns the service running the agents under governance.
func (s *Server) Runs() *runs.Service { return s.runs }

// Governor returns the governor of the agents' runs.
func (s *Server) Governor() *govern.Governor { return s.gov }

// Serve listens (Config.Listener or Addr; with UAMP, Config.TLSListener
// or TLSAddr) and serves until ctx ends, Shutdown is called, or a
// listener fails. It then stops gracefully: it accepts no more
// connections and lets in-flight requests finish (up to
// ShutdownTimeout), ending long-lived exchanges (UIAP sessions, UAMP
// streams) first. It returns nil after a graceful stop. Serve may be
// called once; call Shutdown after it to release the rest.
func (s *Server) Serve(ctx context.Context) (err error) {
	s.mu.Lock()
	if s.serving {
		s.mu.Unlock()
		return errors.New("server: Serve was already called")
	}
	s.serving = true
	s.mu.Unlock()
	defer close(s.served)
	ln := s.cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", s.cfg.Addr); err != nil {
			return err
		}
	}
	defer ln.Close()
	var tlsLn net.Listener
	if s.uamp != nil {
		if tlsLn = s.cfg.TLSListener; tlsLn == nil {
			if tlsLn, err = net.Listen("tcp", s.cfg.TLSAddr); err != nil {
				return err
			}
		}
		defer tlsLn.Close()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-s.stop:
			stop()
		case <-ctx.Done():
		}
	}()
	if tlsLn == nil {
		return s.core.serve(ctx, ln)
	}
	tlsErr := make(chan error, 1)
	go func() {
		err := s.uamp.serve(ctx, tlsLn, s.shutdownTimeout())
		if err != nil {
			s.log.Error("TLS listener failed: shutting down", "error", err)
			stop()
		}
		tlsErr <- err
	}()
	err = s.core.serve(ctx, ln)
	stop()
	if terr := <-tlsErr; err == nil {
		err = terr
	}
	return err
}

// Shutdown stops the server: Serve stops gracefully if it runs (Shutdown
// waits for it, or for ctx), then the runs executing stop — each is given
// up to ShutdownTimeout to deliver, fail or pause, then cancelled (it
// fails safe) — UIAP sessions end, audit exports export what is left,
// and a store New opened is closed. It may be called more than once; the
// later calls return the first's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdown.Do(func() {
		close(s.stop)
		s.mu.Lock()
		serving := s.serving
		s.mu.Unlock()
		if serving {
			select {
			case <-s.served:
			case <-ctx.Done():
				s.shutErr = ctx.Err()
			}
		}
		if err := s.release(ctx); s.shutErr == nil {
			s.shutErr = err
		}
	})
	return s.shutErr
}

// buildAgents builds agents under the governor, as runs.Options wants
// them, and keeps their Close for Shutdown.
func (s *Server) buildAgents(agents []Agent) (*runs.Options, error) {
	names := map[string]bool{}
	for _, a := range agents {
		if a.Name == "" {
			return nil, errors.New("server: an agent needs a Name")
		}
		if names[a.Name] {
			return nil, fmt.Errorf("server: two agents named %q", a.Name)
		}
		names[a.Name] = true
	}
	out := &runs.Options{Agents: map[string]*agent.Agent{}, Descriptions: map[string]string{}, Timeouts: map[string]time.Duration{}}
	var closers []func()
	for _, a := range agents {
		o := a.Options
		if a.Prepare != nil {
			if err := a.Prepare(s.gov, &o); err != nil {
				return nil, fmt.Errorf("agent %q: %w", a.Name, err)
			}
		}
		gov := a.Govern
		gov.Name = a.Name
		o.Middleware = append(slices.Clip(o.Middleware), s.gov.Middleware(&gov))
		if o.Logger == nil {
			o.Logger = s.log
		}
		if o.Name == "" {
			o.Name = a.Name
		}
		if o.TracerProvider == nil {
			o.TracerProvider = s.cfg.TracerProvider
		}
		if o.MeterProvider == nil {
			o.MeterProvider = s.cfg.MeterProvider
		}
		built, err := agent.New(&o)
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.Name, err)
		}
		out.Agents[a.Name] = built
		out.Descriptions[a.Name], out.Timeouts[a.Name] = a.Description, a.Timeout
		if a.Close != nil {
			name, close := a.Name, a.Close
			closers = append(closers, func() {
				if err := close(); err != nil {
					s.log.Warn("closing an agent", "agent", name, "error", err)
				}
			})
		}
	}
	s.agentsMu.Lock()
	s.retire = append(s.retire, closers...)
	s.agentsMu.Unlock()
	return out, nil
}

// closeAgents releases the resources of every agent built, the current
// ones and those SetAgents replaced.
func (s *Server) closeAgents() {
	s.agentsMu.Lock()
	closers := s.retire
	s.retire = nil
	s.agentsMu.Unlock()
	for _, f := range closers {
		f()
	}
}

// SetAgents replaces the agents the server runs (Config.Agents): a
// reload. New runs — over HTTP and UAMP — and paused runs resumed from
// now on run the agent their name now names; runs executing go on with
// the agent they started with, and the replaced agents' resources (their
// Close) are released at Shutdown, after those runs. An agent of the old
// set that is missing from agents is no longer served (its paused runs
// stay paused until an agent of that name is served again). On an error
// nothing changes. Calls are serialised.
func (s *Server) SetAgents(agents []Agent) error {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	if s.runs == nil {
		return errors.New("server: no run service")
	}
	cat, err := s.buildAgents(agents)
	if err != nil {
		return err
	}
	if s.uamp != nil {
		if err := s.uamp.setAgents(agents); err != nil {
			return err
		}
	}
	if err := s.runs.SetAgents(cat); err != nil {
		return err // not after buildAgents: its agents are all named and built
	}
	s.setMCPAgents(agents)
	s.log.Info("agents replaced", "agents", len(agents))
	return nil
}

// release stops what New started, last first.
func (s *Server) release(context.Context) error {
	for _, f := range slices.Backward(s.closers) {
		f()
	}
	s.closers = nil
	s.stopBG()
	s.bgWG.Wait()
	if s.own && s.st != nil {
		return s.st.Close()
	}
	return nil
}

func (s *Server) shutdownTimeout() time.Duration {
	if s.cfg.ShutdownTimeout > 0 {
		return s.cfg.ShutdownTimeout
	}
	return 30 * time.Second
}

// sweep deletes expired sessions periodically until ctx ends.
func sweep(ctx context.Context, engine *workflow.Engine, logger *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := engine.SweepExpired(ctx)
			if err != nil && ctx.Err() == nil {
				logger.Warn("sweeping expired sessions failed", "error", err)
			} else if n > 0 {
				logger.Info("expired sessions removed", "count", n)
			}
		}
	}
}

// countApprovals reports the approvals pending, read from the governor
// when scraped: agentry_approvals_pending on /metrics and the gauge
// agentry.approvals.pending of Config.MeterProvider.
func (s *Server) countApprovals() {
	pending := func(ctx context.Context) (int, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		list, err := s.gov.Approvals(ctx, true)
		return len(list), err
	}
	s.core.registry.NewGaugeFunc("agentry_approvals_pending", "Approval requests waiting for a decision.", func() float64 {
		n, err := pending(context.Background())
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	})
	meter := telemetry.Meter(s.cfg.MeterProvider)
	gauge, err := meter.Int64ObservableGauge(domainmetrics.ApprovalsPending,
		metric.WithDescription("Approval requests waiting for a decision."), metric.WithUnit("{approval}"))
	if err != nil {
		return // a broken SDK: no gauge, as for the other instruments
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		n, err := pending(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(gauge, int64(n))
		return nil
	}, gauge)
	if err == nil {
		s.closers = append(s.closers, func() { reg.Unregister() })
	}
}
