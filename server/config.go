package server

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/workflow"
)

// Defaults of Config.
const (
	DefaultAddr        = "127.0.0.1:8080"
	defaultTLSAddr     = "127.0.0.1:8443"
	defaultMaxInFlight = 4096
	defaultSessionTTL  = 24 * time.Hour
)

// Config is what a Server serves and how. The zero value serves no
// workflow and no agent, on DefaultAddr, with an in-memory store; New
// does not modify the Config.
type Config struct {
	// Store keeps what must survive a restart: workflow sessions, the
	// governance journal, delivered runs' results, UAMP's replay window
	// and audit export positions (store.Open). nil opens an in-memory
	// store, closed by Shutdown; a Store given here is the caller's to
	// close, after Shutdown.
	Store *store.Store

	// Workflows are served over UAIP (POST /initialize, POST /execute,
	// GET /api/workflows[/{name}], GET|DELETE /api/sessions/{id}), each
	// as a UIAP app (/uiap/ws?workflow=NAME and /uiap/sessions;
	// without workflows, UIAP is not served) and each to MCP hosts at
	// /mcp/workflows/{name} (an MCP session is a UAIP session; see
	// docs/mcp.md). Names must be distinct.
	Workflows []*workflow.Workflow
	// Agents are run under governance by name: POST /v1/runs, GET
	// /v1/runs[/{id}], POST /v1/runs/{id}/cancel, GET
	// /v1/runs/{id}/events, GET /v1/agents, and to MCP hosts as the
	// tools of /mcp/agents; the approvals they wait for at /v1/approvals.
	Agents []Agent
	// Governance configures the governor every agent runs under (UAICP
	// 0.3): policy, approver keys, task classes, verifiers, rollbacks.
	// nil is govern.Options' zero value. Its Journal defaults to the
	// Store's and its Logger to Logger; its OnDecision, if set, is called
	// after the server's own (which resumes the decided run).
	//
	// With a Lease and a store whose journal has leases (SQLite,
	// PostgreSQL), the server holds its Node name by a lease too
	// — a second live process with the same name fails in New — and
	// every third of the lease recovers the runs of replicas that died
	// and resumes decided runs nobody resumed (runs.Options.Reap).
	Governance *govern.Options
	// Audit exports the governance journal to sinks, each resuming where
	// it stopped (its position is kept in the Store under its Name).
	Audit []AuditExport

	// UAMP, when set, serves signed agent messaging (UAMP 1.0) on the
	// TLS listener, with the signed discovery documents under
	// /.well-known/; nil serves no TLS listener.
	UAMP *UAMP
	// UIAPRateLimit limits each UIAP session's requests (a token bucket;
	// beyond it requests are answered rate_limited). nil is 50 a second
	// in bursts of 100; a zero RateLimit is no limit.
	UIAPRateLimit *uicontrol.RateLimit
	// WebDemo serves /web/: the browser module of UIAP (/web/uiap.js) and
	// a demo store page a scripted agent drives over a WebSocket. With a
	// Token the demo page is off (a browser cannot send the token).
	WebDemo bool
	// Console serves the web console at /console/ (docs/console.md): the
	// agents, their runs live, the approvals inbox, each run's audit
	// trail and the workflows' sessions. With a Token it asks for the
	// token once and keeps an HttpOnly, SameSite=Strict session cookie,
	// which then opens every route the token does.
	Console bool
	// ConsoleTraceURL, when set, links each run in the console to its
	// trace: "{trace_id}" in it is replaced by the run's trace ID
	// (Jaeger: "http://localhost:16686/trace/{trace_id}").
	ConsoleTraceURL string

	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every endpoint but /healthz and /web/uiap.js.
	Token string
	// CORSOrigins are the origins allowed to call from a browser ("*":
	// any); none by default.
	CORSOrigins []string
	// SessionTTL expires workflow sessions unused this long; 0 is
	// 24 hours, a negative value never.
	SessionTTL time.Duration
	// MaxBodyBytes bounds request bodies (413 beyond); 0 is
	// workflow.DefaultMaxBody.
	MaxBodyBytes int64
	// MaxInFlight bounds concurrent requests (503 with Retry-After
	// beyond); 0 is 4096.
	MaxInFlight int
	// ReadHeaderTimeout (0: 10 s), ReadTimeout (0: 60 s), WriteTimeout
	// (0: 120 s) and IdleTimeout (0: 120 s) are the plain listener's
	// http.Server limits; ShutdownTimeout (0: 30 s) bounds the wait for
	// in-flight requests when Serve stops.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout, ShutdownTimeout time.Duration

	// Listener is the plain HTTP listener Serve serves; nil listens on
	// Addr (default DefaultAddr).
	Listener net.Listener
	Addr     string
	// TLSListener is the TLS 1.3 listener of UAMP; nil listens on TLSAddr
	// (default "127.0.0.1:8443"). Unused without UAMP.
	TLSListener net.Listener
	TLSAddr     string

	// Logger receives operational records (access records at Debug);
	// nil is slog.Default().
	Logger *slog.Logger

	// TracerProvider makes the server's spans — one per HTTP request,
	// continuing an incoming W3C traceparent — and is the default of each
	// agent's LLMOptions.TracerProvider (invoke_agent, chat and
	// execute_tool spans in the OpenTelemetry GenAI conventions); nil is
	// the global provider (otel.GetTracerProvider), which records nothing
	// unless the program installs an SDK (the agentry binary does when
	// the OTEL_* environment asks for it).
	TracerProvider trace.TracerProvider
	// MeterProvider records http.server.request.duration and each agent's
	// GenAI client metrics (the default of LLMOptions.MeterProvider); nil
	// is the global provider. /metrics serves the Prometheus page either
	// way.
	MeterProvider metric.MeterProvider
}

// Agent is an agent a Server runs under governance.
type Agent struct {
	// Name is what a run names (POST /v1/runs {"agent": NAME}).
	Name string
	// Description says what the agent does (GET /v1/agents).
	Description string
	// Timeout bounds each execution of a run of the agent (waiting for
	// an approval excluded): past it the run is cancelled and fails safe.
	// 0: no bound.
	Timeout time.Duration
	// Options build the agent (agent.New); the governor's middleware is
	// added after Options.Middleware, and a nil Logger is the server's.
	Options agent.Options
	// Govern names the agent's runs in the journal: their task class
	// and identity. Its Name is set to Name.
	Govern govern.AgentOptions
	// Prepare, when set, is called with the governor before the agent
	// is built, to finish Options with what needs the governor: a
	// sub-agent whose runs are governed child runs. An error fails New.
	Prepare func(g *govern.Governor, o *agent.Options) error
	// Close, when set, is called by Shutdown once the agent's runs have
	// stopped, to release what its tools hold (an MCP server process).
	Close func() error
}

// AuditExport exports the governance journal to Sink (audit.Exporter,
// at least once across a crash). A Sink that is an io.Closer is closed
// by Shutdown.
type AuditExport struct {
	// Name keys the export's position in the store (e.g. "jsonl:PATH").
	Name string
	Sink audit.Sink
}

// UAMP configures signed agent messaging (UAMP 1.0 at uamp.dev) on the
// TLS listener: POST /v1/messages, GET /v1/stream/{id} (SSE), /uamp/1/ws
// (WebSocket) and gRPC (uamp.v1.Agent), with discovery under
// /.well-known/.
type UAMP struct {
	// Handler answers the requests; nil is messaging.Echo. An agent is
	// served with messaging/uampagent.NewHandler.
	Handler messaging.Handler
	// DID is the server's identity (did:web:…); required.
	DID string
	// Key is the identity key signing envelopes and discovery documents;
	// required. Its kid should be a DID URL of DID.
	Key *envelope.PrivateKey
	// Certificate is the TLS listener's certificate; required.
	Certificate tls.Certificate
	// TrustedKeys verify the clients' envelopes; a client authenticates
	// with a TLS client certificate made with one of these keys. nil
	// trusts none: every envelope is refused.
	TrustedKeys *envelope.KeySet
	// ClientCAs issue client certificates accepted besides those made
	// with a trusted key; the certificate's single URI names the sender.
	ClientCAs *x509.CertPool
	// OAuth, when set, accepts OAuth 2.1 bearer access tokens as
	// authentication (a request with an Authorization header is
	// authenticated by it, any other by its client certificate). Its
	// Audience defaults to DID.
	OAuth *messaging.BearerOptions
	// Manifest is the signed manifest at /.well-known/; its zero value
	// is one announcing uamp/1.0, ask, subscribe, progress and cancel,
	// text bodies, mTLS and the envelope size limit.
	Manifest envelope.Manifest
	// BaseURL is the public https URL of the TLS listener, listed in the
	// discovery hub; "" is "https://" + the DID's host.
	BaseURL string
}
