package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/domainmetrics"
	"github.com/agentry-dev/agentry/internal/httpx"
	"github.com/agentry-dev/agentry/internal/metrics"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// coreOptions configures a core; the zero value works.
type coreOptions struct {
	// Logger receives operational and access records; nil uses
	// slog.Default(). Access records are at Debug level.
	Logger *slog.Logger
	// MaxInFlight bounds concurrent requests; beyond it requests get 503
	// with Retry-After. 0 means 4096.
	MaxInFlight int
	// ReadHeaderTimeout (0: 10 s), ReadTimeout (0: 60 s), WriteTimeout
	// (0: 120 s) and IdleTimeout (0: 120 s) are the http.Server limits.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests on shutdown
	// (0: 30 s).
	ShutdownTimeout time.Duration
	// MaxHeaderBytes bounds request headers (0: 64 KiB).
	MaxHeaderBytes int
	// MetricsBearerToken, when set, is required on /metrics as
	// "Authorization: Bearer <token>" (a Prometheus scrape sends it with
	// authorization.credentials); /healthz stays open, for probes.
	MetricsBearerToken string
	// TracerProvider and MeterProvider make the request spans and
	// http.server.request.duration; nil: the global providers.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// core is the HTTP server under Server: the mux, the in-flight limit,
// metrics, health and graceful shutdown.
type core struct {
	opts     coreOptions
	logger   *slog.Logger
	mux      *http.ServeMux
	registry *metrics.Registry
	requests *metrics.CounterVec
	latency  *metrics.HistogramVec
	inflight atomic.Int64
	sem      chan struct{}
	tracer   trace.Tracer
	duration metric.Float64Histogram // http.server.request.duration
	ends     telemetry.Memo[endKey, *endAttrs]

	// front, when set, wraps the routes (Server.front).
	front func(http.Handler) http.Handler

	mu         sync.Mutex
	checks     map[string]func(context.Context) error
	onShutdown []func()
}

// newCore returns a core with /healthz and /metrics mounted.
func newCore(opts coreOptions) *core {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 4096
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&opts.ReadHeaderTimeout, 10*time.Second)
	def(&opts.ReadTimeout, 60*time.Second)
	def(&opts.WriteTimeout, 120*time.Second)
	def(&opts.IdleTimeout, 120*time.Second)
	def(&opts.ShutdownTimeout, 30*time.Second)
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = 64 << 10
	}
	s := &core{opts: opts, logger: opts.Logger, mux: http.NewServeMux(), registry: &metrics.Registry{},
		sem: make(chan struct{}, opts.MaxInFlight), checks: map[string]func(context.Context) error{}}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.tracer = telemetry.Tracer(opts.TracerProvider)
	s.duration, _ = telemetry.Meter(opts.MeterProvider).Float64Histogram("http.server.request.duration",
		metric.WithDescription("Duration of HTTP server requests."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
	s.requests = s.registry.NewCounterVec("agentry_http_requests_total", "HTTP requests by route, method and status.", "route", "method", "code")
	s.latency = s.registry.NewHistogramVec("agentry_http_request_duration_seconds", "HTTP request latency by route.", nil, "route")
	s.registry.NewGaugeFunc("agentry_http_requests_in_flight", "Requests being served.", func() float64 { return float64(s.inflight.Load()) })
	s.registry.NewGaugeFunc("go_goroutines", "Goroutines.", func() float64 { return float64(runtime.NumGoroutine()) })
	s.registry.NewGaugeFunc("go_memstats_heap_inuse_bytes", "Heap in use.", func() float64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapInuse)
	})
	s.mux.HandleFunc("GET /healthz", s.health)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.registry.WriteTo(w)
		domainmetrics.Of(opts.MeterProvider).WriteTo(w)
	})
	s.mux.Handle("GET /metrics", httpx.Bearer(opts.MetricsBearerToken, "agentry", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
	}, metrics))
	return s
}

// addHealthCheck adds a check /healthz runs; a failing check makes it 503.
func (s *core) addHealthCheck(name string, check func(context.Context) error) {
	s.mu.Lock()
	s.checks[name] = check
	s.mu.Unlock()
}

// onShutdownFunc registers f to be called, in its own goroutine, when a
// shutdown of Serve begins: the place to end long-lived exchanges
// (WebSockets, event streams, sessions) that would otherwise hold the
// graceful shutdown until its timeout. f must return promptly and
// tolerate being called more than once. Register before Serve.
func (s *core) onShutdownFunc(f func()) {
	s.mu.Lock()
	s.onShutdown = append(s.onShutdown, f)
	s.mu.Unlock()
}

// handle mounts h at a ServeMux pattern, instrumented under that route.
func (s *core) handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.instrument(pattern, h))
}

// handler returns the server's root handler (with the in-flight limit).
func (s *core) handler() http.Handler {
	var routes http.Handler = s.mux
	if s.front != nil {
		routes = s.front(s.mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.sem <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"detail":"server overloaded, retry later"}` + "\n"))
			return
		}
		s.inflight.Add(1)
		defer func() { s.inflight.Add(-1); <-s.sem }()
		routes.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (flushing streams).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var codeText [600]string

func init() {
	for i := range codeText {
		codeText[i] = strconv.Itoa(i)
	}
}

type counterKey struct {
	method string
	code   int
}

func (s *core) instrument(route string, h http.Handler) http.Handler {
	debug := s.logger.Enabled(context.Background(), slog.LevelDebug)
	latency := s.latency.With(route)
	var counters sync.Map // counterKey → *atomic.Uint64, resolved once per method and status
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		ctx, span := s.startSpan(r, route)
		if ctx != r.Context() {
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		d := time.Since(start)
		s.endSpan(ctx, span, r, route, code, d)
		k := counterKey{r.Method, code}
		c, ok := counters.Load(k)
		if !ok {
			ct := strconv.Itoa(code)
			if code >= 0 && code < len(codeText) {
				ct = codeText[code]
			}
			c, _ = counters.LoadOrStore(k, s.requests.With(route, r.Method, ct))
		}
		c.(*atomic.Uint64).Add(1)
		latency.Observe(d.Seconds())
		if debug {
			s.logger.Debug("http request", "method", r.Method, "path", r.URL.Path, "status", code, "duration", d, "remote", r.RemoteAddr)
		}
	})
}

func (s *core) health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	checks := make(map[string]func(context.Context) error, len(s.checks))
	for k, v := range s.checks {
		checks[k] = v
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	status := http.StatusOK
	results := map[string]string{}
	for name, check := range checks {
		if err := check(ctx); err != nil {
			status = http.StatusServiceUnavailable
			results[name] = "failing"
			s.logger.Warn("health check failed", "check", name, "error", err)
		} else {
			results[name] = "ok"
		}
	}
	body := map[string]any{"status": "ok", "checks": results}
	if status != http.StatusOK {
		body["status"] = "failing"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, lets in-flight requests finish (up to ShutdownTimeout) and
// returns nil.
func (s *core) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	for _, f := range s.onShutdown {
		srv.RegisterOnShutdown(f)
	}
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.logger.Info("shutting down: finishing in-flight requests", "in_flight", s.inflight.Load())
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bearer requires "Authorization: Bearer <token>" when token is set,
// refusing in the error body of the runs API.
func bearer(token string, h http.Handler) http.Handler {
	return httpx.Bearer(token, "agentry", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"UNAUTHORIZED","message":"a valid bearer token is required"}}`+"\n")
	}, h)
}
