package mcpserve

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/internal/httpx"
)

// Defaults of Options.
const (
	defaultMaxBody        = 1 << 20
	defaultMaxSessions    = 1000
	defaultSessionTimeout = 30 * time.Minute
)

// Options configures Workflows, Agents and ServeStdio; the zero value
// works: no token, no browser origin, 1 MiB bodies, 1,000 sessions idle
// for at most 30 minutes.
type Options struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every request (401 with a WWW-Authenticate challenge otherwise).
	Token string
	// Origins are the browser origins allowed to call ("*": any). A
	// request carrying another Origin header is refused with 403, as the
	// Streamable HTTP transport's security rules ask (it defends against
	// DNS rebinding); a request without Origin (not from a browser) passes.
	Origins []string
	// MaxBodyBytes bounds a request body (413 beyond); 0 is 1 MiB.
	MaxBodyBytes int64
	// MaxSessions bounds the MCP sessions a handler keeps open; beyond it
	// a new session is refused with 503 and Retry-After. 0 is 1,000.
	MaxSessions int
	// SessionTimeout closes an MCP session that received no request for
	// this long (a workflow's UAIP session ends with it); 0 is 30 minutes.
	SessionTimeout time.Duration
	// Version is the server version announced at initialize.
	Version string
	// Logger receives the failures a peer is not told about; nil is
	// slog.Default().
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = defaultMaxBody
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = defaultMaxSessions
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = defaultSessionTimeout
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// legacyVersions are the protocol revisions served: every revision with
// the initialize handshake and transport sessions. The stateless revision
// 2026-07-28, where no session carries the UAIP session, is refused
// (docs/spec-notes/mcp.md).
var legacyVersions = func() []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < "2026-07-28" {
			out = append(out, v)
		}
	}
	return out
}()

// headerSessionID is the Streamable HTTP transport's session header.
const headerSessionID = "Mcp-Session-Id"

// guard applies the token and origin checks in front of next.
func guard(o *Options, next http.Handler) http.Handler {
	checked := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(o.Origins, "*") && !slices.Contains(o.Origins, origin) {
			http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
	return httpx.Bearer(o.Token, "agentry-mcp", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized: a valid bearer token is required", http.StatusUnauthorized)
	}, checked)
}

// streamableOptions are the SDK handler's options for o. jsonResponse
// answers a request with one JSON body rather than an event stream: for
// requests that send no notification of their own (a workflow's; its
// list_changed goes on the session's standalone stream) it saves the
// stream's framing and flushes.
func streamableOptions(o *Options, jsonResponse bool) *mcp.StreamableHTTPOptions {
	return &mcp.StreamableHTTPOptions{
		JSONResponse:        jsonResponse,
		MaxRequestBodyBytes: o.MaxBodyBytes,
		SessionTimeout:      o.SessionTimeout,
		Logger:              sdkLogger(o.Logger),
	}
}

// sdkLogger passes the SDK's warnings and errors on; its Info records (one
// per notification) are noise in a server's log.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}
func (h minLevel) WithGroup(g string) slog.Handler { return minLevel{h.Handler.WithGroup(g), h.min} }

// tooMany refuses a new session beyond the limit.
func tooMany(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, "Service Unavailable: too many MCP sessions", http.StatusServiceUnavailable)
}

// Handler is an MCP endpoint over Streamable HTTP.
type Handler struct {
	h     http.Handler
	close func()
}

// ServeHTTP serves the endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// Close closes every MCP session open (a server shutting down calls it,
// so that the sessions' event streams do not hold it up). It may be
// called more than once; new sessions may still open.
func (h *Handler) Close() { h.close() }
