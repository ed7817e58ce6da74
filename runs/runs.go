// Package runs serves governed agent runs over HTTP for agentry serve:
// POST /v1/runs starts a run of a named agent, GET /v1/runs/{id} reports
// it. Runs are governed (UAICP 0.3, github.com/UAICP/uaicp, package govern):
// a run that needs an approval pauses durably, and the Service resumes it
// when its approvals are decided — through POST /v1/approvals/{id} on any
// replica, or after a restart (ResumeDecided).
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/agentry-dev/agentry/llm"
)

// MaxBody bounds a POST /v1/runs body.
const MaxBody = 64 << 10

// MaxWait bounds how long POST /v1/runs with "wait": true waits.
const MaxWait = 100 * time.Second

// Status is a run's status.
type Status string

// The statuses of a run.
const (
	Running   Status = "running"
	Paused    Status = "paused"    // waiting for approvals
	Delivered Status = "delivered" // deliver
	FailSafe  Status = "fail_safe" // failed safe: see the envelope's uaicp.reasons
)

// Run is what GET /v1/runs/{id} answers.
type Run struct {
	RequestID string `json:"request_id"`
	Agent     string `json:"agent,omitempty"`
	Status    Status `json:"status"`
	// Output is the agent's answer, once delivered.
	Output string `json:"output,omitempty"`
	// Envelope is the run's UAICP envelope now.
	Envelope *govern.Envelope `json:"envelope,omitempty"`
	// PendingApprovals lists the approval requests a paused run waits
	// for (decide them at /v1/approvals/{id}).
	PendingApprovals []string `json:"pending_approvals,omitempty"`
	// DeniedCalls lists the calls the governor refused and that did not
	// run — denied by an approver or the policy, an approval token
	// refused, no rollback — also of a run that delivered (the agent
	// answered without them).
	DeniedCalls []govern.RefusedCall `json:"denied_calls,omitempty"`
	// Reasons are the reason codes of a run that failed safe (as in the
	// envelope's uaicp.reasons).
	Reasons []govern.Reason `json:"reasons,omitempty"`
	// Error is what made the run fail safe when it came from outside the
	// governor: a model or provider failure (reason MODEL_FAILED), with
	// the provider's error code and message.
	Error *govern.Cause `json:"error,omitempty"`
}

// Service runs governed agents in the background.
type Service struct {
	g       *govern.Governor
	agents  map[string]*agent.Agent
	results agent.CheckpointStore
	log     *slog.Logger
	base    context.Context

	mu      sync.Mutex
	running map[string]chan struct{} // closed when the run stops (ends or pauses)
	wg      sync.WaitGroup
}

// New returns a service running agents (by name; each must be governed by
// g's Middleware with AgentOptions.Name set to that name) and keeping their
// final states in results under the run's request ID. Background runs use
// base: cancelling it stops them (they fail safe).
func New(base context.Context, g *govern.Governor, agents map[string]*agent.Agent, results agent.CheckpointStore, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	return &Service{g: g, agents: agents, results: results, log: logger, base: base, running: map[string]chan struct{}{}}
}

// Start starts a run of the named agent on input and returns its request
// ID and a channel closed when it stops (delivers, fails or pauses).
func (s *Service) Start(name, input string) (string, <-chan struct{}, error) {
	a, ok := s.agents[name]
	if !ok {
		return "", nil, fmt.Errorf("no agent named %q", name)
	}
	id := ids.New()
	done := s.track(id)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.untrack(id)
		res, err := a.Generate(govern.WithRequestID(s.base, id), llm.NewUserMessage(llm.Text(input)), nil)
		s.finish(id, name, res, err)
	}()
	return id, done, nil
}

func (s *Service) track(id string) chan struct{} {
	done := make(chan struct{})
	s.mu.Lock()
	s.running[id] = done
	s.mu.Unlock()
	return done
}

func (s *Service) untrack(id string) {
	s.mu.Lock()
	if done, ok := s.running[id]; ok {
		close(done)
		delete(s.running, id)
	}
	s.mu.Unlock()
}

func (s *Service) finish(id, name string, res *agent.Result, err error) {
	switch {
	case err == nil:
		if serr := s.results.Save(context.WithoutCancel(s.base), id, res.State); serr != nil {
			s.log.Error("runs: saving a delivered run's result", "request_id", id, "error", serr)
		}
		s.log.Info("run delivered", "request_id", id, "agent", name)
	case errors.Is(err, govern.ApprovalRequired):
		s.log.Info("run paused for approval", "request_id", id, "agent", name)
	default:
		s.log.Warn("run failed", "request_id", id, "agent", name, "reasons", govern.ReasonsOf(err), "error", err)
	}
}

// Resume continues a paused run whose approvals are all decided.
func (s *Service) Resume(requestID string) error {
	r, err := s.g.Attach(s.base, requestID)
	if err != nil {
		return err
	}
	if !r.Paused() || len(r.PendingApprovals()) > 0 {
		return nil
	}
	a, ok := s.agents[r.Resumer()]
	if !ok {
		return fmt.Errorf("run %s was started by agent %q, which this server does not run", requestID, r.Resumer())
	}
	s.mu.Lock()
	_, busy := s.running[requestID]
	s.mu.Unlock()
	if busy {
		return nil
	}
	s.track(requestID)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.untrack(requestID)
		res, err := govern.ResumeAgent(s.base, s.g, a, requestID)
		s.finish(requestID, r.Resumer(), res, err)
	}()
	return nil
}

// OnDecision resumes the decision's run once all its approvals are
// decided; put it in govern.Options.OnDecision.
func (s *Service) OnDecision(req govern.ApprovalRequest) {
	if err := s.Resume(req.RequestID); err != nil {
		s.log.Error("runs: resuming after an approval decision", "request_id", req.RequestID, "error", err)
	}
}

// ResumeDecided resumes the paused runs whose approvals were all decided
// while no process resumed them (a crash between decision and resume).
// Call it at startup, after govern.Governor.Recover.
func (s *Service) ResumeDecided(ctx context.Context) error {
	reqs, err := s.g.Approvals(ctx, false)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var errs []error
	for _, a := range reqs {
		if a.Status == govern.StatusPending || seen[a.RequestID] {
			continue
		}
		seen[a.RequestID] = true
		if err := s.Resume(a.RequestID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Wait waits for the background runs to stop.
func (s *Service) Wait() { s.wg.Wait() }

// Get reports a run.
func (s *Service) Get(ctx context.Context, requestID string) (*Run, error) {
	out := &Run{RequestID: requestID}
	s.mu.Lock()
	_, running := s.running[requestID]
	s.mu.Unlock()
	r, err := s.g.Attach(ctx, requestID)
	if err != nil {
		if running && errors.Is(err, govern.ErrUnknownRun) {
			out.Status = Running // not journaled yet
			return out, nil
		}
		return nil, err
	}
	env := r.Envelope()
	out.Envelope, out.Agent = &env, r.Resumer()
	if refused := r.RefusedCalls(); len(refused) > 0 {
		out.DeniedCalls = refused
	}
	switch {
	case env.State == govern.Deliver && running:
		// Journaled as delivered, its result not saved yet: a run is
		// reported delivered only with its output.
		out.Status = Running
	case env.State == govern.Deliver:
		out.Status = Delivered
		if st, err := s.results.Load(ctx, requestID); err == nil {
			out.Output = finalText(st)
		}
	case env.State == govern.FailSafe:
		out.Status = FailSafe
		out.Reasons, out.Error = r.Reasons(), r.Cause()
	case r.Paused() && !running:
		out.Status = Paused
		out.PendingApprovals = r.PendingApprovals()
	default:
		out.Status = Running
	}
	return out, nil
}

func finalText(st *agent.State) string {
	ms := st.Messages()
	for i := len(ms) - 1; i >= 0; i-- {
		if a, ok := ms[i].(*llm.AssistantMessage); ok && !a.HasToolCalls() {
			return a.Text()
		}
	}
	return ""
}

// Handler serves POST /v1/runs and GET /v1/runs/{id}. Mount it at
// "/v1/runs" and "/v1/runs/".
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", s.post)
	mux.HandleFunc("GET /v1/runs", s.list)
	mux.HandleFunc("GET /v1/runs/{id}", s.get) // ?wait=DURATION: until the run is settled
	return mux
}

type startRequest struct {
	Agent string `json:"agent"`
	Input string `json:"input"`
	// Wait makes the call return when the run stops (delivers, fails
	// or pauses), up to MaxWait.
	Wait bool `json:"wait"`
}

func (s *Service) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "could not read the body")
		return
	}
	if len(body) > MaxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "TOO_LARGE", fmt.Sprintf("body larger than %d bytes", MaxBody))
		return
	}
	// Strictly (DESIGN §2): one closed object and nothing after it, no
	// invalid UTF-8 or lone surrogate to be silently repaired in the
	// input a run is journaled with.
	var req startRequest
	if err := strictjson.Decode(body, &req, &strictjson.Options{MaxSize: MaxBody, DisallowUnknownFields: true, DisallowDuplicates: true}); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", `the body must be {"agent": "...", "input": "...", "wait": bool}: `+err.Error())
		return
	}
	if req.Input == "" {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "input is empty")
		return
	}
	id, done, err := s.Start(req.Agent, req.Input)
	if err != nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND", err.Error())
		return
	}
	status := http.StatusAccepted
	if req.Wait {
		select {
		case <-done:
			status = http.StatusOK
		case <-time.After(MaxWait):
		case <-r.Context().Done():
		}
	}
	run, err := s.Get(r.Context(), id)
	if err != nil {
		run = &Run{RequestID: id, Agent: req.Agent, Status: Running}
	}
	w.Header().Set("Location", "/v1/runs/"+id)
	writeJSON(w, status, run)
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", `wait must be a duration such as "30s"`)
			return
		}
		wait = min(d, MaxWait)
	}
	run, err := s.Get(r.Context(), id)
	if err == nil && wait > 0 {
		run, err = s.waitSettled(r.Context(), id, run, wait)
	}
	switch {
	case errors.Is(err, govern.ErrUnknownRun):
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such run")
	case err != nil:
		s.log.Error("runs: reading a run", "request_id", id, "error", err)
		writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error")
	default:
		writeJSON(w, http.StatusOK, run)
	}
}

// settled reports whether a run waits for nothing this server does: it
// delivered, failed safe, or is paused for a human's decision.
func settled(run *Run) bool {
	switch run.Status {
	case Delivered, FailSafe:
		return true
	case Paused:
		return len(run.PendingApprovals) > 0
	}
	return false
}

// waitSettled waits, up to wait or the end of ctx, until the run is
// settled, and returns it as it is then. A decided run resumes in the
// background (OnDecision), so a client that decided it reads the run
// that followed with GET /v1/runs/{id}?wait=30s.
func (s *Service) waitSettled(ctx context.Context, id string, run *Run, wait time.Duration) (*Run, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond) // a resume that has not started yet is seen only in the journal
	defer poll.Stop()
	for !settled(run) {
		s.mu.Lock()
		done := s.running[id]
		s.mu.Unlock()
		select {
		case <-done: // nil when not running here: only the other cases
		case <-poll.C:
		case <-deadline.C:
			return run, nil
		case <-ctx.Done():
			return run, nil
		}
		var err error
		if run, err = s.Get(ctx, id); err != nil {
			return nil, err
		}
	}
	return run, nil
}

// list answers the agents this service runs.
func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	names := make([]string, 0, len(s.agents))
	for n := range s.agents {
		names = append(names, n)
	}
	sort.Strings(names)
	writeJSON(w, http.StatusOK, map[string]any{"agents": names})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
