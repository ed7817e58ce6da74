// Package uiapworkflow serves UAIP workflows (package workflow) as UIAP
// apps (package uicontrol): each UIAP session drives one UAIP session of
// a workflow, so one service is reachable by both protocols.
//
// The capability document of a session (docs/spec-notes/uiap.md,
// "Workflows as apps") lists the workflow's stages as states, the
// current one marked; the current stage's tasks, the transitions allowed
// from it and a state input as actions, each with its argument schema
// and risk. Every action runs through the workflow engine, so UAIP's
// stage rules hold; after an action that changed the stage or the state
// the session gets capabilities.changed with the new document.
package uiapworkflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/workflow"
)

// Action IDs besides the tasks, which keep their names.
const (
	// TransitionPrefix prefixes the stage a transition action moves to:
	// "transition:checkout".
	TransitionPrefix = "transition:"
	// ActionStateInput sets session state keys ({"state_updates": {…}}),
	// as UAIP's state_input does.
	ActionStateInput = "state:input"
)

// riskOf maps a task's UAICP risk tier (workflow.Task.Risk) to a UIAP
// risk: read_only is low, write_low_risk medium, write_high_risk high. An
// undeclared or unknown tier is high, as a governed agent treats it.
func riskOf(tier string) uicontrol.Risk {
	switch tier {
	case workflow.RiskReadOnly:
		return uicontrol.RiskLow
	case workflow.RiskWriteLow:
		return uicontrol.RiskMedium
	}
	return uicontrol.RiskHigh
}

// riskRank orders UIAP risks from least to most strict.
var riskRank = map[uicontrol.Risk]int{uicontrol.RiskLow: 1, uicontrol.RiskMedium: 2, uicontrol.RiskHigh: 3}

// Options configures a Server. The zero value works.
type Options struct {
	// App configures each session's uicontrol.App (source, heartbeat,
	// policy, rate limit, logger…). With App.Sessions, a session's
	// stored record also names its workflow and UAIP session, so that a
	// Server sharing the store (another replica) resumes it: it takes up
	// the UAIP session and serves its current document.
	App uicontrol.AppOptions
}

// Server serves one workflow of an engine as a UIAP app. Each connection
// that starts a session gets an app of its own, bound to a new UAIP
// session created when session.initialize arrives; a session.resume is
// routed to the app of the session it names. Serve is the function the
// bindings (uicontrol.NewWSHandler, uicontrol.NewHTTPHandler) take. Its
// methods are safe for concurrent use.
type Server struct {
	engine *workflow.Engine
	wf     *workflow.Workflow
	opts   Options

	mu       sync.Mutex
	sessions map[string]*binding // by UIAP session ID
	live     map[*binding]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// New returns a Server for the workflow named name, which must be
// registered on engine; opts may be nil.
func New(engine *workflow.Engine, name string, opts *Options) (*Server, error) {
	wf, ok := engine.Workflow(name)
	if !ok {
		return nil, fmt.Errorf("uiapworkflow: workflow %q is not registered", name)
	}
	s := &Server{engine: engine, wf: wf, sessions: map[string]*binding{}, live: map[*binding]struct{}{}}
	if opts != nil {
		s.opts = *opts
	}
	return s, nil
}

// workflow returns the served workflow's name.
func (s *Server) workflow() string { return s.wf.Name }

// Serve runs one connection (see uicontrol.App.Serve).
func (s *Server) Serve(ctx context.Context, t uicontrol.Transport) error {
	first, err := t.Receive(ctx)
	if err != nil {
		_ = t.Close()
		return nil
	}
	return s.serve(ctx, t, first)
}

// serve runs a connection whose first message, already received, is
// first.
func (s *Server) serve(ctx context.Context, t uicontrol.Transport, first []byte) error {
	b, refusal := s.route(ctx, first)
	if refusal != nil {
		refuse(ctx, t, first, s.opts.App.Source, refusal)
	}
	if b == nil {
		_ = t.Close()
		return uicontrol.ErrClosed
	}
	err := b.app.Serve(ctx, &tap{Transport: t, b: b, first: first})
	s.release(b)
	return err
}

// knows reports whether the UIAP session id is one of s's.
func (s *Server) knows(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id] != nil
}

// route returns the binding a connection whose first message is first
// belongs to: the resumed session's, one taken up from the store for a
// session another Server started, or a new one. When the store names a
// UAIP session that cannot be taken up it returns no binding and the
// error answering first.
func (s *Server) route(ctx context.Context, first []byte) (*binding, *uicontrol.Error) {
	var m struct {
		Type    string `json:"type"`
		Payload struct {
			SessionID string `json:"sessionId"`
		} `json:"payload"`
	}
	_ = json.Unmarshal(first, &m) // the app decodes it strictly
	id := m.Payload.SessionID
	resume := m.Type == uiapwire.TypeResume && id != ""
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil
	}
	known := s.sessions[id]
	if resume && known != nil && s.opts.App.Sessions == nil {
		known.conns++
		s.mu.Unlock()
		return known, nil
	}
	s.mu.Unlock()
	var taken *binding
	if resume && s.opts.App.Sessions != nil {
		data, version := s.lookup(ctx, id)
		if known != nil && (data == nil || version == known.held.Load()) {
			// Held here, at the version stored (or the store cannot say):
			// the binding's app resumes it.
			s.mu.Lock()
			if s.sessions[id] == known && !s.closed {
				known.conns++
				s.mu.Unlock()
				return known, nil
			}
			s.mu.Unlock()
		}
		// Otherwise another replica resumed it since: this binding's
		// document may be stale, so a new binding takes the session up.
		if data != nil && data.Workflow == s.wf.Name {
			b, err := s.takeUp(ctx, id, data.UAIPSession)
			if err != nil {
				return nil, err
			}
			taken = b
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		if taken != nil {
			_ = taken.app.Close()
		}
		return nil, nil
	case taken != nil:
		if b := s.sessions[id]; b != nil && b != known { // taken up meanwhile by another connection
			b.conns++
			_ = taken.app.Close()
			return b, nil
		}
		taken.uiapID = id
		s.sessions[id] = taken
		s.live[taken] = struct{}{}
		return taken, nil
	}
	b := s.newBinding()
	s.live[b] = struct{}{}
	return b, nil
}

// newBinding returns a binding with an app of its own, whose stored
// sessions (if the app stores them) name the binding's workflow and UAIP
// session.
func (s *Server) newBinding() *binding {
	b := &binding{srv: s, conns: 1}
	opts := s.opts.App
	if opts.Sessions != nil {
		opts.Sessions = bindingStore{Store: opts.Sessions, b: b}
	}
	b.app = uicontrol.NewApp(&opts)
	return b
}

// lookup returns what the store holds for the UIAP session id about the
// workflow it drives, and the session's version; nil if nothing.
func (s *Server) lookup(ctx context.Context, id string) (*appData, int64) {
	rec, err := s.opts.App.Sessions.Get(ctx, id, time.Now())
	if err != nil {
		if !errors.Is(err, uiapsession.ErrNotFound) {
			s.logger().Warn("uiapworkflow: reading a stored UIAP session failed", "session", id, "error", err)
		}
		return nil, 0 // the app answers the resume
	}
	data, err := decodeAppData(rec.App)
	if err != nil {
		s.logger().Warn("uiapworkflow: a stored UIAP session names no workflow session", "session", id, "error", err)
		return nil, 0
	}
	return data, rec.Version
}

// takeUp returns a binding for the UIAP session id, started by another
// Server, that drives the UAIP session uaipID: its app serves the
// session's current document. The app then resumes the UIAP session.
func (s *Server) takeUp(ctx context.Context, id, uaipID string) (*binding, *uicontrol.Error) {
	sess, err := s.engine.Session(ctx, uaipID)
	if err != nil {
		if errors.Is(err, workflow.ErrSessionNotFound) {
			return nil, uicontrol.NewError(uicontrol.CodeUnknownSession, fmt.Sprintf("session %q is not known or not resumable", id))
		}
		s.logger().Warn("uiapworkflow: reading a workflow session failed", "workflow", s.wf.Name, "error", err)
		return nil, uicontrol.NewError(uicontrol.CodeInternalError, "internal error")
	}
	b := s.newBinding()
	b.once.Do(func() { b.uaipID = sess.ID })
	b.registerActions()
	if _, err := b.app.SetCapabilities(ctx, s.document(sess), ""); err != nil {
		_ = b.app.Close()
		s.logger().Warn("uiapworkflow: publishing a workflow session's document failed", "workflow", s.wf.Name, "error", err)
		return nil, uicontrol.NewError(uicontrol.CodeInternalError, "internal error")
	}
	return b, nil
}

// release ends a connection of b; an app whose session is gone (or was
// never made) is closed, one whose session waits for a resume is closed
// when that session ends.
func (s *Server) release(b *binding) {
	s.mu.Lock()
	b.conns--
	conns, id := b.conns, b.uiapID
	s.mu.Unlock()
	if conns > 0 {
		return
	}
	var as *uicontrol.AppSession
	if id != "" {
		as = b.app.Session(id)
	}
	if as == nil {
		s.drop(b)
		return
	}
	s.mu.Lock()
	if b.watching || s.closed {
		s.mu.Unlock()
		return
	}
	b.watching = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		<-as.Done() // also when the Server closes the app
		s.drop(b)
	}()
}

// drop closes b's app and forgets b unless a connection still uses it.
func (s *Server) drop(b *binding) {
	s.mu.Lock()
	if b.conns > 0 {
		b.watching = false
		s.mu.Unlock()
		return
	}
	delete(s.live, b)
	if b.uiapID != "" && s.sessions[b.uiapID] == b {
		delete(s.sessions, b.uiapID)
	}
	s.mu.Unlock()
	_ = b.app.Close()
}

// Close ends every session (as a lost transport would, without
// session.terminate) and waits for what the Server started. The UAIP
// sessions stay: they expire as the engine's sessions do.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	bs := slices.Collect(maps.Keys(s.live))
	s.mu.Unlock()
	for _, b := range bs {
		_ = b.app.Close()
	}
	s.wg.Wait()
	return nil
}

// binding is one UIAP session's app and its UAIP session.
type binding struct {
	srv *Server
	app *uicontrol.App

	once   sync.Once
	uaipID string // set once, by start
	err    error
	// held is the version of the stored UIAP session the app holds
	// (bindingStore keeps it), 0 for none.
	held atomic.Int64

	// guarded by srv.mu
	uiapID   string
	conns    int
	watching bool
}

// start creates the UAIP session and publishes its first document,
// once, before the app answers session.initialize.
func (b *binding) start(ctx context.Context) error {
	b.once.Do(func() {
		sess, err := b.srv.engine.Initialize(ctx, b.srv.wf.Name)
		if err != nil {
			b.err = err
			return
		}
		b.uaipID = sess.ID
		b.registerActions()
		_, b.err = b.app.SetCapabilities(ctx, b.srv.document(sess), "")
	})
	return b.err
}

// registerActions registers every task of every stage, every transition
// target and the state input: the capability document offers only those
// of the current stage, and the engine refuses the others.
func (b *binding) registerActions() {
	wf := b.srv.wf
	// A task listed in several stages is registered once, with the
	// strictest of its risks.
	risks := map[string]uicontrol.Risk{}
	for _, st := range wf.Stages {
		for name, t := range st.Tasks {
			if r := riskOf(t.Risk); riskRank[r] > riskRank[risks[name]] {
				risks[name] = r
			}
		}
	}
	for name, risk := range risks {
		b.app.HandleAction(name, risk, func(ctx context.Context, _ *uicontrol.AppSession, req *uicontrol.ActionRequest, _ func(uicontrol.ActionProgress)) (any, error) {
			var args map[string]any
			if err := req.DecodeArgs(&args); err != nil {
				return nil, uicontrol.NewError(uicontrol.CodeBadRequest, "args must be an object")
			}
			return b.execute(ctx, &workflow.ExecuteRequest{Action: workflow.ActionMethodCall, Task: name, Args: args})
		})
	}
	targets := map[string]bool{}
	for _, tos := range wf.Transitions {
		for _, to := range tos {
			targets[to] = true
		}
	}
	for to := range targets {
		b.app.HandleAction(TransitionPrefix+to, uicontrol.RiskMedium, func(ctx context.Context, _ *uicontrol.AppSession, _ *uicontrol.ActionRequest, _ func(uicontrol.ActionProgress)) (any, error) {
			return b.execute(ctx, &workflow.ExecuteRequest{Action: workflow.ActionStageTransition, Stage: to})
		})
	}
	b.app.HandleAction(ActionStateInput, uicontrol.RiskMedium, func(ctx context.Context, _ *uicontrol.AppSession, req *uicontrol.ActionRequest, _ func(uicontrol.ActionProgress)) (any, error) {
		var args struct {
			StateUpdates map[string]any `json:"state_updates"`
		}
		if err := req.DecodeArgs(&args); err != nil || args.StateUpdates == nil {
			return nil, uicontrol.NewError(uicontrol.CodeBadRequest, "args must be {\"state_updates\": {…}}")
		}
		return b.execute(ctx, &workflow.ExecuteRequest{Action: workflow.ActionStateInput, StateUpdates: args.StateUpdates})
	})
}

// execute runs req on the UAIP session and publishes the document of the
// session it leaves (a no-op when nothing changed); the change goes out
// before the action's result.
func (b *binding) execute(ctx context.Context, req *workflow.ExecuteRequest) (any, error) {
	req.WorkflowName = b.srv.wf.Name
	res, err := b.srv.engine.Execute(ctx, b.uaipID, req)
	if err != nil {
		return nil, wireError(err)
	}
	reason := ""
	if req.Action == workflow.ActionStageTransition {
		reason = "stage " + res.Session.Stage
	}
	if _, err := b.app.SetCapabilities(ctx, b.srv.document(res.Session), reason); err != nil {
		return nil, err
	}
	switch req.Action {
	case workflow.ActionMethodCall:
		return res.Result, nil
	case workflow.ActionStageTransition:
		return map[string]any{"stage": res.Session.Stage}, nil
	}
	return map[string]any{"stage": res.Session.Stage, "state": res.Session.State}, nil
}

// wireError maps an engine error to the UIAP error the agent gets. The
// engine's details are what UAIP sends its clients too.
func wireError(err error) error {
	var we *workflow.Error
	if !errors.As(err, &we) {
		return err
	}
	code := uicontrol.CodeBadRequest
	switch {
	case errors.Is(err, workflow.ErrTaskNotInStage), errors.Is(err, workflow.ErrInvalidTransition),
		errors.Is(err, workflow.ErrPrerequisites), errors.Is(err, workflow.ErrConflict):
		code = uicontrol.CodeStateConflict
	case errors.Is(err, workflow.ErrSessionNotFound):
		code = uicontrol.CodeSessionNotActive
	case errors.Is(err, workflow.ErrInternal), errors.Is(err, workflow.ErrTaskUnavailable):
		code = uicontrol.CodeInternalError
	}
	e := uicontrol.NewError(code, we.Detail)
	e.Retryable = errors.Is(err, workflow.ErrConflict) || errors.Is(err, workflow.ErrTaskUnavailable)
	if len(we.Missing) > 0 || len(we.Errors) > 0 || len(we.Allowed) > 0 {
		e.Details = map[string]any{}
		if len(we.Missing) > 0 {
			e.Details["missing"] = we.Missing
		}
		if len(we.Errors) > 0 {
			e.Details["errors"] = we.Errors
		}
		if len(we.Allowed) > 0 {
			e.Details["allowed"] = we.Allowed
		}
	}
	return e
}

// tap passes a connection through to the binding's app, creating the
// UAIP session when the first session.initialize arrives and noting the
// UIAP session ID the app assigns.
type tap struct {
	uicontrol.Transport
	b     *binding
	first []byte
}

func (t *tap) Receive(ctx context.Context) ([]byte, error) {
	msg := t.first
	t.first = nil
	if msg == nil {
		var err error
		if msg, err = t.Transport.Receive(ctx); err != nil {
			return nil, err
		}
	}
	if messageType(msg) == uiapwire.TypeInitialize {
		if err := t.b.start(ctx); err != nil {
			// Without a UAIP session there is nothing to serve: the request
			// is answered internal_error (the cause stays in the log) and
			// the connection closes. No session exists yet, so the app
			// sends nothing on this connection but from the goroutine
			// calling Receive: refuse may send directly.
			t.b.srv.logger().Warn("uiapworkflow: starting a workflow session failed", "workflow", t.b.srv.wf.Name, "error", err)
			refuse(ctx, t.Transport, msg, t.b.srv.opts.App.Source, uicontrol.NewError(uicontrol.CodeInternalError, "internal error"))
			return nil, err
		}
	}
	return msg, nil
}

func (t *tap) Send(ctx context.Context, msg []byte) error {
	srv := t.b.srv
	srv.mu.Lock()
	known := t.b.uiapID != ""
	srv.mu.Unlock()
	if !known && messageType(msg) == uiapwire.TypeInitialized {
		var m struct {
			Payload struct {
				SessionID string `json:"sessionId"`
			} `json:"payload"`
		}
		if json.Unmarshal(msg, &m) == nil && m.Payload.SessionID != "" {
			srv.mu.Lock()
			t.b.uiapID = m.Payload.SessionID
			srv.sessions[m.Payload.SessionID] = t.b
			srv.mu.Unlock()
		}
	}
	return t.Transport.Send(ctx, msg)
}

func messageType(msg []byte) string {
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(msg, &m)
	return m.Type
}

// appData is what a stored UIAP session (uiapsession.Session.App) holds
// for this package: the workflow and the UAIP session it drives.
type appData struct {
	Workflow    string `json:"workflow"`
	UAIPSession string `json:"uaipSession"`
}

// decodeAppData reads the appData of a stored session (bytes from the
// database, perhaps written by another version of the package): a JSON
// object whose workflow and uaipSession are non-empty strings; other
// members are ignored.
func decodeAppData(b []byte) (*appData, error) {
	var d appData
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, errors.New("workflow and uaipSession must be strings")
	}
	if d.Workflow == "" || d.UAIPSession == "" {
		return nil, errors.New("workflow or uaipSession missing")
	}
	return &d, nil
}

// bindingStore is a binding's app's access to the store: a session it
// creates is stored with the binding's workflow and UAIP session.
type bindingStore struct {
	uiapsession.Store
	b *binding
}

func (s bindingStore) Create(ctx context.Context, sess *uiapsession.Session) error {
	data, err := json.Marshal(&appData{Workflow: s.b.srv.wf.Name, UAIPSession: s.b.uaipID})
	if err != nil {
		return err
	}
	c := *sess
	c.App = data
	if err := s.Store.Create(ctx, &c); err != nil {
		return err
	}
	s.b.held.Store(1)
	return nil
}

func (s bindingStore) Claim(ctx context.Context, id string, h, next []byte, expires, now time.Time) (*uiapsession.Session, error) {
	got, err := s.Store.Claim(ctx, id, h, next, expires, now)
	if err == nil {
		s.b.held.Store(got.Version)
	}
	return got, err
}

// Get finds a stored session only when it drives the binding's UAIP
// session: a binding that was not taken up for it (Server.takeUp) must
// not resume it — its app would serve another workflow session.
func (s bindingStore) Get(ctx context.Context, id string, now time.Time) (*uiapsession.Session, error) {
	rec, err := s.Store.Get(ctx, id, now)
	if err != nil {
		return nil, err
	}
	if data, err := decodeAppData(rec.App); err != nil || data.Workflow != s.b.srv.wf.Name || data.UAIPSession != s.b.uaipID {
		return nil, uiapsession.ErrNotFound
	}
	return rec, nil
}
