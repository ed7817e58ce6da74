package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/agentry-dev/agentry/runs"
)

// Agent is an agent served as a tool.
type Agent struct {
	Name        string
	Description string
	// Structured marks an agent with an output schema: its answer is a
	// JSON object, given to the host as structuredContent too.
	Structured bool
}

// metaRun names the run of an agent tool's result in its _meta.
const metaRun = "agentry.dev/run"

// Agents serves the agents of svc over MCP (Streamable HTTP), each a tool
// taking {"input": string}: mount it at "/mcp/agents". list says which
// agents to serve; it is called at every tools/list and tools/call, so a
// reload of the agents shows (notifications/tools/list_changed).
func Agents(svc *runs.Service, list func() []Agent, opts *Options) *Handler {
	o := opts.withDefaults()
	a := newAgentsServer(svc, list, &o)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.server }, streamableOptions(&o, false))
	return &Handler{close: a.closeAll, h: guard(&o, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get(headerSessionID) == "" {
			n := 0
			for range a.server.Sessions() {
				n++
			}
			if n >= o.MaxSessions {
				tooMany(w)
				return
			}
		}
		sdk.ServeHTTP(w, r)
	}))}
}

// closeAll closes every MCP session.
func (a *agentsServer) closeAll() {
	for ss := range a.server.Sessions() {
		ss.Close()
	}
}

type agentsServer struct {
	svc    *runs.Service
	list   func() []Agent
	opts   *Options
	server *mcp.Server

	mu     sync.Mutex
	served []Agent // the tools listed
}

func newAgentsServer(svc *runs.Service, list func() []Agent, o *Options) *agentsServer {
	a := &agentsServer{svc: svc, list: list, opts: o}
	a.server = mcp.NewServer(&mcp.Implementation{Name: "agentry-agents", Title: "agentry agents", Version: o.Version},
		&mcp.ServerOptions{
			Instructions: "Each tool is an agent served by agentry: call it with {\"input\": your message}; the result is its answer. " +
				"Its tool calls are governed: a run that needs a human's approval pauses, and the result says which approval it waits for.",
			Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
			SupportedProtocolVersions: legacyVersions,
			Logger:                    sdkLogger(o.Logger),
		})
	a.sync()
	a.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				a.sync()
			case "tools/call":
				a.sync()
				return a.call(ctx, req.(*mcp.CallToolRequest))
			}
			return next(ctx, method, req)
		}
	})
	return a
}

// sync makes the tools those of the agents list returns now.
func (a *agentsServer) sync() {
	now := slices.Clone(a.list())
	slices.SortFunc(now, func(x, y Agent) int { return strings.Compare(x.Name, y.Name) })
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Equal(now, a.served) {
		return
	}
	var gone []string
	for _, old := range a.served {
		if !slices.ContainsFunc(now, func(n Agent) bool { return n.Name == old.Name }) {
			gone = append(gone, old.Name)
		}
	}
	if len(gone) > 0 {
		a.server.RemoveTools(gone...)
	}
	for _, ag := range now {
		if slices.Contains(a.served, ag) {
			continue
		}
		desc := ag.Description
		if desc == "" {
			desc = "The agent " + ag.Name + "."
		}
		a.server.AddTool(&mcp.Tool{Name: ag.Name, Description: desc,
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{
				"input": map[string]any{"type": "string", "minLength": 1, "description": "the message to the agent"}},
				"required": []any{"input"}, "additionalProperties": false},
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return a.call(ctx, req) // not reached: the middleware answers every call
		})
	}
	a.served = now
}

func (a *agentsServer) agent(name string) (Agent, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.served, func(x Agent) bool { return x.Name == name })
	if i < 0 {
		return Agent{}, false
	}
	return a.served[i], true
}

// call runs the agent as a governed run and answers with its outcome.
func (a *agentsServer) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := req.Params
	ag, ok := a.agent(p.Name)
	if !ok {
		return toolError(fmt.Sprintf("No agent named %q is served", p.Name)), nil
	}
	var in struct {
		Input *string `json:"input"`
	}
	if raw := strings.TrimSpace(string(p.Arguments)); raw == "" || raw[0] != '{' {
		return toolError(`The arguments must be a JSON object: {"input": "your message"}`), nil
	}
	if err := strictjson.Decode(p.Arguments, &in, nil); err != nil || in.Input == nil || *in.Input == "" {
		return toolError(`The agent needs "input": a non-empty string, the message to it`), nil
	}
	run, err := a.svc.Start(ctx, &runs.StartParams{Agent: ag.Name, Input: *in.Input})
	if err != nil {
		return a.runError(ctx, err)
	}
	id := run.RequestID
	var done chan struct{}
	if token := p.GetProgressToken(); token != nil {
		done = make(chan struct{})
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			defer close(done)
			a.progress(pctx, req.Session, token, id)
		}()
	}
	run, err = a.svc.Wait(ctx, id)
	if err != nil {
		return a.runError(ctx, err)
	}
	if done != nil {
		// The run settled: its last events are on their way; let them
		// reach the host before the result does.
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	return runResult(ag, run), nil
}

func (a *agentsServer) runError(ctx context.Context, err error) (*mcp.CallToolResult, error) {
	var re *runs.Error
	switch {
	case errors.As(err, &re) && re.Code != runs.Internal:
		return toolError(re.Message), nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	a.opts.Logger.Error("mcp: an agent run failed", "error", err)
	return toolError("internal error"), nil
}

// progress reports the run's events to the host until the run settles.
func (a *agentsServer) progress(ctx context.Context, ss *mcp.ServerSession, token any, id string) {
	n := 0
	for ev, err := range a.svc.Events(ctx, id, 0) {
		if err != nil {
			return
		}
		msg := eventMessage(ev)
		if msg == "" {
			continue
		}
		n++
		if ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg}) != nil {
			return
		}
		if ev.Type == runs.EventEnded || ev.Type == runs.EventPaused {
			return
		}
	}
}

// eventMessage says what an event reports, briefly; "" skips it (the
// model's streamed text, which the result carries).
func eventMessage(ev *runs.Event) string {
	switch ev.Type {
	case runs.EventRunStarted:
		return "run started"
	case runs.EventPhase:
		return "phase " + string(ev.Phase)
	case runs.EventToolCall:
		return "calling " + ev.Tool
	case runs.EventToolResult:
		return ev.Tool + ": " + string(ev.Outcome)
	case runs.EventToolBlocked:
		return ev.Tool + " blocked"
	case runs.EventApprovalRequested:
		return "waiting for approval " + ev.ApprovalID + " of " + ev.Tool
	case runs.EventApprovalDecided:
		return "approval " + ev.ApprovalID + " decided"
	case runs.EventPaused:
		return "paused for approval"
	case runs.EventResumed:
		return "resumed"
	case runs.EventRollback:
		return "rolling back " + ev.Tool
	case runs.EventEnded:
		return "ended: " + string(ev.Status)
	}
	return ""
}

// runResult is a settled run as a tool result.
func runResult(ag Agent, run *runs.Run) *mcp.CallToolResult {
	meta := mcp.Meta{metaRun: run.RequestID}
	switch run.Status {
	case runs.Delivered:
		r := &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: run.Output}}}
		if ag.Structured {
			var obj map[string]any
			if json.Unmarshal([]byte(run.Output), &obj) == nil && obj != nil {
				r.StructuredContent = obj
			}
		}
		return r
	case runs.Paused:
		msg := fmt.Sprintf("The run %s is paused: a tool call waits for a human's approval (%s). "+
			"An approver decides it (POST /v1/approvals/{id}, or agentry approve ID); the run then goes on, "+
			"and GET /v1/runs/%s reports its outcome.", run.RequestID, strings.Join(run.PendingApprovals, ", "), run.RequestID)
		return &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: msg}},
			StructuredContent: map[string]any{"request_id": run.RequestID, "status": string(run.Status), "pending_approvals": nonNil(run.PendingApprovals)}}
	}
	var reasons []string
	for _, r := range run.Reasons {
		reasons = append(reasons, string(r))
	}
	msg := fmt.Sprintf("The run %s failed safe (%s): its writes were rolled back", run.RequestID, strings.Join(reasons, ", "))
	if run.Error != nil && run.Error.Message != "" {
		msg += ": " + run.Error.Message
	}
	r := toolError(msg)
	r.Meta = meta
	return r
}
