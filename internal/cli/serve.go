package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/store/memstore"
	"github.com/agentry-dev/agentry/store/sqlstore"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type serveFlags struct {
	addr       string
	data       string
	store      string
	workflows  []string
	token      string
	cors       []string
	sessionTTL time.Duration
	maxBody    int64
	maxFlight  int
	logLevel   string
	logFormat  string
}

func serveCmd(e *env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the protocols: UAIP workflows on --addr",
		Long: `Serve agentry's protocols on one HTTP server.

UAIP-0.1 (stage-enforced workflows): POST /initialize, POST /execute,
GET /api/workflows[/{name}], GET|DELETE /api/sessions/{id}. Without
--workflows the built-in example workflow "store" is served.

Operations: GET /healthz, GET /metrics (Prometheus text format). SIGINT or
SIGTERM shut down gracefully, finishing in-flight requests.

Every flag can also be set by an environment variable AGENTRY_<FLAG>
(e.g. AGENTRY_ADDR, AGENTRY_STORE, AGENTRY_TOKEN; lists comma-separated);
a flag on the command line wins.`,
		Example: `  agentry serve
  agentry serve --workflows ./workflows --store postgres://agentry@db/agentry
  curl -s localhost:8080/initialize -d '{"workflow_name":"store"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return usageError("%v", err)
			}
			return runServe(cmd.Context(), e, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&f.data, "data", "./agentry-data", "data directory (the default SQLite store lives here)")
	fl.StringVar(&f.store, "store", "", "session store URL: sqlite:///path, postgres://…, memory: (default sqlite in --data)")
	fl.StringSliceVar(&f.workflows, "workflows", nil, "workflow YAML/JSON files or directories (default: the built-in examples)")
	fl.StringVar(&f.token, "token", "", "require this bearer token on the UAIP endpoints")
	fl.StringSliceVar(&f.cors, "cors", nil, "origins allowed to call from a browser (\"*\" for any); CORS is off by default")
	fl.DurationVar(&f.sessionTTL, "session-ttl", 24*time.Hour, "sessions expire after this long unused (negative: never)")
	fl.Int64Var(&f.maxBody, "max-body", workflow.DefaultMaxBody, "largest request body in bytes (413 beyond)")
	fl.IntVar(&f.maxFlight, "max-in-flight", 4096, "concurrent requests beyond which the server answers 503")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug (includes access logs), info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	return cmd
}

// applyEnv sets unset flags from AGENTRY_<NAME> environment variables.
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed || err != nil {
			return
		}
		name := "AGENTRY_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(fl.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}

func newLogger(e *env, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(e.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(e.stderr, opts)), nil
	}
	return nil, usageError("--log-format %q: want text or json", format)
}

// openSessions opens the session store named by url.
func openSessions(ctx context.Context, url, dataDir string) (workflow.SessionStore, func() error, error) {
	if url == "" {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, nil, err
		}
		url = "sqlite://" + filepath.Join(dataDir, "agentry.db")
	}
	if url == "memory:" {
		return memstore.New().Sessions(), func() error { return nil }, nil
	}
	st, err := sqlstore.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	return st.Sessions(), st.Close, nil
}

func loadWorkflows(paths []string) ([]*workflow.Workflow, error) {
	if len(paths) == 0 {
		return []*workflow.Workflow{builtin.Store()}, nil
	}
	var out []*workflow.Workflow
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		var ws []*workflow.Workflow
		if fi.IsDir() {
			ws, err = workflow.LoadDir(p)
		} else {
			ws, err = workflow.LoadFile(p)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ws...)
	}
	if len(out) == 0 {
		return nil, errors.New("no workflows found in " + strings.Join(paths, ", "))
	}
	return out, nil
}

func runServe(ctx context.Context, e *env, f *serveFlags) error {
	logger, err := newLogger(e, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	wfs, err := loadWorkflows(f.workflows)
	if err != nil {
		return fmt.Errorf("workflows: %w", err)
	}
	sessions, closeStore, err := openSessions(ctx, f.store, f.data)
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	defer closeStore()
	eo := &workflow.EngineOptions{SessionTTL: f.sessionTTL, Logger: logger}
	if f.store == "" || strings.HasPrefix(f.store, "sqlite:") {
		// A SQLite file has one server process: cache sessions between
		// actions instead of reading them back before every write.
		eo.CacheSessions = 10_000
	}
	engine := workflow.NewEngine(sessions, eo)
	var names []string
	for _, w := range wfs {
		if err := engine.Register(w); err != nil {
			return err
		}
		names = append(names, w.Name)
	}

	srv := server.New(server.Options{Logger: logger, MaxInFlight: f.maxFlight})
	uaip := workflow.NewHandler(engine, &workflow.HandlerOptions{MaxBodyBytes: f.maxBody, BearerToken: f.token, CORSOrigins: f.cors, Logger: logger})
	for _, p := range []string{"/initialize", "/execute", "/api/workflows", "/api/workflows/", "/api/sessions/", "/"} {
		srv.Handle(p, uaip)
	}
	srv.AddHealthCheck("sessions", func(ctx context.Context) error {
		_, err := sessions.Get(ctx, "healthcheck-probe")
		if errors.Is(err, workflow.ErrSessionNotFound) {
			return nil
		}
		return err
	})
	go sweep(ctx, engine, logger, time.Minute)

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	logger.Info("agentry serving", "addr", ln.Addr().String(), "uaip_workflows", strings.Join(names, ","), "store", storeName(f))
	fmt.Fprintf(e.stderr, "agentry: listening on http://%s (workflows: %s)\n", ln.Addr(), strings.Join(names, ", "))
	return srv.Serve(ctx, ln)
}

func storeName(f *serveFlags) string {
	if f.store == "" {
		return "sqlite in " + f.data
	}
	if i := strings.Index(f.store, "@"); i >= 0 { // hide credentials
		return f.store[:strings.Index(f.store, "://")+3] + "…" + f.store[i:]
	}
	return f.store
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
