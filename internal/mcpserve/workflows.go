package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/agentry-dev/agentry/workflow"
)

// The tools every workflow session has besides its stage's tasks.
const (
	toolTransition = "stage_transition"
	toolStateInput = "state_input"
)

// SessionURI is the URI of a workflow session's resource: its stage and
// state.
func SessionURI(workflowName string) string { return "workflow://" + workflowName + "/session" }

// Workflows serves the workflows of e over MCP (Streamable HTTP): mount
// it at a pattern with a {name} wildcard naming the workflow, such as
// "/mcp/workflows/{name}". Each MCP session is a UAIP session of the
// workflow, begun at initialize and ended with the MCP session (DELETE,
// or SessionTimeout without a request).
func Workflows(e *workflow.Engine, opts *Options) *Handler {
	o := opts.withDefaults()
	h := &workflowsHandler{engine: e, opts: o, sessions: map[string]*wfSession{}}
	h.probe = mcp.NewServer(&mcp.Implementation{Name: "agentry", Version: o.Version},
		&mcp.ServerOptions{SupportedProtocolVersions: legacyVersions, Logger: sdkLogger(o.Logger)})
	h.sdk = mcp.NewStreamableHTTPHandler(h.getServer, streamableOptions(&o, true))
	return &Handler{h: guard(&o, h), close: h.closeAll}
}

// closeAll closes every MCP session (their UAIP sessions end).
func (h *workflowsHandler) closeAll() {
	h.mu.Lock()
	all := slices.Collect(maps.Values(h.sessions))
	h.mu.Unlock()
	for _, ws := range all {
		ws.mu.Lock()
		ss := ws.ss
		ws.mu.Unlock()
		if ss != nil {
			ss.Close()
		}
		ws.end()
	}
}

type workflowsHandler struct {
	engine *workflow.Engine
	opts   Options
	sdk    *mcp.StreamableHTTPHandler
	// probe answers the SDK's protocol version check of requests in an
	// existing session (the SDK asks getServer before it looks the
	// session up); it serves no session.
	probe *mcp.Server
	tools sync.Map // toolsKey → []*mcp.Tool

	mu       sync.Mutex
	sessions map[string]*wfSession // by MCP session ID
	opening  int                   // sessions created, not yet initialized
}

// slotKey keys the request context's newSlot.
type slotKey struct{}

// newSlot holds the server made for a request that opens a session: the
// SDK asks getServer for it more than once.
type newSlot struct{ ws *wfSession }

func (h *workflowsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := h.engine.Workflow(name); !ok {
		http.Error(w, fmt.Sprintf("Not Found: no workflow %q", name), http.StatusNotFound)
		return
	}
	id := r.Header.Get(headerSessionID)
	if id == "" {
		if r.Method == http.MethodPost {
			h.mu.Lock()
			full := len(h.sessions)+h.opening >= h.opts.MaxSessions
			h.mu.Unlock()
			if full {
				tooMany(w)
				return
			}
			slot := &newSlot{}
			r = r.WithContext(context.WithValue(r.Context(), slotKey{}, slot))
			h.sdk.ServeHTTP(w, r)
			if slot.ws != nil {
				slot.ws.opened()
			}
			return
		}
		h.sdk.ServeHTTP(w, r)
		return
	}
	h.mu.Lock()
	ws := h.sessions[id]
	h.mu.Unlock()
	if ws != nil && ws.wf.Name != name {
		http.Error(w, "Not Found: the session belongs to another workflow", http.StatusNotFound)
		return
	}
	h.sdk.ServeHTTP(w, r)
	if ws != nil && r.Method == http.MethodDelete {
		ws.end() // the UAIP session is gone when DELETE is answered
	}
}

// getServer returns the MCP server of a new session (one per session:
// its tools are its stage's), or the probe for requests in a session.
func (h *workflowsHandler) getServer(r *http.Request) *mcp.Server {
	slot, _ := r.Context().Value(slotKey{}).(*newSlot)
	if slot == nil {
		return h.probe
	}
	if slot.ws == nil {
		wf, ok := h.engine.Workflow(r.PathValue("name"))
		if !ok {
			return nil
		}
		slot.ws = h.newSession(wf)
	}
	return slot.ws.server
}

// wfSession is one MCP session: one UAIP session of a workflow.
type wfSession struct {
	h      *workflowsHandler
	wf     *workflow.Workflow
	uri    string
	server *mcp.Server

	mu        sync.Mutex
	uaipID    string // "" until initialize
	mcpID     string
	ss        *mcp.ServerSession
	version   int64
	toolStage string // the stage whose tools the server lists
	toolsWF   *workflow.Workflow
	listed    []string // their names
	ended     bool
}

func (h *workflowsHandler) newSession(wf *workflow.Workflow) *wfSession {
	h.mu.Lock()
	h.opening++
	h.mu.Unlock()
	return newWFSession(h, wf)
}

func newWFSession(h *workflowsHandler, wf *workflow.Workflow) *wfSession {
	ws := &wfSession{h: h, wf: wf, uri: SessionURI(wf.Name)}
	ws.server = mcp.NewServer(&mcp.Implementation{Name: "agentry-workflow-" + wf.Name, Title: wf.Name, Version: h.opts.Version},
		&mcp.ServerOptions{
			Instructions: instructions(wf),
			Capabilities: &mcp.ServerCapabilities{
				Tools:     &mcp.ToolCapabilities{ListChanged: true},
				Resources: &mcp.ResourceCapabilities{Subscribe: true},
			},
			SubscribeHandler:          ws.checkURI,
			UnsubscribeHandler:        func(ctx context.Context, _ *mcp.UnsubscribeRequest) error { return nil },
			SupportedProtocolVersions: legacyVersions,
			Logger:                    sdkLogger(h.opts.Logger),
		})
	ws.server.AddResource(&mcp.Resource{URI: ws.uri, Name: "session", MIMEType: "application/json",
		Description: "This session of workflow " + wf.Name + ": its current stage, the stages it may move to and its state."}, ws.readResource)
	ws.setTools(wf, wf.InitialStage)
	ws.server.AddReceivingMiddleware(ws.middleware)
	return ws
}

func instructions(wf *workflow.Workflow) string {
	var b strings.Builder
	b.WriteString("Workflow " + wf.Name)
	if wf.Description != "" {
		b.WriteString(": " + wf.Description)
	}
	b.WriteString("\nThe tools are the current stage's tasks. Move between stages with stage_transition; " +
		"give the values a stage needs with state_input. The tool list changes with the stage " +
		"(notifications/tools/list_changed); the resource " + SessionURI(wf.Name) + " shows the stage and state.")
	return b.String()
}

// opened ends the count of a session being created: it is either
// initialized (tracked) or was refused.
func (ws *wfSession) opened() {
	h := ws.h
	h.mu.Lock()
	h.opening--
	h.mu.Unlock()
}

func (ws *wfSession) checkURI(_ context.Context, req *mcp.SubscribeRequest) error {
	if req.Params.URI != ws.uri {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	return nil
}

func (ws *wfSession) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			// The UAIP session first: if it cannot begin, initialize fails
			// and the SDK closes the MCP session.
			if err := ws.begin(ctx, req.GetSession().(*mcp.ServerSession)); err != nil {
				return nil, err
			}
		case "tools/call":
			return ws.call(ctx, req.(*mcp.CallToolRequest).Params)
		case "tools/list":
			ws.refresh(ctx)
		}
		return next(ctx, method, req)
	}
}

// begin starts the UAIP session of an MCP session being initialized,
// and ends it when the MCP session ends.
func (ws *wfSession) begin(ctx context.Context, ss *mcp.ServerSession) error {
	ws.mu.Lock()
	started := ws.uaipID != ""
	ws.mu.Unlock()
	if started {
		return errors.New("the session is already initialized")
	}
	s, err := ws.h.engine.Initialize(ctx, ws.wf.Name)
	if err != nil {
		ws.h.opts.Logger.Warn("mcp: beginning a UAIP session failed", "workflow", ws.wf.Name, "error", err)
		return errors.New("the workflow session could not begin; retry shortly")
	}
	ws.mu.Lock()
	ws.uaipID, ws.version, ws.mcpID, ws.ss = s.ID, s.Version, ss.ID(), ss
	ws.mu.Unlock()
	if ws.mcpID != "" { // stdio has no session ID: ServeStdio ends it
		h := ws.h
		h.mu.Lock()
		h.sessions[ws.mcpID] = ws
		h.mu.Unlock()
		go func() {
			ss.Wait()
			ws.end()
		}()
	}
	return nil
}

// end ends the UAIP session (once).
func (ws *wfSession) end() {
	ws.mu.Lock()
	if ws.ended || ws.uaipID == "" {
		ws.mu.Unlock()
		return
	}
	ws.ended = true
	id := ws.uaipID
	ws.mu.Unlock()
	h := ws.h
	h.mu.Lock()
	if h.sessions[ws.mcpID] == ws {
		delete(h.sessions, ws.mcpID)
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.engine.DeleteSession(ctx, id); err != nil && !errors.Is(err, workflow.ErrSessionNotFound) {
		h.opts.Logger.Warn("mcp: ending a UAIP session failed (it expires unused)", "session", id, "error", err)
	}
}

func (ws *wfSession) uaip() string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.uaipID
}

// refresh follows a change made outside this MCP session (over UAIP, or
// by another replica): the tools listed are those of the stored stage.
func (ws *wfSession) refresh(ctx context.Context) {
	id := ws.uaip()
	if id == "" {
		return
	}
	s, err := ws.h.engine.Session(ctx, id)
	if err != nil {
		return // a call reports it
	}
	ws.observe(ctx, s)
}

// observe brings the tools and the resource's subscribers up to date
// with s.
func (ws *wfSession) observe(ctx context.Context, s *workflow.Session) {
	wf, ok := ws.h.engine.Workflow(ws.wf.Name)
	if !ok {
		return
	}
	ws.setTools(wf, s.Stage)
	ws.mu.Lock()
	changed := s.Version > ws.version
	if changed {
		ws.version = s.Version
	}
	ws.mu.Unlock()
	if changed {
		ws.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: ws.uri})
	}
}

// setTools makes the server list the tools of stage; a change sends
// notifications/tools/list_changed (the SDK does, debounced).
func (ws *wfSession) setTools(wf *workflow.Workflow, stage string) {
	ws.mu.Lock()
	if ws.toolStage == stage && ws.toolsWF == wf {
		ws.mu.Unlock()
		return
	}
	ws.toolStage, ws.toolsWF = stage, wf
	old := ws.listed
	tools := ws.h.stageTools(wf, stage)
	ws.listed = make([]string, len(tools))
	for i, t := range tools {
		ws.listed[i] = t.Name
	}
	var gone []string
	for _, n := range old {
		if !slices.Contains(ws.listed, n) {
			gone = append(gone, n)
		}
	}
	// Under ws.mu, so that two changes are applied in order.
	if len(gone) > 0 {
		ws.server.RemoveTools(gone...)
	}
	for _, t := range tools {
		ws.server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Not reached: the middleware answers every call.
			r, err := ws.call(ctx, req.Params)
			if err != nil {
				return nil, err
			}
			return r.(*mcp.CallToolResult), nil
		})
	}
	ws.mu.Unlock()
}

// call runs a tool call as UAIP's /execute runs the action: a refusal is
// a result with isError and UAIP's message.
func (ws *wfSession) call(ctx context.Context, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	id := ws.uaip()
	if id == "" {
		return nil, errors.New("the session is not initialized")
	}
	args := map[string]any{}
	if raw := strings.TrimSpace(string(p.Arguments)); raw != "" && raw != "null" {
		if raw[0] != '{' {
			return toolError("The arguments must be a JSON object"), nil
		}
		if err := strictjson.Decode(p.Arguments, &args, nil); err != nil {
			return toolError("The arguments are not valid JSON: " + err.Error()), nil
		}
	}
	req := &workflow.ExecuteRequest{WorkflowName: ws.wf.Name}
	switch p.Name {
	case toolTransition:
		stage, ok := args["stage"].(string)
		if !ok {
			return toolError("stage_transition needs \"stage\": the name of the stage to move to"), nil
		}
		req.Action, req.Stage = workflow.ActionStageTransition, stage
	case toolStateInput:
		updates, ok := args["state_updates"].(map[string]any)
		if !ok {
			return toolError("state_input needs \"state_updates\": an object of the state keys to set (null deletes a key)"), nil
		}
		req.Action, req.StateUpdates = workflow.ActionStateInput, updates
	default:
		req.Action, req.Task, req.Args = workflow.ActionMethodCall, p.Name, args
	}
	res, err := ws.h.engine.Execute(ctx, id, req)
	if err != nil {
		var we *workflow.Error
		switch {
		case errors.As(err, &we):
			return toolError(refusal(we)), nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		ws.h.opts.Logger.Error("mcp: a workflow call failed", "workflow", ws.wf.Name, "tool", p.Name, "error", err)
		return toolError("internal error"), nil
	}
	ws.observe(ctx, res.Session)
	var structured any
	if req.Action == workflow.ActionMethodCall {
		b, err := json.Marshal(res.Result)
		if err != nil {
			ws.h.opts.Logger.Error("mcp: a task result is not JSON", "workflow", ws.wf.Name, "task", p.Name, "error", err)
			return toolError("internal error"), nil
		}
		if len(b) > 0 && b[0] == '{' {
			return structuredResult(json.RawMessage(b), b), nil
		}
		structured = map[string]any{"result": json.RawMessage(b)}
	} else {
		structured = sessionView(ws.h.stageTools, ws.wf, res.Session)
	}
	b, err := json.Marshal(structured)
	if err != nil {
		return toolError("internal error"), nil
	}
	return structuredResult(structured, b), nil
}

func structuredResult(structured any, text []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{StructuredContent: structured, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// refusal renders UAIP's refusal for the model: its detail, and what
// would have been valid.
func refusal(e *workflow.Error) string {
	msg := e.Detail
	if len(e.Errors) > 1 {
		var fs []string
		for _, f := range e.Errors {
			fs = append(fs, f.String())
		}
		msg += " (" + strings.Join(fs, "; ") + ")"
	}
	if len(e.Allowed) > 0 {
		msg += "; allowed: " + strings.Join(e.Allowed, ", ")
	}
	return msg
}

// sessionView is what stage_transition, state_input and the session
// resource report: where the session stands and what it can do there.
func sessionView(tools func(*workflow.Workflow, string) []*mcp.Tool, wf *workflow.Workflow, s *workflow.Session) map[string]any {
	var names []string
	for _, t := range tools(wf, s.Stage) {
		if t.Name != toolTransition && t.Name != toolStateInput {
			names = append(names, t.Name)
		}
	}
	state := s.State
	if state == nil {
		state = map[string]any{}
	}
	v := map[string]any{"session_id": s.ID, "workflow": s.Workflow, "current_stage": s.Stage, "version": s.Version,
		"state": state, "tasks": nonNil(names), "transitions": nonNil(slices.Clone(wf.Transitions[s.Stage]))}
	if st := wf.Stages[s.Stage]; st != nil && st.Description != "" {
		v["description"] = st.Description
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (ws *wfSession) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	if req.Params.URI != ws.uri {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	id := ws.uaip()
	if id == "" {
		return nil, errors.New("the session is not initialized")
	}
	s, err := ws.h.engine.Session(ctx, id)
	if err != nil {
		var we *workflow.Error
		if errors.As(err, &we) {
			return nil, errors.New(we.Detail)
		}
		return nil, errors.New("the session could not be read; retry shortly")
	}
	wf, _ := ws.h.engine.Workflow(ws.wf.Name)
	if wf == nil {
		wf = ws.wf
	}
	b, err := json.Marshal(sessionView(ws.h.stageTools, wf, s))
	if err != nil {
		return nil, errors.New("internal error")
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: ws.uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

type toolsKey struct {
	wf    *workflow.Workflow
	stage string
}

// stageTools returns the tools of a stage, made once per workflow and
// stage: its tasks, then stage_transition (when the stage has a way out)
// and state_input.
func (h *workflowsHandler) stageTools(wf *workflow.Workflow, stage string) []*mcp.Tool {
	k := toolsKey{wf, stage}
	if v, ok := h.tools.Load(k); ok {
		return v.([]*mcp.Tool)
	}
	tools := buildStageTools(wf, stage)
	h.tools.Store(k, tools)
	return tools
}

func buildStageTools(wf *workflow.Workflow, stage string) []*mcp.Tool {
	st := wf.Stages[stage]
	var tools []*mcp.Tool
	if st != nil {
		for _, name := range slices.Sorted(maps.Keys(st.Tasks)) {
			if name == toolTransition || name == toolStateInput {
				continue // the workflow's own tools of these names are shadowed
			}
			tools = append(tools, taskTool(st.Tasks[name]))
		}
	}
	if to := wf.Transitions[stage]; len(to) > 0 {
		var b strings.Builder
		b.WriteString("Move the workflow to another stage; the tools change with it. Reachable from '" + stage + "':")
		enum := make([]any, len(to))
		for i, name := range to {
			enum[i] = name
			b.WriteString("\n- " + name)
			if next := wf.Stages[name]; next != nil {
				if next.Description != "" {
					b.WriteString(": " + next.Description)
				}
				if len(next.Prerequisites) > 0 {
					b.WriteString(" (needs state " + strings.Join(next.Prerequisites, ", ") + ": set them with state_input)")
				}
			}
		}
		tools = append(tools, &mcp.Tool{Name: toolTransition, Description: b.String(),
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{
				"stage": map[string]any{"type": "string", "enum": enum}}, "required": []any{"stage"}, "additionalProperties": false},
			Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), IdempotentHint: true, OpenWorldHint: new(false)}})
	}
	tools = append(tools, &mcp.Tool{Name: toolStateInput,
		Description: "Set keys of the workflow session's state (a null value deletes a key): the values a stage needs before it can be entered.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"state_updates": map[string]any{"type": "object", "description": "state keys and their values"}},
			"required": []any{"state_updates"}, "additionalProperties": false},
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), IdempotentHint: true, OpenWorldHint: new(false)}})
	return tools
}

// taskTool is a task as an MCP tool: its parameters are the input
// schema, its returns (when an object) the output schema, and its UAICP
// risk tier the annotations.
func taskTool(t *workflow.Task) *mcp.Tool {
	in := map[string]any(t.Parameters)
	if in == nil {
		in = map[string]any{"type": "object"}
	} else if in["type"] != "object" { // MCP wants an object schema; UAIP's args are an object anyway
		in = maps.Clone(in)
		in["type"] = "object"
	}
	tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: in}
	if t.Returns != nil && t.Returns["type"] == "object" {
		tool.OutputSchema = map[string]any(t.Returns)
	}
	a := &mcp.ToolAnnotations{IdempotentHint: t.Idempotent}
	switch t.Risk {
	case workflow.RiskReadOnly:
		a.ReadOnlyHint = true
	case workflow.RiskWriteLow:
		a.DestructiveHint = new(false)
	case workflow.RiskWriteHigh:
		a.DestructiveHint = new(true)
	}
	tool.Annotations = a
	return tool
}
