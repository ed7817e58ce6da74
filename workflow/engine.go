package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/domainmetrics"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/unavailable"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Actions of POST /execute (UAIP-0.1).
const (
	ActionMethodCall      = "method_call"
	ActionStageTransition = "stage_transition"
	ActionStateInput      = "state_input"
)

// ExecuteRequest is the body of POST /execute.
type ExecuteRequest struct {
	WorkflowName string         `json:"workflow_name"`
	Action       string         `json:"action"`
	Task         string         `json:"task,omitempty"`
	Args         map[string]any `json:"args,omitempty"`
	Stage        string         `json:"stage,omitempty"`
	StateUpdates map[string]any `json:"state_updates,omitempty"`
}

// ExecuteResult is the outcome of an action: the session after it (which
// the caller must not modify) and, for a method call, the task's result.
type ExecuteResult struct {
	Session *Session
	Action  string
	Result  any
}

// EngineOptions configures an Engine; the zero value works.
type EngineOptions struct {
	// SessionTTL is how long a session lives after its last use; 0 means
	// 24 hours, a negative value forever.
	SessionTTL time.Duration
	// TaskTimeout bounds one task run; 0 means 60 seconds.
	TaskTimeout time.Duration
	// Logger receives task failures and expiry sweeps; nil uses
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// CacheSessions keeps up to this many sessions in memory after each
	// write, saving the store read before the next action. Only for a
	// store this engine alone writes (SQLite, memory): with several server
	// processes on one store, a stale cached session makes the next write
	// lose its compare-and-swap (409). 0 disables the cache.
	CacheSessions int
	// MeterProvider counts the sessions initialised
	// (agentry.uaip.sessions, by workflow); nil is the global provider.
	MeterProvider metric.MeterProvider
}

// Engine runs UAIP workflows: it holds the registered workflows and
// drives sessions through them, persisting every change in a
// SessionStore before reporting it. It is safe for concurrent use: actions
// on one session are serialized, different sessions run in parallel.
type Engine struct {
	store   SessionStore
	opts    EngineOptions
	logger  *slog.Logger
	metrics *domainmetrics.Metrics

	mu        sync.RWMutex
	workflows map[string]*Workflow

	locksMu sync.Mutex
	locks   map[string]*sessionLock

	cacheMu sync.Mutex
	cache   map[string]*Session
}

type sessionLock struct {
	mu   sync.Mutex
	refs int
}

// NewEngine returns an engine over store; opts may be nil.
func NewEngine(store SessionStore, opts *EngineOptions) *Engine {
	e := &Engine{store: store, workflows: map[string]*Workflow{}, locks: map[string]*sessionLock{}, cache: map[string]*Session{}}
	if opts != nil {
		e.opts = *opts
	}
	e.metrics = domainmetrics.Of(e.opts.MeterProvider)
	if e.opts.SessionTTL == 0 {
		e.opts.SessionTTL = 24 * time.Hour
	}
	if e.opts.TaskTimeout == 0 {
		e.opts.TaskTimeout = 60 * time.Second
	}
	if e.opts.Now == nil {
		e.opts.Now = time.Now
	}
	e.logger = e.opts.Logger
	if e.logger == nil {
		e.logger = slog.Default()
	}
	return e
}

// Register validates w (see Workflow.Validate) and makes it available;
// a workflow of the same name is replaced.
func (e *Engine) Register(w *Workflow) error {
	if err := w.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	e.workflows[w.Name] = w
	e.mu.Unlock()
	return nil
}

// Workflow returns a registered workflow.
func (e *Engine) Workflow(name string) (*Workflow, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	w, ok := e.workflows[name]
	return w, ok
}

// Workflows returns the registered workflows sorted by name.
func (e *Engine) Workflows() []*Workflow {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*Workflow, 0, len(e.workflows))
	for _, w := range e.workflows {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Store returns the engine's session store.
func (e *Engine) Store() SessionStore { return e.store }

func (e *Engine) expiry(now time.Time) time.Time {
	if e.opts.SessionTTL < 0 {
		return time.Time{}
	}
	return now.Add(e.opts.SessionTTL)
}

// Initialize starts a session of the named workflow at its initial stage
// (POST /initialize). The session is stored durably before it returns.
func (e *Engine) Initialize(ctx context.Context, workflowName string) (*Session, error) {
	w, ok := e.Workflow(workflowName)
	if !ok {
		return nil, newError(ErrWorkflowNotFound, fmt.Sprintf("Workflow '%s' not found", workflowName))
	}
	now := e.now()
	s := &Session{ID: ids.New(), Workflow: w.Name, Stage: w.InitialStage, State: map[string]any{},
		Version: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: e.expiry(now)}
	if err := e.store.Create(ctx, s); err != nil {
		return nil, e.storeError("create", err)
	}
	e.metrics.UAIPSession(ctx, w.Name)
	return s, nil
}

// Session returns a session (GET /api/sessions/{id}).
func (e *Engine) Session(ctx context.Context, id string) (*Session, error) {
	s, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, e.storeError("get", err)
	}
	if s.Expired(e.opts.Now()) { // stores check with their clock; the engine with its own
		return nil, newError(ErrSessionNotFound, "Session not found")
	}
	return s, nil
}

// DeleteSession ends a session (DELETE /api/sessions/{id}).
func (e *Engine) DeleteSession(ctx context.Context, id string) error {
	if _, err := e.Session(ctx, id); err != nil {
		return err
	}
	e.uncache(id)
	if err := e.store.Delete(ctx, id); err != nil {
		return e.storeError("delete", err)
	}
	return nil
}

// SweepExpired deletes expired sessions.
func (e *Engine) SweepExpired(ctx context.Context) (int, error) {
	return e.store.DeleteExpired(ctx, e.opts.Now().UTC())
}

func (e *Engine) storeError(op string, err error) error {
	switch {
	case errors.Is(err, ErrSessionNotFound):
		return newError(ErrSessionNotFound, "Session not found")
	case errors.Is(err, ErrConflict):
		return newError(ErrConflict, "The session was changed concurrently; retry the action")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case unavailable.Is(err):
		e.logger.Warn("workflow: session store unavailable", "op", op, "error", err)
		ue := newError(errUnavailable, "The session store is unavailable; retry shortly")
		ue.cause = err
		return ue
	}
	e.logger.Error("workflow: session store failed", "op", op, "error", err)
	return newError(ErrInternal, "internal error")
}

func (e *Engine) lock(id string) func() {
	e.locksMu.Lock()
	l := e.locks[id]
	if l == nil {
		l = &sessionLock{}
		e.locks[id] = l
	}
	l.refs++
	e.locksMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		e.locksMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(e.locks, id)
		}
		e.locksMu.Unlock()
	}
}

// Execute performs an action on a session (POST /execute). Actions on one
// session run one at a time; the session's new stage and state are stored
// durably before Execute returns. Errors are *Error.
func (e *Engine) Execute(ctx context.Context, sessionID string, req *ExecuteRequest) (*ExecuteResult, error) {
	if sessionID == "" {
		return nil, newError(ErrMissingSession, "Missing X-Session-Id header")
	}
	if req == nil || req.WorkflowName == "" {
		return nil, newError(ErrBadRequest, "workflow_name is required")
	}
	w, ok := e.Workflow(req.WorkflowName)
	if !ok {
		return nil, newError(ErrWorkflowNotFound, fmt.Sprintf("Workflow '%s' not found", req.WorkflowName))
	}
	unlock := e.lock(sessionID)
	defer unlock()
	cur := e.cached(sessionID)
	if cur == nil || cur.Expired(e.opts.Now()) {
		var err error
		if cur, err = e.Session(ctx, sessionID); err != nil {
			return nil, err
		}
	}
	if cur.Workflow != w.Name {
		return nil, newError(ErrBadRequest, fmt.Sprintf("Session belongs to workflow '%s', not '%s'", cur.Workflow, w.Name))
	}
	switch req.Action {
	case ActionMethodCall, ActionStageTransition, ActionStateInput:
	default:
		return nil, &Error{Status: statusOf[ErrInvalidAction], kind: ErrInvalidAction,
			Detail:  fmt.Sprintf("Invalid action type '%s'", req.Action),
			Allowed: []string{ActionMethodCall, ActionStageTransition, ActionStateInput}}
	}
	stage := w.Stages[cur.Stage]
	if stage == nil { // the workflow was re-registered without this stage
		return nil, newError(ErrInvalidTransition, fmt.Sprintf("Session is at stage '%s', which workflow '%s' no longer has", cur.Stage, w.Name))
	}
	// cur is never modified (it may be the cache's); changes go to a clone.
	next := cur
	res := &ExecuteResult{Action: req.Action}
	changed := false
	var err error
	switch req.Action {
	case ActionMethodCall:
		var updates map[string]any
		if res.Result, updates, err = e.callTask(ctx, w, stage, cur, req); err != nil {
			return nil, err
		}
		if len(updates) > 0 {
			next = cur.Clone()
			if changed, err = applyUpdates(next.State, updates); err != nil {
				ie := newError(ErrInternal, "internal error")
				ie.cause = fmt.Errorf("task %s returned state updates: %w", req.Task, err)
				return nil, ie
			}
		}
	case ActionStageTransition:
		next = cur.Clone()
		if err := transition(w, next, req.Stage); err != nil {
			return nil, err
		}
		changed = next.Stage != cur.Stage
	case ActionStateInput:
		if req.StateUpdates == nil {
			return nil, newError(ErrBadRequest, "state_updates must be an object")
		}
		next = cur.Clone()
		if changed, err = applyUpdates(next.State, req.StateUpdates); err != nil {
			return nil, newError(ErrBadRequest, err.Error())
		}
	}
	now := e.now()
	if !changed && !e.refreshDue(cur, now) {
		// Nothing to persist: a read-only action costs no write. The
		// session's expiry is extended lazily (refreshDue).
		res.Session = cur
		return res, nil
	}
	if next == cur {
		next = cur.Clone()
	}
	next.Version, next.UpdatedAt, next.ExpiresAt = cur.Version+1, now, e.expiry(now)
	if err := e.store.Update(ctx, next); err != nil {
		e.uncache(sessionID)
		return nil, e.storeError("update", err)
	}
	e.remember(next)
	res.Session = next
	return res, nil
}

// cached returns the cached session (never to be modified), or nil.
func (e *Engine) cached(id string) *Session {
	if e.opts.CacheSessions <= 0 {
		return nil
	}
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	return e.cache[id]
}

func (e *Engine) remember(s *Session) {
	if e.opts.CacheSessions <= 0 {
		return
	}
	c := s.Clone()
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	if _, ok := e.cache[s.ID]; !ok && len(e.cache) >= e.opts.CacheSessions {
		for k := range e.cache { // evict an arbitrary entry
			delete(e.cache, k)
			break
		}
	}
	e.cache[s.ID] = c
}

func (e *Engine) uncache(id string) {
	if e.opts.CacheSessions <= 0 {
		return
	}
	e.cacheMu.Lock()
	delete(e.cache, id)
	e.cacheMu.Unlock()
}

// jsonNative reports whether v is made only of the values encoding/json
// decodes into (so storing it needs no conversion).
func jsonNative(v any) bool {
	switch x := v.(type) {
	case nil, string, float64, bool:
		return true
	case map[string]any:
		for _, e := range x {
			if !jsonNative(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !jsonNative(e) {
				return false
			}
		}
		return true
	}
	return false
}

// now is the engine's clock at the stores' resolution (milliseconds).
func (e *Engine) now() time.Time { return e.opts.Now().UTC().Truncate(time.Millisecond) }

// refreshDue reports whether an unchanged session's expiry should be
// pushed back now: when more than 1% of the TTL (at most a minute) has
// passed since it was last set.
func (e *Engine) refreshDue(s *Session, now time.Time) bool {
	if e.opts.SessionTTL < 0 || s.ExpiresAt.IsZero() {
		return false
	}
	slack := min(e.opts.SessionTTL/100, time.Minute)
	return s.ExpiresAt.Sub(now) < e.opts.SessionTTL-slack
}

func transition(w *Workflow, s *Session, to string) error {
	if to == "" {
		return newError(ErrBadRequest, "stage is required for stage_transition")
	}
	if !w.CanTransition(s.Stage, to) {
		return &Error{Status: statusOf[ErrInvalidTransition], kind: ErrInvalidTransition,
			Detail:  fmt.Sprintf("Invalid transition from '%s' to '%s'", s.Stage, to),
			Allowed: slices.Clone(w.Transitions[s.Stage])}
	}
	var missing []string
	for _, k := range w.Stages[to].Prerequisites {
		if _, ok := s.State[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return &Error{Status: statusOf[ErrPrerequisites], kind: ErrPrerequisites, Missing: missing,
			Detail: fmt.Sprintf("Cannot enter stage '%s': missing state %s", to, strings.Join(quoteAll(missing), ", "))}
	}
	s.Stage = to
	return nil
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "'" + x + "'"
	}
	return out
}

// applyUpdates sets keys (a null value deletes the key) and reports
// whether any key was set or deleted. Values are stored in their JSON form
// (numbers as float64, structs as maps) — what every store gives back — so
// a session reads the same whichever store or cache it comes from.
func applyUpdates(state, updates map[string]any) (bool, error) {
	changed := false
	for k, v := range updates {
		if v == nil {
			if _, ok := state[k]; ok {
				delete(state, k)
				changed = true
			}
			continue
		}
		if !jsonNative(v) {
			b, err := json.Marshal(v)
			if err != nil {
				return false, fmt.Errorf("state key %q: value is not JSON: %w", k, err)
			}
			v = nil
			if err := json.Unmarshal(b, &v); err != nil {
				return false, fmt.Errorf("state key %q: %w", k, err)
			}
		}
		state[k] = v
		changed = true
	}
	return changed, nil
}

func (e *Engine) callTask(ctx context.Context, w *Workflow, stage *Stage, s *Session, req *ExecuteRequest) (result any, updates map[string]any, err error) {
	if req.Task == "" {
		return nil, nil, newError(ErrBadRequest, "task is required for method_call")
	}
	t := stage.Tasks[req.Task]
	if t == nil {
		t = w.compensators[req.Task] // a compensating task runs in any stage
	}
	if t == nil {
		return nil, nil, &Error{Status: statusOf[ErrTaskNotInStage], kind: ErrTaskNotInStage,
			Detail:  fmt.Sprintf("Task '%s' not available in stage '%s'", req.Task, stage.Name),
			Allowed: sortedKeys(stage.Tasks)}
	}
	args := req.Args
	if args == nil {
		args = map[string]any{}
	}
	if fes := validateArgs(t.params, args); len(fes) > 0 {
		return nil, nil, &Error{Status: statusOf[ErrInvalidArguments], kind: ErrInvalidArguments, Errors: fes,
			Detail: fmt.Sprintf("Invalid arguments for task '%s': %s", t.Name, fes[0])}
	}
	tctx, cancel := context.WithTimeout(ctx, e.opts.TaskTimeout)
	defer cancel()
	resp, err := runTask(tctx, t, &TaskRequest{SessionID: s.ID, Workflow: w.Name, Stage: stage.Name, Task: t.Name, Args: args, State: maps.Clone(s.State)})
	if err != nil {
		var we *Error
		switch {
		case errors.As(err, &we):
			return nil, nil, we
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			return nil, nil, newError(ErrTaskUnavailable, fmt.Sprintf("Task '%s' did not finish within %s", t.Name, e.opts.TaskTimeout))
		}
		var pe *taskPanic
		if errors.As(err, &pe) {
			e.logger.Error("workflow: task panicked", "workflow", w.Name, "task", t.Name, "panic", pe.value, "stack", string(pe.stack))
			return nil, nil, newError(ErrInternal, "internal error")
		}
		return nil, nil, newError(ErrTaskFailed, fmt.Sprintf("Task '%s' failed: %v", t.Name, err))
	}
	if resp == nil {
		return nil, nil, nil
	}
	return resp.Result, resp.StateUpdates, nil
}

type taskPanic struct {
	value any
	stack []byte
}

func (p *taskPanic) Error() string { return fmt.Sprintf("task panicked: %v", p.value) }

func runTask(ctx context.Context, t *Task, req *TaskRequest) (resp *TaskResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &taskPanic{value: r, stack: debug.Stack()}
		}
	}()
	return t.Run(ctx, req)
}

var printer = message.NewPrinter(language.English)

// validateArgs checks args against the compiled schema and returns the
// failures with JSON Pointer paths, sorted.
func validateArgs(sch *jsonschema.Schema, args map[string]any) []FieldError {
	if sch == nil {
		return nil
	}
	err := sch.Validate(map[string]any(args)) // decoded JSON values are what the validator takes
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []FieldError{{Path: "", Message: err.Error()}}
	}
	var out []FieldError
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			out = append(out, FieldError{Path: pointer(v.InstanceLocation), Message: v.ErrorKind.LocalizedString(printer)})
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Message < out[j].Message
	})
	return out
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// ErrListUnsupported is returned by Engine.ListSessions when the
// engine's SessionStore is not a SessionLister.
var ErrListUnsupported = errors.New("workflow: the session store cannot list sessions")

// ListSessions returns a page of the live sessions of a workflow, newest
// first (see SessionLister): at most limit (1 to 1000), after cursor.
func (e *Engine) ListSessions(ctx context.Context, workflow, cursor string, limit int) ([]*Session, string, error) {
	l, ok := e.store.(SessionLister)
	if !ok {
		return nil, "", ErrListUnsupported
	}
	if limit < 1 || limit > 1000 {
		return nil, "", fmt.Errorf("workflow: limit %d is not between 1 and 1000", limit)
	}
	if _, _, err := ParseSessionCursor(cursor); err != nil {
		return nil, "", err
	}
	return l.ListSessions(ctx, workflow, cursor, limit)
}
