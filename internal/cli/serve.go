package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type serveFlags struct {
	gcPercent  int
	addr       string
	data       string
	store      string
	workflows  []string
	token      string
	cors       []string
	sessionTTL time.Duration
	maxBody    int64
	maxFlight  int
	uiapRate   float64 // per UIAP session (uiapserve.go)
	uiapBurst  int
	logLevel   string
	logFormat  string
	approvers  string
	policy     string
	node       string
	runLease   time.Duration
	// agents is a directory of agent files (agentfile); "" serves the
	// example support and echo agents (examples/agents.Defaults).
	agents string
	// agentModel and agentBaseURL set SUPPORT_MODEL and the base URL
	// variable of its provider for the agent files (support.yaml reads
	// ${SUPPORT_MODEL:-scripted:support}).
	agentModel, agentBaseURL string
	auditLog                 string
	// noConsole turns /console/ off; traceURL links its runs to traces.
	noConsole bool
	traceURL  string

	// The TLS listener (UAMP, discovery, and the plain endpoints again).
	tlsAddr    string
	tlsAddrSet bool // --tls-addr was given: failing to listen is an error
	tlsCert    string
	tlsKey     string
	uampTrust  string
	// OAuth 2.1 bearer JWTs as an alternative to client certificates.
	uampOAuthIssuer string
	uampOAuthJWKS   string
	uampClientCA    string
	uampDID         string
	// uampKey is the identity key file replicas share (else one under
	// --data, made on the first start).
	uampKey string
}

func serveCmd(e *env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the protocols: UAIP workflows and governed agent runs on --addr, UAMP on --tls-addr",
		Long: `Serve agentry's protocols on one HTTP server.

UAIP-0.1 (stage-enforced workflows): POST /initialize, POST /execute,
GET /api/workflows[/{name}], GET|DELETE /api/sessions/{id}. Without
--workflows the built-in example workflow "store" is served.

UIAP Core 0.1 (UI control): every workflow is also an app an agent
controls, at /uiap/ws (WebSocket; ?workflow=NAME) and /uiap/sessions
(HTTP binding): stages are states, the current stage's tasks and
transitions are actions. --token applies as for UAIP. Each session may
send --uiap-rate requests a second (default 50) in bursts of up to
--uiap-burst (default twice the rate: 100); beyond, a request is answered
rate_limited (retryable, with retryAfterMs); session messages are never
limited. --uiap-rate 0 turns the limit off. A web page can be
the app: /web/uiap.js is the browser module, /web/demo/ a demo store whose
WebSocket (/web/demo/ws) is served by a scripted agent that shops in it.
With --token the web demo is off (404): a browser cannot send the token on
a WebSocket, and an open demo would run an agent for anyone.

UAICP-0.3 (governed agent runs): the agents are the agent files of
--agents DIR (docs/agents.md), else the example "support" and "echo"
agents (examples/agents, built in). POST /v1/runs starts a run
({"agent":"support","input":"refund o-1001","wait":true}), GET /v1/runs/{id} reports it (?wait=30s: once it has
delivered, failed safe or paused for a human), GET /v1/runs lists runs,
POST /v1/runs/{id}/cancel cancels one, GET /v1/runs/{id}/events streams
its events (SSE), GET /v1/agents[/{name}] describes the agents (model, tools and their tiers). Every tool call is gated by
its risk tier; a refund (write_high_risk) pauses the run until a human
approves it: GET /v1/approvals, POST /v1/approvals/{id}, or
"agentry approve ID --as NAME" with a key made by "agentry keys create".
Approver keys are trusted from --approvers (default: the keyring of
"agentry keys" under --data), re-read when a token names a key it does
not know (keys created while serving are trusted without a restart). The
audit journal lives in the store; at startup, a run a crash left in
doubt is rolled back and closed, a run whose approved calls had not
started goes on, and paused runs resume once decided.

UAMP-1.0 (signed agent messaging) on the TLS 1.3 listener --tls-addr
only, never on --addr: POST /v1/messages, GET /v1/stream/{id} (SSE),
/uamp/1/ws (WebSocket) and gRPC (uamp.v1.Agent). The server's DID,
did:web:<host>%3A<port>, answers with the protocol echo (body.content
back as chunks, then done); each agent NAME is served at
<DID>:agents:NAME, an ask being a governed run of it (its events as
deltas, its answer in done); the signed manifest, hub (listing the
agents, whose manifests are under /agents/NAME/.well-known/) and DID
document under /.well-known/. The listener serves every endpoint of --addr as well. Its
certificate is --tls-cert/--tls-key, or a self-signed development
certificate made under --data (tls/cert.pem, reused on restart: give it
to clients as their CA). The server's identity key is --uamp-key (replicas
serving one --uamp-did share it), else <data>/uamp/identity.jwk, made on
the first start. Envelopes are verified with the client keys of
--uamp-trust (a JWK or JWK set; default <data>/uamp/trusted.jwks when it
exists); clients authenticate with a TLS client certificate, made with
such a key (agentry uamp send does this) or issued by --uamp-client-ca,
whose single URI names the sender.

Operations: GET /healthz, GET /metrics (Prometheus text format). With
--token, /metrics needs the token too (a Prometheus scrape sends it with
authorization.credentials); /healthz stays open, for probes. SIGINT or
SIGTERM shut down gracefully, finishing in-flight requests. SIGHUP reloads
--agents DIR: new and changed agents take effect for new runs, runs
executing finish on the definition they started with, and a directory
with an error keeps the agents served (the errors are printed).

--log-format json makes stderr one stream of JSON records: the lines
written for people and the log package's output become records too.

Every flag can also be set by an environment variable AGENTRY_<FLAG>
(e.g. AGENTRY_ADDR, AGENTRY_STORE, AGENTRY_TOKEN; lists comma-separated);
a flag on the command line wins.`,
		Example: `  agentry serve
  agentry serve --workflows ./workflows --store postgres://agentry@db/agentry
  curl -s localhost:8080/initialize -d '{"workflow_name":"store"}'
  agentry serve --uamp-trust client.pub.jwk   # then: agentry uamp send https://127.0.0.1:8443 ask.json --key client.jwk --ca agentry-data/tls/cert.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return usageError("%v", err)
			}
			f.tlsAddrSet = cmd.Flags().Changed("tls-addr")
			return runServe(cmd.Context(), e, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&f.data, "data", "./agentry-data", "data directory (the default SQLite store lives here)")
	fl.StringVar(&f.store, "store", "", "session store URL: sqlite:///path, postgres://…, memory: (default sqlite in --data)")
	fl.StringSliceVar(&f.workflows, "workflows", nil, "workflow YAML/JSON files or directories (default: the built-in examples)")
	fl.StringVar(&f.token, "token", "", "require this bearer token on the UAIP, UIAP, runs and approvals endpoints and /metrics (/healthz and /web/uiap.js stay open); turns the web demo off")
	fl.BoolVar(&f.noConsole, "no-console", false, "do not serve the web console at /console/")
	fl.StringVar(&f.traceURL, "console-trace-url", "", `link each run in the console to its trace: a URL in which "{trace_id}" is replaced (Jaeger: http://localhost:16686/trace/{trace_id})`)
	fl.StringSliceVar(&f.cors, "cors", nil, "origins allowed to call from a browser (\"*\" for any); CORS is off by default")
	fl.DurationVar(&f.sessionTTL, "session-ttl", 24*time.Hour, "sessions expire after this long unused (negative: never)")
	fl.Int64Var(&f.maxBody, "max-body", workflow.DefaultMaxBody, "largest request body in bytes (413 beyond)")
	fl.IntVar(&f.maxFlight, "max-in-flight", 4096, "concurrent requests beyond which the server answers 503")
	fl.Float64Var(&f.uiapRate, "uiap-rate", defaultUIAPRate, uiapRateUsage)
	fl.IntVar(&f.uiapBurst, "uiap-burst", 0, uiapBurstUsage)
	fl.IntVar(&f.gcPercent, "gc-percent", defaultGCPercent, "Go garbage collector target percentage (as GOGC; the GOGC environment variable wins; Go's default is 100)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug (includes access logs), info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.StringVar(&f.approvers, "approvers", "", "keyring of trusted approver keys (default: <data>/keys/approvers.json when it exists)")
	fl.StringVar(&f.policy, "policy", "", "YAML rule policy for governed tool calls (default: allow; tiers still apply)")
	fl.StringVar(&f.node, "node", "", "this replica's name in the audit journal and on the leases of its runs; two live replicas with one name are refused (default: a name made once and kept in <data>/node)")
	fl.DurationVar(&f.runLease, "run-lease", 30*time.Second, "a run executing on this replica is recovered by another replica sharing the store when the replica has not renewed the run's lease (renewed every third) for this long; 0: leases off, a run is recovered only by its own node's restart")
	fl.StringVar(&f.auditLog, "audit-log", "", "also export every audit journal record to this JSONL file (asynchronously; resumes where it stopped)")
	fl.StringVar(&f.agents, "agents", "", "a directory of agent files (docs/agents.md) to serve (default: the example support and echo agents of examples/agents)")
	fl.StringVar(&f.agentModel, "agent-model", "", "provider:model of the support agent: sets SUPPORT_MODEL for the agent files (default: its offline model, scripted:support)")
	fl.StringVar(&f.agentBaseURL, "agent-base-url", "", "API address of --agent-model's provider (else <PROVIDER>_BASE_URL, the vendor's variable such as OPENAI_BASE_URL, or its default; compat:MODEL needs one)")
	fl.StringVar(&f.tlsAddr, "tls-addr", "127.0.0.1:8443", "TLS 1.3 listen address: UAMP, discovery and every --addr endpoint (empty: no TLS listener)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate of the TLS listener (default: a development certificate made under --data)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	fl.StringVar(&f.uampTrust, "uamp-trust", "", "JWK or JWK set of the client keys UAMP trusts (default: <data>/uamp/trusted.jwks when it exists)")
	fl.StringVar(&f.uampOAuthIssuer, "uamp-oauth-issuer", "", "accept OAuth 2.1 bearer access tokens (JWT, at+jwt, aud = the server's DID) from this issuer as UAMP authentication; the principal is their sub")
	fl.StringVar(&f.uampOAuthJWKS, "uamp-oauth-jwks", "", "JWK set of --uamp-oauth-issuer's signing keys (EdDSA or ES256)")
	fl.StringVar(&f.uampClientCA, "uamp-client-ca", "", "PEM CA certificates whose client certificates UAMP accepts (besides certificates made with a trusted key)")
	fl.StringVar(&f.uampDID, "uamp-did", "", "the server's did:web (default did:web:<host>%3A<port> of the TLS listener)")
	fl.StringVar(&f.uampKey, "uamp-key", "", "the server's UAMP identity key (a private JWK, agentry uamp keygen --out FILE); replicas serving one DID share it (default <data>/uamp/identity.jwk, made on the first start)")
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

// openStore opens the store named by url (default: SQLite in dataDir).
func openStore(ctx context.Context, url, dataDir string) (*store.Store, error) {
	if url == "" {
		url = "sqlite://" + filepath.Join(dataDir, "agentry.db")
	}
	return store.Open(ctx, url)
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
			ws, err = loadWorkflowFile(p)
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

// defaultGCPercent is the server's garbage collector target. A server's
// live heap is small next to what it allocates per request, so Go's
// default (100) collects every few hundred requests; 200 halves the
// collections for a heap that can grow to 3× the live one (still ≤ 40 MiB
// RSS with 10,000 sessions on the memory store, docs/benchmarks.md).
const defaultGCPercent = 200

// applyGCPercent sets the collector's target to pct unless the GOGC
// environment variable is set (it wins), and reports whether it did.
func applyGCPercent(pct int) bool {
	if _, set := os.LookupEnv("GOGC"); set {
		return false
	}
	debug.SetGCPercent(pct)
	return true
}

func runServe(ctx context.Context, e *env, f *serveFlags) (err error) {
	logger, err := newLogger(e, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	if f.logFormat == "json" {
		// One structured stream: the lines written for people become
		// records too, and so does the error that ends the server.
		e = &env{stdin: e.stdin, stdout: e.stdout, stderr: &logLines{logger: logger}, isTTY: e.isTTY}
		defer func() {
			if err != nil {
				err = loggedError(logger, err)
			}
		}()
	}
	defer useAsDefault(logger)() // libraries' slog.Default() and the log package
	applyGCPercent(f.gcPercent)
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError("--tls-cert and --tls-key go together")
	}
	limit, err := uiapRateLimit(f)
	if err != nil {
		return err
	}
	wfs, err := loadWorkflows(f.workflows)
	if err != nil {
		return fmt.Errorf("workflows: %w", err)
	}
	defs, err := serveAgents(f)
	if err != nil {
		return err
	}

	// Bind first: a second server on a busy port fails here, before it
	// opens the store or recovers governed runs.
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return listenError("--addr", f.addr, err)
	}
	defer ln.Close() // on an early return; Serve closes it otherwise
	tlsLn, err := listenTLS(e, f, logger)
	if err != nil {
		return err
	}
	if tlsLn != nil {
		defer tlsLn.Close()
	}

	st, err := openStore(ctx, f.store, f.data)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer st.Close() // after the server's Shutdown below
	cfg := &server.Config{
		Store: st, Workflows: wfs, Token: f.token, CORSOrigins: f.cors, SessionTTL: f.sessionTTL,
		MaxBodyBytes: f.maxBody, MaxInFlight: f.maxFlight, UIAPRateLimit: &limit, WebDemo: true,
		Console: !f.noConsole, ConsoleTraceURL: f.traceURL,
		Listener: ln, TLSListener: tlsLn, Logger: logger,
	}
	if tlsLn != nil { // before the agents: their uamp tools ask with its identity
		if cfg.UAMP, err = uampConfig(e, f, logger, tlsLn); err != nil {
			return err
		}
	}
	agentOpts, err := governance(e, f, cfg, defs, logger)
	if err != nil {
		return err
	}
	if f.auditLog != "" {
		cfg.Audit = []server.AuditExport{{Name: "jsonl:" + f.auditLog, Sink: audit.JSONLFile(f.auditLog)}}
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.Shutdown(context.WithoutCancel(ctx)); err == nil {
			err = serr
		}
	}()
	names := make([]string, len(wfs))
	for i, w := range wfs {
		names[i] = w.Name
	}
	logger.Info("agentry serving", "addr", ln.Addr().String(), "uaip_workflows", strings.Join(names, ","), "store", st.String())
	agentNames := make([]string, len(defs))
	for i, d := range defs {
		agentNames[i] = d.Name
	}
	from := f.agents
	if from == "" {
		from = "the built-in examples/agents; serve --agents DIR for yours"
	}
	fmt.Fprintf(e.stderr, "agentry: agents: %s (%s)\n", strings.Join(agentNames, ", "), from)
	fmt.Fprintf(e.stderr, "agentry: listening on http://%s (workflows: %s)\n", ln.Addr(), strings.Join(names, ", "))
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	served := make(chan struct{})
	defer close(served)
	go func() {
		for {
			select {
			case <-hup:
				reloadAgents(e, f, srv, agentOpts, logger)
			case <-served:
				return
			}
		}
	}()
	return srv.Serve(ctx)
}

// reloadAgents loads --agents again and serves what it defines (SIGHUP):
// new and changed agents take effect for new runs, runs executing finish
// on the definition they started with. A directory with any error keeps
// the agents served, and says why.
func reloadAgents(e *env, f *serveFlags, srv *server.Server, opts *agentfile.Options, logger *slog.Logger) {
	if f.agents == "" {
		logger.Info("SIGHUP: nothing to reload: the agents are the built-in examples (serve --agents DIR to reload a directory)")
		return
	}
	fail := func(err error) {
		logger.Error("agents not reloaded: the agents served are unchanged", "dir", f.agents, "error", err)
		fmt.Fprintf(e.stderr, "agentry: agents not reloaded, the agents served are unchanged:\n%v\n", err)
	}
	defs, err := serveAgents(f)
	if err != nil {
		fail(err)
		return
	}
	cfg := &server.Config{}
	if err := agentfile.Build(cfg, defs, opts); err != nil {
		fail(err)
		return
	}
	if err := srv.SetAgents(cfg.Agents); err != nil {
		fail(err)
		return
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	logger.Info("agents reloaded", "dir", f.agents, "agents", strings.Join(names, ","))
	fmt.Fprintf(e.stderr, "agentry: reloaded %d agents from %s: %s\n", len(defs), f.agents, strings.Join(names, ", "))
}

// listenError words a failure to listen on a flag's address; a port in
// use says so.
func listenError(flag, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: the address is already in use (another agentry serve?); stop it or pick another %s", flag, addr, flag)
	}
	return fmt.Errorf("%s %s: %w", flag, addr, err)
}

// useAsDefault makes logger the process's slog.Default, which the log
// package then writes through too (webhook tasks, libraries without a
// logger), until the returned func restores what was there.
func useAsDefault(logger *slog.Logger) (restore func()) {
	prev, w, flags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(logger)
	return func() {
		slog.SetDefault(prev)
		log.SetOutput(w)
		log.SetFlags(flags)
	}
}

// logLines is the stderr of agentry serve with --log-format json: each
// line written for people (without its "agentry: ") becomes a record.
type logLines struct {
	logger *slog.Logger
	mu     sync.Mutex
	buf    []byte
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimPrefix(strings.TrimSpace(string(l.buf[:i])), "agentry: ")
		l.buf = l.buf[i+1:]
		if line != "" {
			l.logger.Info(line)
		}
	}
}

// loggedError logs the error that ends agentry serve as a record and
// returns it for Main to exit with, without printing it again.
func loggedError(logger *slog.Logger, err error) error {
	logger.Error("agentry serve failed", "error", err.Error())
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	return &exitError{code: code, err: err, quiet: true}
}

func loadWorkflowFile(path string) ([]*workflow.Workflow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return workflow.Load(f, path)
}
