package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/httpx"
	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/internal/unavailable"
)

// headerSessionID carries the session on /execute requests and on the
// responses of /initialize and /execute (UAIP-0.1 "Transport").
const headerSessionID = "X-Session-Id"

// DefaultMaxBody bounds request bodies when HandlerOptions.MaxBodyBytes is 0.
const DefaultMaxBody = 1 << 20

// HandlerOptions configures NewHandler; the zero value works: 1 MiB
// bodies, no authentication, CORS off.
type HandlerOptions struct {
	// MaxBodyBytes bounds request bodies (413 beyond); 0 means 1 MiB.
	MaxBodyBytes int64
	// BearerToken, when set, is required as "Authorization: Bearer …" on
	// every endpoint (401 otherwise).
	BearerToken string
	// CORSOrigins lists the origins allowed to call from a browser ("*"
	// for any); empty means no CORS headers at all.
	CORSOrigins []string
	// Logger receives internal errors; nil uses slog.Default().
	Logger *slog.Logger
}

// NewHandler serves UAIP-0.1 for e:
//
//	POST   /initialize               create a session            (spec)
//	POST   /execute                  run an action in a session   (spec)
//	GET    /api/workflows/{name}     a workflow's schema          (spec)
//	GET    /api/workflows            the workflows                (ours)
//	GET    /api/sessions/{id}        a session's stage and state  (ours)
//	DELETE /api/sessions/{id}        end a session                (ours)
//
// Errors are {"detail": …} with the spec's status codes; see
// docs/spec-notes/uaip.md for the shapes and the extras.
func NewHandler(e *Engine, opts *HandlerOptions) http.Handler {
	h := &handler{engine: e}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.MaxBodyBytes <= 0 {
		h.opts.MaxBodyBytes = DefaultMaxBody
	}
	h.logger = h.opts.Logger
	if h.logger == nil {
		h.logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /initialize", h.initialize)
	mux.HandleFunc("POST /execute", h.execute)
	mux.HandleFunc("GET /api/workflows", h.listWorkflows)
	mux.HandleFunc("GET /api/workflows/{name}", h.getWorkflow)
	mux.HandleFunc("GET /api/sessions/{id}", h.getSession)
	mux.HandleFunc("DELETE /api/sessions/{id}", h.deleteSession)
	for _, p := range []string{"/initialize", "/execute", "/api/workflows", "/api/workflows/{name}", "/api/sessions/{id}"} {
		mux.HandleFunc(p, methodNotAllowed)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, detail{Detail: "Not Found"})
	})
	var root http.Handler = mux
	if h.opts.BearerToken != "" {
		root = h.auth(root)
	}
	if len(h.opts.CORSOrigins) > 0 {
		root = h.cors(root)
	}
	return root
}

type handler struct {
	engine *Engine
	opts   HandlerOptions
	logger *slog.Logger
	next   sync.Map // nextKey → json.RawMessage
}

type detail struct {
	Detail string `json:"detail"`
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMethodNotAllowed, detail{Detail: "Method Not Allowed"})
}

func (h *handler) auth(next http.Handler) http.Handler {
	guarded := httpx.Bearer(h.opts.BearerToken, "uaip", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusUnauthorized, detail{Detail: "Unauthorized"})
	}, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && len(h.opts.CORSOrigins) > 0 {
			next.ServeHTTP(w, r) // preflights carry no credentials
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

func (h *handler) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && (slices.Contains(h.opts.CORSOrigins, "*") || slices.Contains(h.opts.CORSOrigins, origin)) {
			hd := w.Header()
			hd.Set("Access-Control-Allow-Origin", origin)
			hd.Add("Vary", "Origin")
			hd.Set("Access-Control-Expose-Headers", headerSessionID)
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				hd.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
				hd.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, "+headerSessionID)
				hd.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// readObject reads a JSON object body into v: 413 beyond the limit, 400
// for anything that is not a JSON object of the expected shape.
func (h *handler) readObject(r *http.Request, v any) error {
	if r.ContentLength > h.opts.MaxBodyBytes {
		return newError(ErrTooLarge, "Request body too large")
	}
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 { // the usual case: read exactly what was announced
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(io.LimitReader(r.Body, h.opts.MaxBodyBytes+1))
	}
	if err != nil {
		return newError(ErrBadRequest, "Could not read the request body")
	}
	if int64(len(body)) > h.opts.MaxBodyBytes {
		return newError(ErrTooLarge, "Request body too large")
	}
	return decodeObject(body, v, int(h.opts.MaxBodyBytes))
}

// decodeObject decodes a request body that must be exactly one JSON
// object, strictly (DESIGN §2): nothing after it, valid UTF-8, no lone
// surrogate escapes, member names matched case-sensitively. Unknown
// members are ignored. A refusal says what is wrong in JSON's terms.
func decodeObject(body []byte, v any, maxSize int) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return newError(ErrBadRequest, "Missing request body")
	}
	if trimmed[0] != '{' { // null too, which encoding/json would take
		return newError(ErrBadRequest, "Request body must be a JSON object")
	}
	err := strictjson.Decode(body, v, &strictjson.Options{MaxSize: maxSize})
	if err == nil {
		return nil
	}
	var e *strictjson.Error
	switch {
	case !errors.As(err, &e): // not reached: Decode's errors are *Error
		return newError(ErrBadRequest, "Invalid request body")
	case e.Reason == strictjson.ErrTrailingData:
		return newError(ErrBadRequest, "Request body must be a single JSON object ("+e.Message+")")
	case e.Reason == strictjson.ErrSyntax:
		return newError(ErrBadRequest, "Invalid JSON in request body: "+e.Error())
	case e.Reason == strictjson.ErrTooLarge:
		return newError(ErrTooLarge, "Request body too large")
	}
	return newError(ErrBadRequest, "Invalid request body: "+e.Error())
}

type initializeRequest struct {
	WorkflowName string `json:"workflow_name"`
}

type initializeResponse struct {
	SessionID    string          `json:"session_id"`
	Workflow     string          `json:"workflow"`
	InitialStage string          `json:"initial_stage"`
	Stages       []string        `json:"stages"`
	Next         json.RawMessage `json:"next"`
}

// InitializeResponse is the body of POST /initialize as Client returns it.
type InitializeResponse struct {
	SessionID    string   `json:"session_id"`
	Workflow     string   `json:"workflow"`
	InitialStage string   `json:"initial_stage"`
	Stages       []string `json:"stages"`
	Next         *Next    `json:"next,omitempty"`
}

func (h *handler) initialize(w http.ResponseWriter, r *http.Request) {
	var req initializeRequest
	if err := h.readObject(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if req.WorkflowName == "" {
		h.fail(w, r, newError(ErrBadRequest, "workflow_name is required"))
		return
	}
	s, err := h.engine.Initialize(r.Context(), req.WorkflowName)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetAttributes(telemetry.UAIPWorkflow.String(s.Workflow), telemetry.UAIPStage.String(s.Stage),
			telemetry.UAIPSession.String(s.ID))
	}
	wf, _ := h.engine.Workflow(s.Workflow)
	w.Header().Set(headerSessionID, s.ID)
	writeJSON(w, http.StatusOK, initializeResponse{SessionID: s.ID, Workflow: s.Workflow, InitialStage: s.Stage,
		Stages: wf.StageNames(), Next: h.nextFor(wf, s.Stage)})
}

// ExecuteResponse is the body of a successful POST /execute as Client
// returns it.
type ExecuteResponse struct {
	SessionID    string          `json:"session_id"`
	Workflow     string          `json:"workflow"`
	Action       string          `json:"action"`
	CurrentStage string          `json:"current_stage"`
	Version      int64           `json:"version"`
	Result       json.RawMessage `json:"result"`
	State        map[string]any  `json:"state"`
	Next         *Next           `json:"next,omitempty"`
}

type executeResponse struct {
	SessionID    string         `json:"session_id"`
	Workflow     string         `json:"workflow"`
	Action       string         `json:"action"`
	CurrentStage string         `json:"current_stage"`
	Version      int64          `json:"version"`
	Result       any            `json:"result"`
	State        map[string]any `json:"state"`
}

func (h *handler) execute(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		h.fail(w, r, newError(ErrMissingSession, "Missing X-Session-Id header"))
		return
	}
	var req ExecuteRequest
	if err := h.readObject(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.engine.Execute(r.Context(), id, &req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	s := res.Session
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetAttributes(telemetry.UAIPWorkflow.String(s.Workflow), telemetry.UAIPStage.String(s.Stage),
			telemetry.UAIPTask.String(res.Action), telemetry.UAIPSession.String(s.ID))
	}
	wf, _ := h.engine.Workflow(s.Workflow)
	w.Header().Set(headerSessionID, s.ID)
	buf := respBufs.Get().(*bytes.Buffer)
	defer putRespBuf(buf)
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(executeResponse{SessionID: s.ID, Workflow: s.Workflow, Action: res.Action,
		CurrentStage: s.Stage, Version: s.Version, Result: res.Result, State: s.State}); err != nil {
		h.fail(w, r, fmt.Errorf("encoding the response: %w", err))
		return
	}
	// Splice the stage's pre-encoded "next" in rather than re-encoding it:
	// the object's closing "}\n" is replaced by ,"next":…}\n.
	next := h.nextFor(wf, s.Stage)
	buf.Truncate(buf.Len() - 2)
	buf.WriteString(`,"next":`)
	buf.Write(next)
	buf.WriteString("}\n")
	h2 := w.Header()
	h2.Set("Content-Type", "application/json")
	h2.Set("Content-Length", strconv.Itoa(buf.Len())) // not chunked, even past net/http's buffer
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// respBufs recycles the buffers /execute responses are encoded into.
var respBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putRespBuf returns a buffer to respBufs unless it grew unusually large
// (a huge result), so one big response does not stay pinned in the pool.
func putRespBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		respBufs.Put(b)
	}
}

// Next is what an agent can do in a stage: its tasks with their schemas
// and the stages it may move to. Every /execute and /initialize response
// carries it, so an agent never needs a second call.
type Next struct {
	Stage       string              `json:"stage"`
	Description string              `json:"description,omitempty"`
	Tasks       map[string]TaskInfo `json:"tasks"`
	Transitions []string            `json:"transitions"`
}

// TaskInfo describes a task to a caller.
type TaskInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  Schema `json:"parameters"`
	Returns     Schema `json:"returns,omitempty"`
	// RiskTier and Rollback extend UAIP with the task's UAICP declaration
	// (docs/spec-notes/uaip.md): a governed agent gates its calls by them.
	RiskTier string        `json:"risk_tier,omitempty"`
	Rollback *TaskRollback `json:"rollback,omitempty"`
}

type nextKey struct {
	wf    *Workflow
	stage string
}

// nextFor returns the encoded nextView of a stage, computed once per
// workflow and stage.
func (h *handler) nextFor(wf *Workflow, stage string) json.RawMessage {
	if wf == nil {
		return json.RawMessage("null")
	}
	k := nextKey{wf, stage}
	if v, ok := h.next.Load(k); ok {
		return v.(json.RawMessage)
	}
	st := wf.Stages[stage]
	if st == nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(Next{Stage: stage, Description: st.Description, Tasks: tasksView(st), Transitions: transitionsOf(wf, stage)})
	if err != nil {
		return json.RawMessage("null")
	}
	h.next.Store(k, json.RawMessage(b))
	return b
}

func tasksView(st *Stage) map[string]TaskInfo {
	out := make(map[string]TaskInfo, len(st.Tasks))
	for name, t := range st.Tasks {
		out[name] = TaskInfo{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Returns: t.Returns,
			RiskTier: t.Risk, Rollback: t.Rollback}
	}
	return out
}

func transitionsOf(wf *Workflow, stage string) []string {
	t := slices.Clone(wf.Transitions[stage])
	if t == nil {
		t = []string{}
	}
	return t
}

// StageInfo is a stage as GET /api/workflows/{name} shows it.
type StageInfo struct {
	Name          string              `json:"name"`
	Description   string              `json:"description"`
	Tasks         map[string]TaskInfo `json:"tasks"`
	Transitions   []string            `json:"transitions"`
	Prerequisites []string            `json:"prerequisites,omitempty"`
}

// WorkflowInfo is the body of GET /api/workflows/{name} (UAIP-0.1).
type WorkflowInfo struct {
	Name         string               `json:"name"`
	Description  string               `json:"description"`
	InitialStage string               `json:"initial_stage"`
	Stages       map[string]StageInfo `json:"stages"`
}

// Info returns the GET /api/workflows/{name} view of w.
func (w *Workflow) Info() *WorkflowInfo {
	v := &WorkflowInfo{Name: w.Name, Description: w.Description, InitialStage: w.InitialStage, Stages: map[string]StageInfo{}}
	for name, st := range w.Stages {
		v.Stages[name] = StageInfo{Name: st.Name, Description: st.Description, Tasks: tasksView(st),
			Transitions: transitionsOf(w, name), Prerequisites: st.Prerequisites}
	}
	return v
}

func (h *handler) getWorkflow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	wf, ok := h.engine.Workflow(name)
	if !ok {
		h.fail(w, r, newError(ErrWorkflowNotFound, "Workflow '"+name+"' not found"))
		return
	}
	writeJSON(w, http.StatusOK, wf.Info())
}

// WorkflowSummary is an entry of GET /api/workflows.
type WorkflowSummary struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	InitialStage string   `json:"initial_stage"`
	Stages       []string `json:"stages"`
}

func (h *handler) listWorkflows(w http.ResponseWriter, r *http.Request) {
	out := []WorkflowSummary{}
	for _, wf := range h.engine.Workflows() {
		out = append(out, WorkflowSummary{wf.Name, wf.Description, wf.InitialStage, wf.StageNames()})
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflows": out})
}

func (h *handler) getSession(w http.ResponseWriter, r *http.Request) {
	s, err := h.engine.Session(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (h *handler) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := h.engine.DeleteSession(r.Context(), r.PathValue("id")); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type errorBody struct {
	Detail  string       `json:"detail"`
	Missing []string     `json:"missing,omitempty"`
	Errors  []FieldError `json:"errors,omitempty"`
	Allowed []string     `json:"allowed,omitempty"`
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return // the client is gone
	}
	e := asError(err)
	if e.Status >= 500 && e.Status != http.StatusServiceUnavailable { // the store's outage is logged by the engine
		cause := error(e)
		if e.cause != nil {
			cause = e.cause
		}
		h.logger.Error("uaip: request failed", "path", r.URL.Path, "status", e.Status, "error", cause)
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", unavailable.RetryAfter)
	}
	writeJSON(w, e.Status, errorBody{Detail: e.Detail, Missing: e.Missing, Errors: e.Errors, Allowed: e.Allowed})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	httpx.WriteJSON(w, status, v, `{"detail":"internal error"}`)
}
