// Package runs provides governed agent runs: the one run primitive that
// agentry's HTTP API, UAMP, MCP, the CLI and the console share. A Service
// starts runs of agents by name in the background, reports them (Get,
// List, Wait), cancels them (Cancel) and streams their events (Events);
// Handler serves all of it over HTTP.
//
// Runs are governed by UAICP 0.3 (github.com/UAICP/uaicp), as package
// govern implements it: every tool call is gated by its risk tier, a run
// delivers only verified output or fails safe with its writes rolled
// back, and a run that needs an approval pauses durably. The Service
// resumes a paused run when its approvals are decided — through
// govern.Governor.Decide in any process sharing the journal
// (OnDecision), or after a restart (ResumeDecided). Everything a run did
// is in the governance journal, so reads survive a restart: Get and List
// answer from the journal, and Events derives a run's durable events from
// its journal records.
//
//	svc, err := runs.New(ctx, &runs.Options{Governor: g, Agents: map[string]*agent.Agent{"support": a}})
//	run, err := svc.Start(ctx, &runs.StartParams{Agent: "support", Input: "refund o-1001"})
//	run, err = svc.Wait(ctx, run.RequestID) // delivered, failed safe, or paused for a human
package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/bounded"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/unavailable"
	"github.com/agentry-dev/agentry/llm"
)

// Status is a run's status.
type Status string

// The statuses of a run.
const (
	Running   Status = "running"
	Paused    Status = "paused"    // waiting for approvals
	Delivered Status = "delivered" // deliver
	FailSafe  Status = "fail_safe" // failed safe: see Reasons
)

// Run is a run as the Service reports it (and GET /v1/runs/{id} answers).
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
	// envelope's uaicp.reasons); a cancelled run has CANCELLED.
	Reasons []govern.Reason `json:"reasons,omitempty"`
	// Error is what made the run fail safe when it came from outside the
	// governor: a model or provider failure (reason MODEL_FAILED), with
	// the provider's error code and message.
	Error *govern.Cause `json:"error,omitempty"`
	// StartedAt and EndedAt are when the journal recorded the run's start
	// and its delivery or fail-safe; List sets them.
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// Settled reports whether the run waits for nothing a server does: it
// delivered, failed safe, or is paused for a human's decision. (A paused
// run whose approvals are all decided is about to resume: not settled.)
func (r *Run) Settled() bool {
	switch r.Status {
	case Delivered, FailSafe:
		return true
	case Paused:
		return len(r.PendingApprovals) > 0
	}
	return false
}

// Defaults of Options.
const (
	defaultPollInterval = 250 * time.Millisecond
	defaultEventBuffer  = 256
	defaultHeartbeat    = 15 * time.Second
)

// Options configures a Service.
type Options struct {
	// Governor governs the runs; it is required. Set its
	// govern.Options.OnDecision to the Service's OnDecision, so that a
	// decided run resumes.
	Governor *govern.Governor
	// Descriptions describe the agents, by name, for GET /v1/agents.
	Descriptions map[string]string
	// Timeouts bound each execution of an agent's runs, by name: a run
	// still executing after its agent's timeout is cancelled and fails
	// safe. Waiting for an approval is not executing. Absent or 0: no
	// bound.
	Timeouts map[string]time.Duration
	// Agents are the agents the service runs, by name. Each must be
	// governed by Governor's Middleware with AgentOptions.Name set to
	// its name here (the name a paused run is resumed by).
	Agents map[string]*agent.Agent
	// Results keeps the final state of each delivered run under its
	// request ID (the run's Output comes from there); nil keeps them in
	// memory, gone with the process.
	Results agent.CheckpointStore
	// Logger receives operational records; nil is slog.Default().
	Logger *slog.Logger
	// PollInterval is how often Wait and the event streams look at the
	// journal for what another process recorded (a decision, a run of
	// another replica); 0 is 250 ms. What this process
	// records is seen at once.
	PollInterval time.Duration
	// EventBuffer is how many events a subscriber of Events may fall
	// behind before it catches up from the journal (see Events); 0 is
	// 256.
	EventBuffer int
	// Heartbeat is the interval of the comment lines the events endpoint
	// sends while a run is quiet, so that proxies keep the stream open;
	// 0 is 15 s.
	Heartbeat time.Duration
	// Reap, with a Governor using leases (govern.Options.Lease), is how
	// often the service recovers the runs other processes sharing the
	// journal left behind — govern.Governor.Recover claims those whose
	// lease expired — and resumes paused runs whose approvals were all
	// decided with no process resuming them (ResumeDecided): a third of
	// the lease is a good value. 0 never: recovery happens at startup
	// only. Without leases it must be 0.
	Reap time.Duration
}

// Service runs governed agents in the background. It is safe for
// concurrent use.
type Service struct {
	g *govern.Governor
	// catalog is the agents the service runs (SetAgents replaces it).
	catalog atomic.Pointer[catalog]
	results agent.CheckpointStore
	log     *slog.Logger
	opts    Options
	base    context.Context
	stop    context.CancelFunc

	mu         sync.Mutex
	closed     bool                  // Shutdown: no more runs start
	running    map[string]*execution // runs executing in this process
	cancelling map[string]int        // paused runs a Cancel is closing: not to be resumed
	hubs       map[string]*hub       // event streams by request ID
	// outputs are the answers of the last runs delivered here (outputOrder:
	// oldest first, at most maxOutputs): Get reads them instead of the
	// result store. A delivered run's answer does not change.
	outputs *bounded.Map[string, string]
	changed chan struct{} // closed when something may have changed (Wait)
	wg      sync.WaitGroup

	idx runIndex
}

// catalog is what the service knows of its agents, by name: Options'
// Agents, Descriptions and Timeouts.
type catalog struct {
	agents       map[string]*agent.Agent
	descriptions map[string]string
	timeouts     map[string]time.Duration
}

func newCatalog(o *Options) (*catalog, error) {
	for name, a := range o.Agents {
		if name == "" || a == nil {
			return nil, newError(InvalidParams, "", fmt.Sprintf("agent %q: an agent needs a name and an *agent.Agent", name), nil)
		}
	}
	return &catalog{agents: maps.Clone(o.Agents), descriptions: maps.Clone(o.Descriptions), timeouts: maps.Clone(o.Timeouts)}, nil
}

func (s *Service) agents() *catalog { return s.catalog.Load() }

// SetAgents replaces the agents the service runs with opts' Agents,
// Descriptions and Timeouts (its other fields are not used): new runs,
// and paused runs resumed from now on, run the agent their name now
// names; runs executing go on with the agent they started with. Each
// agent must be governed as Options.Agents says.
func (s *Service) SetAgents(opts *Options) error {
	if opts == nil {
		opts = &Options{}
	}
	c, err := newCatalog(opts)
	if err != nil {
		return err
	}
	s.catalog.Store(c)
	return nil
}

type execution struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the run stops (ends or pauses)
}

// New returns a service running opts.Agents under opts.Governor. ctx
// bounds the service: when it is cancelled — or Close is called — the
// runs executing here are cancelled (they fail safe) and event streams
// end.
func New(ctx context.Context, opts *Options) (*Service, error) {
	if opts == nil || opts.Governor == nil {
		return nil, newError(InvalidParams, "", "Options.Governor is required", nil)
	}
	o := *opts
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Results == nil {
		o.Results = &memResults{states: map[string]*agent.State{}}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = defaultPollInterval
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = defaultEventBuffer
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	cat, err := newCatalog(&o)
	if err != nil {
		return nil, err
	}
	base, stop := context.WithCancel(ctx)
	s := &Service{g: o.Governor, results: o.Results, log: o.Logger, opts: o, base: base, stop: stop,
		running: map[string]*execution{}, cancelling: map[string]int{}, hubs: map[string]*hub{}, outputs: bounded.New[string, string](maxOutputs), changed: make(chan struct{})}
	s.catalog.Store(cat)
	s.idx.init()
	if o.Reap > 0 {
		go s.reap(base, o.Reap)
	}
	return s, nil
}

// reap recovers, every interval until ctx ends, what other processes
// left behind (Options.Reap).
func (s *Service) reap(ctx context.Context, interval time.Duration) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(nextReap(s.reapOnce(ctx), interval))
	}
}

// nextReap is when to reap again after a pass that reported rep: after
// interval, or sooner, just after the next lease held elsewhere expires —
// so that a run whose holder died is taken over about when its lease
// ends, not up to a whole interval later.
func nextReap(rep *govern.RecoveryReport, interval time.Duration) time.Duration {
	if rep == nil || rep.NextExpiry < 0 {
		return interval
	}
	// A little after the expiry (the store's clock decides it), and not
	// in a loop while replicas contend for an expired lease.
	return min(interval, max(rep.NextExpiry+interval/30, interval/10))
}

// reapOnce recovers the runs whose lease expired and resumes the decided
// ones; it returns Recover's report when Recover succeeded.
func (s *Service) reapOnce(ctx context.Context) *govern.RecoveryReport {
	rep, err := s.g.Recover(ctx)
	if err != nil {
		s.log.Warn("runs: recovering runs of other processes", "error", err)
	}
	if rep != nil && len(rep.Closed) > 0 {
		s.log.Warn("runs left by a process that stopped were closed", "runs", len(rep.Closed), "rolled_back", rep.RolledBack, "rollback_failures", rep.RollbackFailures)
	}
	if rep != nil && len(rep.Closed)+len(rep.Resumable) > 0 {
		s.notify()
	}
	if rep == nil {
		return nil
	}
	// With leases, Recover reports the decided runs nobody resumed: no
	// need to list every approval (ResumeDecided) at each pass.
	for _, id := range rep.Resumable {
		if err := s.resume(id); err != nil && ctx.Err() == nil {
			s.log.Warn("runs: resuming a decided run", "request_id", id, "error", err)
		}
	}
	if err != nil {
		return nil // the next pass after the whole interval
	}
	return rep
}

// Shutdown stops the service gracefully: it starts no more runs (nor
// resumes), waits until the runs executing here stop — they deliver,
// fail or pause — or ctx ends, then cancels those still executing (they
// fail safe) and ends the event streams. It returns ctx's error when it
// had to cancel runs.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	idle := make(chan struct{})
	go func() { s.wg.Wait(); close(idle) }()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.stop()
	<-idle
	return err
}

// Close cancels the runs executing in this service (they fail safe, as
// when the context given to New is cancelled), ends the event streams
// and waits for the runs to stop. A paused run stays paused.
func (s *Service) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Shutdown(ctx)
	return nil
}

// Agents returns the names of the agents the service runs, sorted.
func (s *Service) Agents() []string {
	agents := s.agents().agents
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// notify wakes the Waits: something may have changed.
func (s *Service) notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *Service) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// StartParams describes a run to start.
type StartParams struct {
	// Agent names one of Options.Agents.
	Agent string
	// Input is the user's message to the agent; it must not be empty.
	Input string
}

// Start starts a run of the named agent on the input, in the background,
// and returns it once the governor has journaled its start: running, with
// its request ID (the run's UAICP request_id). It fails with UnknownAgent
// for a name the service does not run, InvalidParams for an empty input,
// Unavailable once the service is closed, and with the journal's error
// when the start could not be journaled (the HTTP API answers 503 when
// the store is out of reach): an ID it returns is always found.
func (s *Service) Start(ctx context.Context, p *StartParams) (*Run, error) {
	if p == nil || p.Input == "" {
		return nil, newError(InvalidParams, "", "input is empty", nil)
	}
	a, ok := s.agents().agents[p.Agent]
	if !ok {
		return nil, newError(UnknownAgent, "", fmt.Sprintf("no agent named %q", p.Agent), nil)
	}
	id := ids.New()
	// The run's first event comes once its governor journaled it: only
	// then is its ID answered. A run that ends before (its store is
	// down) is answered with its error, never with an ID that would
	// not be found.
	started := make(chan error, 1)
	var once sync.Once
	journaled := func(err error) { once.Do(func() { started <- err }) }
	// The run belongs to the trace of the request that started it (its
	// invoke_agent span a child of the caller's span), not to its context.
	parent := trace.SpanContextFromContext(ctx)
	if !s.launch(id, p.Agent, func(ctx context.Context) (*agent.Result, error) {
		if parent.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, parent)
		}
		sr := a.Stream(govern.WithRequestID(ctx, id), llm.NewUserMessage(llm.Text(p.Input)), nil)
		for ev, err := range sr.Events() {
			if err != nil {
				break
			}
			journaled(nil)
			s.agentEvent(id, ev)
		}
		res, err := sr.Result()
		journaled(err)
		return res, err
	}) {
		return nil, newError(Unavailable, "", "the service is closed", nil)
	}
	select {
	case err := <-started:
		if err != nil && !s.exists(id) {
			if unavailable.Is(err) {
				return nil, err
			}
			return nil, newError(Internal, id, "the run could not start", err)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &Run{RequestID: id, Agent: p.Agent, Status: Running}, nil
}

// exists reports whether the journal holds the run's start (a run that
// failed before its first event may have journaled it all the same). It
// asks the governor, not Get: Get reports a run still executing here as
// running before anything is journaled.
func (s *Service) exists(id string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), 5*time.Second)
	defer cancel()
	_, err := s.g.Attach(ctx, id)
	return err == nil
}

// launch runs fn in the background as run id, unless the service is
// closed or the run is already executing here (or being cancelled).
func (s *Service) launch(id, name string, fn func(ctx context.Context) (*agent.Result, error)) bool {
	s.mu.Lock()
	if s.closed || s.base.Err() != nil || s.running[id] != nil || s.cancelling[id] > 0 {
		s.mu.Unlock()
		return false
	}
	ctx, cancel := context.WithCancel(s.base)
	if d := s.agents().timeouts[name]; d > 0 {
		ctx, cancel = context.WithTimeout(s.base, d)
	}
	ex := &execution{cancel: cancel, done: make(chan struct{})}
	s.running[id] = ex
	s.wg.Add(1)
	s.mu.Unlock()
	s.notify()
	go func() {
		defer s.wg.Done()
		defer cancel()
		res, err := fn(ctx)
		s.finish(id, name, res, err)
		s.mu.Lock()
		delete(s.running, id)
		h := s.hubs[id]
		s.mu.Unlock()
		close(ex.done)
		if h != nil {
			h.localEnded()
		}
		s.notify()
	}()
	return true
}

func (s *Service) executing(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[id] != nil
}

// agentEvent publishes what a run's agent streamed to the run's event
// subscribers, if it has any.
func (s *Service) agentEvent(id string, ev agent.Event) {
	s.mu.Lock()
	h := s.hubs[id]
	s.mu.Unlock()
	if h == nil {
		return
	}
	switch {
	case ev.Source == agent.SourceUPP && ev.UPP != nil && ev.UPP.Type == llm.TextDelta && ev.UPP.Delta.Text != "":
		h.publishText(s.base, ev.UPP.Delta.Text, ev.Unverified)
	case ev.Source == agent.SourceUAP && ev.UAP != nil && ev.UAP.Type == agent.EventSubagentEvent:
		for _, sub := range subagentEvents(id, ev.UAP) { // what a sub-agent streams, inside a tool call
			h.publishTransient(sub)
		}
	case ev.Source == agent.SourceUAP && ev.UAP != nil:
		// An agent event comes between model calls and tool rounds: what
		// the run journaled up to here goes out first, so that the
		// model's next words follow the results they answer.
		h.poll(s.base)
		if ev.UAP.Type == agent.EventAction {
			if calls, ok := ev.UAP.Data["toolCalls"].([]llm.ToolCall); ok && len(calls) > 0 {
				h.publishTransient(modelEvent(id, "", false, calls))
			}
		}
		for _, sub := range subagentEvents(id, ev.UAP) {
			h.publishTransient(sub)
		}
	}
}

func (s *Service) finish(id, name string, res *agent.Result, err error) {
	switch {
	case err == nil:
		if serr := s.results.Save(context.WithoutCancel(s.base), id, res.State); serr != nil {
			s.log.Error("runs: saving a delivered run's result", "request_id", id, "error", serr)
		} else {
			s.keepOutput(id, finalText(res.State))
		}
		s.log.Info("run delivered", "request_id", id, "agent", name)
	case errors.Is(err, govern.ApprovalRequired):
		s.log.Info("run paused for approval", "request_id", id, "agent", name)
	case errors.Is(err, govern.ErrDuplicate):
		// Another process (a replica) resumed this pause first: the
		// journal took its resume, not ours; it goes on there.
		s.log.Info("run resumed by another process", "request_id", id, "agent", name)
	case errors.Is(err, govern.ErrLeased):
		// Another process holds the run's lease: it resumed the run, or
		// took it over when this one stalled past its lease.
		s.log.Warn("run continues in another process", "request_id", id, "agent", name)
	default:
		s.log.Warn("run failed", "request_id", id, "agent", name, "reasons", govern.ReasonsOf(err), "error", err)
	}
}

// resume continues a paused run whose approvals are all decided, unless
// it executes here already or is being cancelled.
func (s *Service) resume(requestID string) error {
	r, err := s.g.Attach(s.base, requestID)
	if err != nil {
		return err
	}
	if !r.Paused() || len(r.PendingApprovals()) > 0 || r.Phase().Terminal() {
		return nil
	}
	name := r.Resumer()
	a, ok := s.agents().agents[name]
	if !ok {
		return fmt.Errorf("run %s was started by agent %q, which this service does not run", requestID, name)
	}
	s.launch(requestID, name, func(ctx context.Context) (*agent.Result, error) {
		return govern.ResumeAgent(ctx, s.g, a, requestID)
	})
	return nil
}

// OnDecision resumes the decision's run once all its approvals are
// decided; put it in govern.Options.OnDecision.
func (s *Service) OnDecision(req govern.ApprovalRequest) {
	s.kick(req.RequestID)
	if err := s.resume(req.RequestID); err != nil {
		s.log.Error("runs: resuming after an approval decision", "request_id", req.RequestID, "error", err)
	}
	s.notify()
}

// kick makes the run's event stream, if it has one, read the journal now.
func (s *Service) kick(id string) {
	s.mu.Lock()
	h := s.hubs[id]
	s.mu.Unlock()
	if h != nil {
		h.wake()
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
		if err := s.resume(a.RequestID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Get reports a run, from the journal. It fails with UnknownRun when no
// run has that request ID.
func (s *Service) Get(ctx context.Context, requestID string) (*Run, error) {
	out := &Run{RequestID: requestID}
	running := s.executing(requestID)
	r, err := s.g.Attach(ctx, requestID)
	if err != nil {
		if errors.Is(err, govern.ErrUnknownRun) {
			if running {
				out.Status = Running // not journaled yet
				return out, nil
			}
			return nil, newError(UnknownRun, requestID, "no such run", err)
		}
		return nil, newError(Internal, requestID, "", err)
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
		out.Status, out.Output = Delivered, s.output(ctx, requestID)
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

// maxOutputs bounds the answers a Service keeps (Service.outputs).
const maxOutputs = 1024

// keepOutput keeps the answer of run id, delivered here and saved.
func (s *Service) keepOutput(id, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outputs.Add(id, text)
}

// output returns the answer of a delivered run: kept, when it was
// delivered here lately, or from the result store.
func (s *Service) output(ctx context.Context, requestID string) string {
	s.mu.Lock()
	text, ok := s.outputs.Get(requestID)
	s.mu.Unlock()
	if ok {
		return text
	}
	st, err := s.results.Load(ctx, requestID)
	if err != nil {
		return ""
	}
	return finalText(st)
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

// Wait waits until the run is settled (Run.Settled: delivered, failed
// safe, or paused for a human) and returns it. A decided run resumes in
// the background, so Wait right after a decision returns the run that
// followed. When ctx ends first, Wait returns the run as it last saw it
// with ctx's error.
func (s *Service) Wait(ctx context.Context, requestID string) (*Run, error) {
	poll := time.NewTicker(s.opts.PollInterval) // what another process does is seen only in the journal
	defer poll.Stop()
	for {
		changed := s.changes()
		s.mu.Lock()
		ex := s.running[requestID]
		s.mu.Unlock()
		if ex != nil {
			// Executing here: it settles no sooner than it stops, so
			// wait for that rather than reading the journal at every
			// change of every run.
			select {
			case <-ex.done:
				continue
			case <-ctx.Done():
				return &Run{RequestID: requestID, Status: Running}, ctx.Err()
			}
		}
		run, err := s.Get(ctx, requestID)
		if err != nil {
			return nil, err
		}
		if run.Settled() {
			return run, nil
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-ctx.Done():
			return run, ctx.Err()
		}
	}
}

// Cancel cancels a run that has not ended. A run executing in this
// service is stopped: it fails safe with reason CANCELLED, its recorded
// writes rolled back (Cancel returns once it has). A paused run is closed
// the same way: it fails safe with CANCELLED, the writes it recorded
// before its pause rolled back, and its pending approvals can no longer
// be decided. Cancel fails with UnknownRun for an unknown run,
// RunFinished for one that delivered or failed safe (also when it
// delivered before the cancellation reached it), and RunElsewhere for
// one executing in another process sharing the journal.
func (s *Service) Cancel(ctx context.Context, requestID string) error {
	defer s.notify()
	for {
		s.mu.Lock()
		ex := s.running[requestID]
		if ex == nil {
			s.cancelling[requestID]++ // no resume starts while the paused run is closed
		}
		s.mu.Unlock()
		if ex == nil {
			err := s.closePaused(ctx, requestID)
			s.mu.Lock()
			if s.cancelling[requestID]--; s.cancelling[requestID] == 0 {
				delete(s.cancelling, requestID)
			}
			s.mu.Unlock()
			s.kick(requestID)
			return err
		}
		ex.cancel()
		select {
		case <-ex.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		run, err := s.Get(ctx, requestID)
		if err != nil {
			return err
		}
		switch run.Status {
		case FailSafe:
			return nil
		case Delivered:
			return newError(RunFinished, requestID, "the run delivered before it could be cancelled", nil)
		}
		// It paused (or resumed) as it was cancelled: close it as such.
	}
}

// closePaused fails safe a run that does not execute in this process.
func (s *Service) closePaused(ctx context.Context, requestID string) error {
	r, err := s.g.Attach(ctx, requestID)
	switch {
	case errors.Is(err, govern.ErrUnknownRun):
		return newError(UnknownRun, requestID, "no such run", err)
	case err != nil:
		return newError(Internal, requestID, "", err)
	case r.Phase().Terminal():
		return newError(RunFinished, requestID, fmt.Sprintf("the run has ended (%s)", r.Phase()), nil)
	case !r.Paused():
		return newError(RunElsewhere, requestID, "the run is executing in another process", nil)
	}
	if _, err := r.Fail(ctx, "cancelled while paused", govern.Cancelled); err != nil {
		switch {
		case errors.Is(err, govern.ErrRunClosed):
			return newError(RunFinished, requestID, "the run has ended", err)
		case errors.Is(err, govern.ErrLeased), errors.Is(err, govern.ErrDuplicate):
			// Another replica resumed it (or holds it) meanwhile.
			return newError(RunElsewhere, requestID, "the run is executing in another process", err)
		}
		return newError(Internal, requestID, "", err)
	}
	s.log.Info("paused run cancelled", "request_id", requestID)
	return nil
}
