package govern

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/internal/turns"
	"github.com/agentry-dev/agentry/llm"
)

// metadataKey is where a tool's Declaration lives in llm.Tool.Metadata,
// and where a governed agent run keeps its Run in
// agent.MiddlewareContext.Metadata.
const metadataKey = "uaicp"

// metadataEnvelope is the agent.State metadata key under which a governed
// agent run records its final envelope (as JSON).
const metadataEnvelope = "uaicp.envelope"

// Declaration is what a tool declares to the governor (§5.3).
type Declaration struct {
	// Tier is the declared risk tier; zero counts as WriteHighRisk.
	Tier Tier `json:"risk_tier"`
	// Rollback computes the call's rollback action before it runs (see
	// ToolSpec.Rollback).
	Rollback func(ctx context.Context, call Call) (*RollbackAction, error) `json:"-"`
}

// Declare returns t with its risk tier and rollback declared, for a
// governed agent (Governor.Middleware). An undeclared tool is treated as
// write_high_risk.
func Declare(t llm.Tool, d Declaration) llm.Tool {
	md := maps.Clone(t.Metadata)
	if md == nil {
		md = map[string]any{}
	}
	md[metadataKey] = d
	t.Metadata = md
	return t
}

// DeclarationOf returns the declaration Declare recorded on t.
func DeclarationOf(t llm.Tool) (Declaration, bool) {
	d, ok := t.Metadata[metadataKey].(Declaration)
	return d, ok
}

// AgentOptions configures the governance of an agent.
type AgentOptions struct {
	// Identity is who the agent's runs act as. An empty AgentID is
	// "agent:" + the agent's ID, an empty OwnerID "local", an empty
	// ControlClass autonomous.
	Identity Identity
	// TaskClass names the governor's task class of the agent's runs.
	TaskClass string
	// Name names the agent for resuming paused runs (RunOptions.Resumer).
	Name string
	// RepairPrompt writes the message that sends the model back to work
	// after a failed verification; nil uses a default listing the failing
	// checks.
	RepairPrompt func(v *Verdict) string
	// Output extracts the deliverable from a result; nil uses the
	// structured output (Turn.Data) when there is one, else the reply's
	// text.
	Output func(r *agent.Result) any
}

// Middleware returns the agent middleware that governs an agent's runs:
// each run (Generate, Stream, Ask) is a governed Run of g. Every tool call
// is gated by Run.Invoke before it runs, with the tier and rollback of its
// Declaration (undeclared tools are write_high_risk). A call that needs
// an approval pauses the run durably at the end of its step: the agent
// call returns an *Error with ApprovalRequired whose Envelope names the
// run (RequestID) and its pending approvals; once they are decided,
// ResumeAgent continues it. The final answer is verified against the task
// class; a failed verification sends the model back to work with the
// failing checks, up to the repair budget; the result then carries the
// deliver envelope in its state (EnvelopeOf). A run that cannot deliver —
// budget spent, a tool writing under read_only, a cancelled context, a
// failing strategy — ends in fail_safe with its writes rolled back, and
// the agent call returns an *Error carrying the uncertain envelope.
//
// A streamed run (Stream) gates its deliver content (§4.2): see
// EventRequestID for what its consumer sees.
//
// A sub-agent run inside a governed tool call is a child run (§4.3).
func (g *Governor) Middleware(opts *AgentOptions) agent.Middleware {
	var o AgentOptions
	if opts != nil {
		o = *opts
	}
	return &agentMiddleware{g: g, o: o}
}

type agentMiddleware struct {
	g *Governor
	o AgentOptions
}

type resumeKey struct{}

// resumeRun carries a run into a nested agent call (a repair attempt or a
// resume); the first Before of that call takes it, so sub-agents inside
// it start child runs instead.
type resumeRun struct {
	run   *Run
	taken atomic.Bool
}

func withRun(ctx context.Context, r *Run) context.Context {
	return context.WithValue(ctx, resumeKey{}, &resumeRun{run: r})
}

type requestIDKey struct{}

type requestID struct {
	id    string
	taken atomic.Bool
}

// WithRequestID makes the next governed agent run started with ctx use id
// (a UUID) as its request_id, so a caller knows the run's ID before it
// starts. Sub-agents inside that run still get their own.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, &requestID{id: id})
}

func (m *agentMiddleware) Name() string { return "uaicp" }

func (m *agentMiddleware) identity(a *agent.Agent) Identity {
	id := m.o.Identity
	if id.AgentID == "" {
		id.AgentID = "agent:" + a.ID()
	}
	if id.OwnerID == "" {
		id.OwnerID = "local"
	}
	if id.ControlClass == "" {
		id.ControlClass = Autonomous
	}
	return id
}

func runOf(md map[string]any) *Run {
	r, _ := md[metadataKey].(*Run)
	return r
}

func (m *agentMiddleware) Before(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
	if rr, ok := ctx.Value(resumeKey{}).(*resumeRun); ok && rr.run.g == m.g && rr.taken.CompareAndSwap(false, true) {
		rr.run.span.Store(trace.SpanFromContext(ctx))
		mc.Metadata[metadataKey] = rr.run
		return nil, nil
	}
	var parent *Run
	if tc, ok := agent.ToolContextFrom(ctx); ok {
		if p := runOf(tc.Metadata); p != nil && p.g == m.g {
			parent = p
		}
	}
	o := RunOptions{Identity: m.identity(mc.Agent), TaskClass: m.o.TaskClass, Parent: parent, Resumer: m.o.Name}
	if rid, ok := ctx.Value(requestIDKey{}).(*requestID); ok && parent == nil && rid.taken.CompareAndSwap(false, true) {
		o.RequestID = rid.id
	}
	run, err := m.g.Start(ctx, &o)
	if err != nil {
		return nil, err
	}
	if err := run.Advance(ctx, Plan); err != nil {
		return nil, run.failWith(ctx, err, InternalError)
	}
	mc.Metadata[metadataKey] = run
	return nil, nil
}

// WrapTool gates the tool's every call through the run's Invoke. The
// agent applies it to its static tools once and to the tools of its
// Toolsets at every step, so a tool that appears mid-run (a workflow's
// next stage) is gated by the same run.
func (m *agentMiddleware) WrapTool(t llm.Tool) llm.Tool {
	d, _ := DeclarationOf(t)
	spec := ToolSpec{Name: t.Name, Tier: d.Tier, Rollback: d.Rollback}
	run := t.Run
	t.Run = func(ctx context.Context, args map[string]any) (any, error) {
		tc, ok := agent.ToolContextFrom(ctx)
		var r *Run
		if ok {
			r = runOf(tc.Metadata)
		}
		if r == nil {
			return nil, refuse("tool called outside a governed run", PolicyBlocked)
		}
		call := Call{Args: args}
		if c, ok := llm.ToolCallFrom(ctx); ok {
			call.ID = c.ToolCallID
		}
		inv, err := r.Invoke(ctx, spec, call, func(ctx context.Context) (any, error) {
			if run == nil {
				return nil, fmt.Errorf("tool %s has no Run", spec.Name)
			}
			return run(ctx, args)
		})
		if err != nil {
			return nil, err
		}
		return inv.Result, nil
	}
	return t
}

// OnStep pauses the run when a call of the step waits for approval.
func (m *agentMiddleware) OnStep(ctx context.Context, mc *agent.MiddlewareContext, step agent.StepInfo) (*agent.State, error) {
	r := runOf(mc.Metadata)
	if r == nil || len(r.PendingApprovals()) == 0 {
		return nil, nil
	}
	snap, err := step.State.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if err := r.Pause(ctx, snap); err != nil {
		return nil, err
	}
	mc.Metadata[metadataKey+".paused"] = true
	env := r.Envelope()
	return nil, &Error{Reasons: []Reason{ApprovalRequired}, ApprovalID: firstPending(&env),
		Detail: fmt.Sprintf("run %s paused until its approvals are decided", r.RequestID()), Envelope: &env}
}

func firstPending(env *Envelope) string {
	if p, ok := env.Metadata[MetaPendingApprovals].([]string); ok && len(p) > 0 {
		return p[0]
	}
	return ""
}

func (m *agentMiddleware) output(res *agent.Result) any {
	if m.o.Output != nil {
		return m.o.Output(res)
	}
	if res.Turn != nil && res.Turn.Data != nil {
		return res.Turn.Data
	}
	if res.Turn != nil && res.Turn.Response != nil {
		return res.Turn.Response.Text()
	}
	return ""
}

// After verifies the final answer: deliver, repair, or fail safe.
func (m *agentMiddleware) After(ctx context.Context, mc *agent.MiddlewareContext, res *agent.Result) (*agent.Result, error) {
	r := runOf(mc.Metadata)
	if r == nil {
		return res, nil
	}
	out := m.output(res)
	v, err := r.Verify(ctx, out)
	if err != nil {
		return nil, r.failWith(ctx, err, InternalError)
	}
	gate, _ := mc.Metadata[metadataKey+".gate"].(*streamGate)
	if v.Passed {
		env, err := r.Deliver(ctx, out)
		if err != nil {
			return nil, r.failWith(ctx, err, InternalError)
		}
		gate.release()
		return withEnvelope(res, env)
	}
	gate.drop() // this answer was rejected: what it held back never goes out
	if err := r.Repair(ctx, Execute, "verification failed"); err != nil {
		return nil, err // failed safe: err carries the uncertain envelope
	}
	prompt := defaultRepairPrompt(v)
	if m.o.RepairPrompt != nil {
		prompt = m.o.RepairPrompt(v)
	}
	// The repair streams to the same consumer when this run is streamed.
	next, err := mc.Rerun(withRun(ctx, r), llm.NewUserMessage(llm.Text(prompt)), res.State)
	if err != nil {
		return nil, err
	}
	return &agent.Result{Turn: turns.Merge(nil, res.Turn, next.Turn), State: next.State}, nil
}

// OnError ends the run in fail_safe for any failure that is not a pause.
func (m *agentMiddleware) OnError(ctx context.Context, mc *agent.MiddlewareContext, err error) (*agent.Result, error) {
	r := runOf(mc.Metadata)
	if r == nil {
		return nil, nil
	}
	if paused, _ := mc.Metadata[metadataKey+".paused"].(bool); paused {
		return nil, nil
	}
	if r.Phase().Terminal() {
		return nil, nil
	}
	var le *llm.Error
	if errors.As(err, &le) {
		return nil, r.failWithCause(ctx, err, ModelFailed, modelCause(le))
	}
	return nil, r.failWith(ctx, err, InternalError)
}

// modelCause is what a run reports of a model failure: the provider's
// code and message, never the underlying Go error.
func modelCause(e *llm.Error) *Cause {
	c := &Cause{Code: string(e.Code), Message: e.Message, Provider: e.Provider, Status: e.StatusCode}
	if c.Code == "" {
		c.Code = string(llm.ProviderError)
	}
	if c.Message == "" {
		c.Message = "the model's provider failed"
	}
	return c
}

// The keys of agent.Event.Metadata on the deliver content a streamed
// governed run lets through before verification (§4.2). Such an event
// also has Unverified set. EventStreaming holds the chunk's *Streaming:
// its chunk_id and stream_index (0, 1, … across the run, repairs
// included); the is_final chunk is the envelope of the run's end, in the
// result's state (EnvelopeOf) or the *Error.
//
// What a consumer of a governed agent's Stream sees of the deliver
// content — the UPP text, object, image, audio and video deltas: while
// the run has made no call above read_only, each delta comes at once,
// marked unverified (Run.Chunk); once it has, the deltas are held back
// and come, unmarked, only after the run delivered — just before the
// stream's result. A run that fails safe or pauses never sends what it
// held back, and its unverified deltas are never confirmed: its stream
// ends with the *Error. A rejected answer's held-back deltas are
// dropped; the repair that follows streams the same way.
const (
	EventRequestID = "uaicp.request_id"
	EventStreaming = "uaicp.streaming"
)

// WrapStream gates the run's deliver content on the way to the consumer
// (see EventRequestID).
func (m *agentMiddleware) WrapStream(ctx context.Context, mc *agent.MiddlewareContext, emit func(agent.Event)) func(agent.Event) {
	r := runOf(mc.Metadata)
	if r == nil {
		return emit
	}
	g := &streamGate{run: r, next: emit}
	mc.Metadata[metadataKey+".gate"] = g
	return g.pass
}

// streamGate passes one agent call's deliver content through Run.Chunk,
// and holds it back once Chunk refuses.
type streamGate struct {
	run  *Run
	next func(agent.Event)

	mu   sync.Mutex // held while passing content on, to keep stream_index in order
	held []agent.Event
}

// deliverContent returns the content of an event that carries part of
// the model's answer.
func deliverContent(ev agent.Event) (any, bool) {
	if ev.Source != agent.SourceUPP || ev.UPP == nil {
		return nil, false
	}
	switch ev.UPP.Type {
	case llm.TextDelta, llm.ObjectDelta:
		return ev.UPP.Delta.Text, true
	case llm.ImageDelta, llm.AudioDelta, llm.VideoDelta:
		return ev.UPP.Delta.Data, true
	}
	return nil, false
}

func (g *streamGate) pass(ev agent.Event) {
	content, ok := deliverContent(ev)
	if !ok {
		g.next(ev)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 { // once holding, hold everything after, in order
		if env, ok := g.run.Chunk(content); ok {
			ev.Unverified = true
			ev.Metadata = maps.Clone(ev.Metadata)
			if ev.Metadata == nil {
				ev.Metadata = map[string]any{}
			}
			ev.Metadata[EventRequestID], ev.Metadata[EventStreaming] = env.RequestID, env.Streaming
			g.next(ev)
			return
		}
	}
	g.held = append(g.held, ev)
}

// release passes on what was held back: the run has delivered.
func (g *streamGate) release() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ev := range g.held {
		g.next(ev)
	}
	g.held = nil // later content finds the run terminal: Chunk refuses, and it stays held
}

// drop discards what was held back: the answer was rejected.
func (g *streamGate) drop() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.held = nil
	g.mu.Unlock()
}

func withEnvelope(res *agent.Result, env *Envelope) (*agent.Result, error) {
	b, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &agent.Result{Turn: res.Turn, State: res.State.WithMetadata(metadataEnvelope, m)}, nil
}

// EnvelopeOf returns the envelope a governed agent run recorded in its
// state.
func EnvelopeOf(s *agent.State) (*Envelope, bool) {
	if s == nil {
		return nil, false
	}
	v, ok := s.Value(metadataEnvelope)
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, false
	}
	return &env, true
}

func defaultRepairPrompt(v *Verdict) string {
	var b strings.Builder
	b.WriteString("Your answer did not pass verification")
	if len(v.Reasons) > 0 {
		fmt.Fprintf(&b, " (%v)", v.Reasons)
	}
	b.WriteString(". Failing checks:\n")
	for _, rep := range v.Reports {
		for _, c := range rep.Checks {
			if c.Result == CheckFail {
				fmt.Fprintf(&b, "- %s / %s", rep.VerifierID, c.CheckID)
				if c.Details != "" {
					b.WriteString(": " + c.Details)
				}
				b.WriteByte('\n')
			}
		}
	}
	b.WriteString("Gather what is missing with the tools you have, then answer again.")
	return b.String()
}

// ResumeAgent continues a governed agent run that paused for approvals,
// once they are decided (also in a new process: the run and the agent's
// state come from the journal). The calls that waited run now — approved
// ones exactly once, denied ones answer the model with APPROVAL_DENIED —
// their results replace the placeholders in the paused state, and the
// agent goes on from there under the same run. a must be configured like
// the agent that paused (the same tools, Toolsets and g.Middleware): the
// calls are redone with the tools a offers for the paused state
// (agent.Agent.Tools), a Toolset's included.
func ResumeAgent(ctx context.Context, g *Governor, a *agent.Agent, requestID string) (*agent.Result, error) {
	r, err := g.Attach(ctx, requestID)
	if err != nil {
		return nil, err
	}
	ctx = resumeTrace(ctx, r.traceID, r.startSpan)
	state, err := resumeState(ctx, r, a)
	if err != nil {
		return nil, err
	}
	return a.Generate(withRun(ctx, r), nil, state)
}

// resumeState resumes r and redoes the calls its pause waited for, in a
// span of its own (the run_resumed event, an execute_tool span per call
// redone), and returns the state the agent goes on from.
func resumeState(ctx context.Context, r *Run, a *agent.Agent) (_ *agent.State, err error) {
	ctx, span := r.startResume(ctx)
	defer func() { telemetry.EndError(span, err) }()
	snap, err := r.Resume(ctx)
	if err != nil {
		return nil, err
	}
	state, err := agent.FromJSON(snap)
	if err != nil {
		return nil, r.failWith(ctx, fmt.Errorf("paused state: %w", err), InternalError)
	}
	state, err = redoPaused(ctx, r, a, state)
	if err != nil {
		return nil, r.failWith(ctx, err, InternalError)
	}
	return state, nil
}

// redoPaused re-invokes the calls of the state's last tool round that had
// an approval request, and patches their results.
func redoPaused(ctx context.Context, r *Run, a *agent.Agent, state *agent.State) (*agent.State, error) {
	msgs := state.Messages()
	n := len(msgs)
	if n < 2 {
		return nil, errors.New("paused state has no tool round")
	}
	results, ok := msgs[n-1].(*llm.ToolResultMessage)
	asst, ok2 := msgs[n-2].(*llm.AssistantMessage)
	if !ok || !ok2 {
		return nil, errors.New("paused state does not end with a tool round")
	}
	waited := map[string]bool{}
	for _, ap := range r.approvalRequests() {
		waited[ap.CallID] = true
	}
	offered, err := a.Tools(ctx, state)
	if err != nil {
		return nil, err
	}
	tools := map[string]llm.Tool{}
	for _, t := range offered {
		tools[t.Name] = t
	}
	patched := &llm.ToolResultMessage{MessageInfo: results.MessageInfo, Results: append([]llm.ToolResult(nil), results.Results...)}
	for _, call := range asst.ToolCalls {
		if !waited[call.ToolCallID] {
			continue
		}
		t, ok := tools[call.ToolName]
		if !ok {
			return nil, fmt.Errorf("the agent has no tool %q to resume with", call.ToolName)
		}
		d, _ := DeclarationOf(t)
		spec := ToolSpec{Name: t.Name, Tier: d.Tier, Rollback: d.Rollback}
		run := t.Run
		res := llm.ToolResult{ToolCallID: call.ToolCallID}
		if refused, ok := r.recordedOutcome(call.ToolCallID); ok {
			// Redone before a crash interrupted this resume: what
			// happened stands (a commit is replayed by Invoke below).
			res.Result, res.IsError = refused.Error(), true
			patched.Results = replaceResult(patched.Results, res)
			continue
		}
		cctx, span := r.startRedo(ctx, t, call.ToolCallID)
		inv, err := r.Invoke(cctx, spec, Call{ID: call.ToolCallID, Args: call.Arguments}, func(ctx context.Context) (any, error) {
			if run == nil {
				return nil, fmt.Errorf("tool %s has no Run", spec.Name)
			}
			return run(ctx, call.Arguments)
		})
		telemetry.EndError(span, err)
		if err != nil {
			if errors.Is(err, ApprovalRequired) {
				return nil, err
			}
			res.Result, res.IsError = err.Error(), true
		} else {
			res.Result = inv.Result
		}
		patched.Results = replaceResult(patched.Results, res)
	}
	out := append(append([]llm.Message(nil), msgs[:n-1]...), patched)
	return state.WithContext(out), nil
}

// replaceResult puts res in place of the result of its call, or appends
// it.
func replaceResult(results []llm.ToolResult, res llm.ToolResult) []llm.ToolResult {
	for i := range results {
		if results[i].ToolCallID == res.ToolCallID {
			results[i] = res
			return results
		}
	}
	return append(results, res)
}
