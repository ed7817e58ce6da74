// Package mcptools bridges an MCP server's tools to an agent: a Toolset
// (agent.Toolset) whose tools are those the server lists, through the
// official MCP Go SDK (github.com/modelcontextprotocol/go-sdk), over stdio
// (a child process) or Streamable HTTP.
//
// The connection is made at the first step that needs the tools, not
// before. A server that announces notifications/tools/list_changed is
// listed again before the next step. A stdio server that dies is started
// again at the next step; the call in flight when it died returns a tool
// error, which the model sees, as it sees a tool the server reports
// failed (isError). Close stops the server process.
package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/llm"
)

// Options configure a Toolset: Command for a stdio server, else URL for
// a Streamable HTTP one.
type Options struct {
	// Command is the stdio server's program and arguments.
	Command []string
	// Env is added to the stdio server's environment (which is the
	// process's otherwise).
	Env map[string]string
	// Dir is the stdio server's working directory; "" is the process's.
	Dir string
	// URL is the Streamable HTTP server's endpoint.
	URL string
	// Headers are sent with every HTTP request.
	Headers map[string]string
	// HTTPClient is the HTTP transport; nil uses http.DefaultClient's.
	HTTPClient *http.Client
	// Include, when set, keeps only the tools whose name matches one of
	// these globs (path.Match); Exclude then drops those matching one.
	Include, Exclude []string
	// Prefix is put before each tool's name, as the model sees it.
	Prefix string
	// Tier is the governance tier of a tool, given its name (with
	// Prefix) and the server's annotations (untrusted hints); nil uses
	// AnnotationTier.
	Tier func(name string, a *mcp.ToolAnnotations) govern.Tier
	// Logger receives the server's restarts and list refreshes; nil is
	// slog.Default().
	Logger *slog.Logger
}

// AnnotationTier maps MCP tool annotations to a UAICP tier: readOnlyHint
// is read_only, destructiveHint (set, true) write_high_risk, anything
// else write_low_risk.
func AnnotationTier(a *mcp.ToolAnnotations) govern.Tier {
	switch {
	case a == nil:
		return govern.WriteLowRisk
	case a.ReadOnlyHint:
		return govern.ReadOnly
	case a.DestructiveHint != nil && *a.DestructiveHint:
		return govern.WriteHighRisk
	}
	return govern.WriteLowRisk
}

// Toolset is an MCP server's tools as an agent.Toolset. It is safe for
// concurrent use.
type Toolset struct {
	opts   Options
	name   string // the server, for messages
	client *mcp.Client
	log    *slog.Logger

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []llm.Tool
	stale   bool // the server said its list changed
	closed  bool
	// connected counts the connections made (the first, then restarts).
	connected int
}

// New returns the Toolset of the server opts names, without connecting
// to it yet.
func New(opts *Options) (*Toolset, error) {
	o := *opts
	if (len(o.Command) == 0) == (o.URL == "") {
		return nil, errors.New("mcptools: give a Command (stdio) or a URL (Streamable HTTP), not both")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Tier == nil {
		o.Tier = func(_ string, a *mcp.ToolAnnotations) govern.Tier { return AnnotationTier(a) }
	}
	t := &Toolset{opts: o, log: o.Logger}
	if o.URL != "" {
		t.name = o.URL
	} else {
		t.name = o.Command[0]
	}
	t.client = mcp.NewClient(&mcp.Implementation{Name: "agentry", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			t.mu.Lock()
			t.stale = true
			t.mu.Unlock()
		},
	})
	return t, nil
}

// Tools implements agent.Toolset: the server's tools, connecting (or
// reconnecting to a server that died) and listing them again when its
// list changed.
func (t *Toolset) Tools(ctx context.Context, _ *agent.State) ([]llm.Tool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("mcptools: %s: closed", t.name)
	}
	if t.session == nil {
		if err := t.connect(ctx); err != nil {
			return nil, err
		}
	}
	if t.tools == nil || t.stale {
		t.stale = false
		if err := t.list(ctx); err != nil {
			return nil, err
		}
	}
	return t.tools, nil
}

// connect starts (or reaches) the server. t.mu is held.
func (t *Toolset) connect(ctx context.Context) error {
	var tr mcp.Transport
	if t.opts.URL != "" {
		hc := t.opts.HTTPClient
		base := http.DefaultTransport
		if hc != nil && hc.Transport != nil {
			base = hc.Transport
		}
		c := http.Client{}
		if hc != nil {
			c = *hc
		}
		if len(t.opts.Headers) > 0 {
			base = headerTransport{base: base, headers: t.opts.Headers}
		}
		// Each request carries the traceparent of the tool call's span.
		c.Transport = telemetry.Transport(base)
		hc = &c
		tr = &mcp.StreamableClientTransport{Endpoint: t.opts.URL, HTTPClient: hc}
	} else {
		cmd := exec.Command(t.opts.Command[0], t.opts.Command[1:]...)
		cmd.Dir = t.opts.Dir
		if len(t.opts.Env) > 0 {
			cmd.Env = os.Environ()
			for k, v := range t.opts.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		cmd.Stderr = logWriter{log: t.log, server: t.name}
		tr = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	s, err := t.client.Connect(ctx, tr, nil)
	if err != nil {
		return fmt.Errorf("mcptools: connecting to %s: %w", t.name, err)
	}
	t.connected++
	if t.connected > 1 {
		t.log.Warn("mcp server restarted", "server", t.name, "connections", t.connected)
	}
	t.session = s
	t.tools = nil
	go func() {
		s.Wait() // the server ended the session (a stdio server died)
		t.mu.Lock()
		if t.session == s {
			t.session = nil
		}
		t.mu.Unlock()
	}()
	return nil
}

// list lists the server's tools. t.mu is held.
func (t *Toolset) list(ctx context.Context) error {
	var tools []llm.Tool
	for mt, err := range t.session.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("mcptools: listing the tools of %s: %w", t.name, err)
		}
		if !t.keep(mt.Name) {
			continue
		}
		tools = append(tools, t.tool(mt))
	}
	if tools == nil {
		tools = []llm.Tool{}
	}
	t.tools = tools
	return nil
}

func (t *Toolset) keep(name string) bool {
	if len(t.opts.Include) > 0 && !matchAny(t.opts.Include, name) {
		return false
	}
	return !matchAny(t.opts.Exclude, name)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// tool is mt as an llm.Tool, declared with its tier.
func (t *Toolset) tool(mt *mcp.Tool) llm.Tool {
	name := t.opts.Prefix + mt.Name
	params, _ := mt.InputSchema.(map[string]any)
	if params == nil {
		params = map[string]any{"type": "object"}
	}
	remote := mt.Name
	tool := llm.Tool{Name: name, Description: mt.Description, Parameters: llm.Schema(params),
		Run: func(ctx context.Context, args map[string]any) (any, error) { return t.call(ctx, remote, args) }}
	return govern.Declare(tool, govern.Declaration{Tier: t.opts.Tier(name, mt.Annotations)})
}

// call calls the tool named name on the server; a failure of any kind is
// an error the model sees as the tool's.
func (t *Toolset) call(ctx context.Context, name string, args map[string]any) (any, error) {
	t.mu.Lock()
	s := t.session
	t.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("the MCP server %s is not running; it is started again at the next step", t.name)
	}
	if args == nil {
		args = map[string]any{}
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the MCP server %s failed the call: %v", t.name, err)
	}
	text := contentText(res.Content)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error"
		}
		return nil, errors.New(text)
	}
	if res.StructuredContent != nil {
		return res.StructuredContent, nil
	}
	return text, nil
}

// contentText joins the text of a result's content; other content is
// described by its kind.
func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

// Close ends the session and stops a stdio server.
func (t *Toolset) Close() error {
	t.mu.Lock()
	s := t.session
	t.session, t.closed = nil, true
	t.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// logWriter logs what a stdio server writes on its stderr.
type logWriter struct {
	log    *slog.Logger
	server string
}

func (w logWriter) Write(p []byte) (int, error) {
	if s := strings.TrimSpace(string(p)); s != "" {
		w.log.Info("mcp server stderr", "server", w.server, "line", s)
	}
	return len(p), nil
}
