package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/llm"
)

// Options configures an agent (UAP-1.1 §4.2 AgentOptions). It embeds
// llm.LLMOptions, passed through to UPP unchanged — model, config, params,
// system, tools, toolStrategy, structure and UPP middleware — with two
// differences UAP requires: limits default to infinite, and a
// ToolStrategy.MaxIterations of 0 means no limit (set one explicitly to
// cap tool rounds across a run).
type Options struct {
	llm.LLMOptions
	// Execution is the strategy; nil means Loop with no limit.
	Execution ExecutionStrategy
	// Toolsets supply tools resolved before every step, after
	// LLMOptions.Tools (see Toolset): a workflow's stage, a UI's current
	// actions. Without Toolsets the tools are fixed when the agent is
	// created.
	Toolsets []Toolset
	// Middleware wraps every run (UAP middleware, §9). UPP middleware is
	// LLMOptions.Middleware.
	Middleware []Middleware
	// Strategy holds the lifecycle hooks (AgentStrategy, §10).
	Strategy StrategyHooks
	// Checkpoints, when set, receives the state after every step (§12.3),
	// in order, from a background queue per session: a step does not wait
	// for the store, and a failed save (an error or a panic) is logged
	// and counted, never returned. A run, before it returns, waits (until
	// its context ends) for its session's queued saves.
	Checkpoints CheckpointStore
	// CheckpointQueue bounds how many states of one session may wait for
	// the store while another is being written; 0 means 16. A step that
	// finds its session's queue full waits until the store takes the
	// next state (back-pressure: a store slower than the steps slows the
	// run instead of filling memory); if the run's context ends while it
	// waits, its state is queued anyway. Negative is an error.
	CheckpointQueue int
	// CoalesceCheckpoints keeps at most one state per session waiting:
	// a newer state replaces the waiting one, so steps never wait, but a
	// store slower than the steps saves only some of them (the newest
	// always, in order). Off, every step's state is saved.
	CoalesceCheckpoints bool
	// SessionID names the checkpoint session; with Checkpoints and no
	// SessionID a UUIDv4 is generated.
	SessionID string
	// Logger receives checkpoint failures and other operational records;
	// nil uses slog.Default().
	Logger *slog.Logger
	// Name names the agent in telemetry: each run is a span "invoke_agent
	// {Name}" with gen_ai.agent.name (OpenTelemetry GenAI semantic
	// conventions), made by LLMOptions.TracerProvider. Empty: the span
	// is "invoke_agent" and carries the agent's ID only.
	Name string
}

// Agent is a configured agent (UAP-1.1 §4.3). It is safe for concurrent
// use; each call is an independent run over the state it is given.
type Agent struct {
	id             string
	idValue        any // id as an interface value, boxed once (state metadata)
	sessionID      string
	opts           Options
	llm            *llm.LLMInstance
	hooks          *StrategyHooks
	exec           ExecutionStrategy
	toolRoundLimit int
	ckpt           *checkpointer
	userSchedule   func([]llm.ToolCall) [][]int // ToolStrategy.Schedule as given, for stepLLM
	steps          *stepCache                   // the last step's instance, for stepLLM
	tracer         trace.Tracer
	spanName       string // "invoke_agent {name}"
	// uppHint is how many UPP events the last streamed run had (at most
	// maxUPPHint): the size of a run's first array of them (uppSlab).
	uppHint *atomic.Int32
}

// New creates an agent: it binds the model through llm.LLM (so the UPP
// capability checks apply) and checks the tool ordering for cycles. The
// tools of Options.Toolsets are resolved, and checked the same way, at
// each step.
func New(options *Options) (*Agent, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	a := &Agent{id: ids.New(), opts: opts, sessionID: opts.SessionID, exec: opts.Execution, steps: &stepCache{}, uppHint: new(atomic.Int32),
		tracer: telemetry.Tracer(opts.TracerProvider), spanName: spanNameOf(opts.Name)}
	a.idValue = a.id
	if a.exec == nil {
		a.exec = defaultLoop{}
	}
	a.hooks = &a.opts.Strategy
	if opts.CheckpointQueue < 0 {
		return nil, fmt.Errorf("agent: Options.CheckpointQueue is %d, want 0 (the default) or more", opts.CheckpointQueue)
	}
	if opts.Checkpoints != nil {
		if a.sessionID == "" {
			a.sessionID = ids.New()
		}
		logger := opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		a.ckpt = newCheckpointer(opts.Checkpoints, logger, opts.CheckpointQueue, opts.CoalesceCheckpoints)
	}

	lo := opts.LLMOptions
	lo.Tools = make([]llm.Tool, len(opts.Tools))
	for i, t := range opts.Tools {
		lo.Tools[i] = a.wrapTool(t)
	}
	schedule, err := scheduler(lo.Tools)
	if err != nil {
		return nil, err
	}
	ts := llm.ToolUseStrategy{}
	if opts.ToolStrategy != nil {
		ts = *opts.ToolStrategy
	}
	a.userSchedule = ts.Schedule
	if ts.MaxIterations != llm.Infinity && ts.MaxIterations > 0 {
		a.toolRoundLimit = ts.MaxIterations
	}
	ts.MaxIterations = llm.Infinity // the agent counts rounds itself (§2.4)
	if schedule != nil {
		ts.Schedule = schedule
	}
	userBefore := ts.OnBeforeCall
	ts.OnBeforeCall = func(ctx context.Context, t *llm.Tool, args map[string]any) llm.BeforeCall {
		if tc, ok := ToolContextFrom(ctx); ok && tc.roundsExhausted {
			return llm.BeforeCall{} // over the tool-round limit: the run fails after this reply
		}
		if userBefore != nil {
			return userBefore(ctx, t, args)
		}
		return llm.BeforeCall{Proceed: true}
	}
	lo.ToolStrategy = &ts
	inst, err := llm.LLM(&lo)
	if err != nil {
		return nil, err
	}
	a.llm = inst
	return a, nil
}

// ID returns the agent's UUIDv4.
func (a *Agent) ID() string { return a.id }

// SessionID returns the checkpoint session ("" without checkpoints).
func (a *Agent) SessionID() string { return a.sessionID }

// LLM returns the agent's UPP instance, bound to Options.Tools (a step of
// an agent with Toolsets uses one bound to the step's tools:
// ExecutionContext.LLM).
func (a *Agent) LLM() *llm.LLMInstance { return a.llm }

// Options returns the options the agent was created with.
func (a *Agent) Options() Options { return a.opts }

// WithSession returns an agent sharing a's configuration, model instance
// and checkpoint queue but checkpointing under sessionID.
func (a *Agent) WithSession(sessionID string) *Agent {
	b := *a
	b.sessionID = sessionID
	return &b
}

func (a *Agent) provider() string { return a.opts.Model.Provider.Name() }

func (a *Agent) checkpoint(ctx context.Context, sessionID string, s *State) {
	if a.ckpt != nil && sessionID != "" {
		a.ckpt.enqueue(ctx, sessionID, s)
	}
}

// FlushCheckpoints waits until every checkpoint queued so far, of every
// session, is written (or has failed). Use it before shutdown.
func (a *Agent) FlushCheckpoints(ctx context.Context) error {
	if a.ckpt == nil {
		return nil
	}
	return a.ckpt.flush(ctx)
}

// CheckpointStats returns how many checkpoint saves succeeded and failed.
func (a *Agent) CheckpointStats() (saved, failed int64) {
	if a.ckpt == nil {
		return 0, 0
	}
	return a.ckpt.saved.Load(), a.ckpt.failed.Load()
}

// toMessage normalizes an input: a block becomes a user message.
func toMessage(in llm.Input) (llm.Message, error) {
	switch v := in.(type) {
	case nil:
		return nil, nil
	case llm.Message:
		return v, nil
	case llm.ContentBlock:
		return llm.NewUserMessage(v), nil
	}
	return nil, fmt.Errorf("agent: unsupported input %T", in)
}

// Generate runs the agent on input from state (nil: an empty state) and
// returns the turn and the new state (UAP-1.1 §4.4). The new state holds
// state's history, the input and everything the run produced; state itself
// is not changed. A nil input continues from state (see Resume).
func (a *Agent) Generate(ctx context.Context, input llm.Input, state *State) (*Result, error) {
	return a.run(ctx, input, state, nil)
}

// Stream runs the agent like Generate, streaming UAP and UPP events
// (UAP-1.1 §4.5, §11). Its Result is what Generate would have returned.
func (a *Agent) Stream(ctx context.Context, input llm.Input, state *State) *StreamResult {
	return newStreamResult(ctx, func(ctx context.Context, emit func(Event)) (*Result, error) {
		return a.run(ctx, input, state, emit)
	})
}

// Ask is multi-turn execution (UAP-1.1 §4.6): the input is appended to the
// state's history, the agent runs, and the returned state holds the
// history, the input and the response — each exactly once. It is Generate;
// the separate name follows the specification.
func (a *Agent) Ask(ctx context.Context, input llm.Input, state *State) (*Result, error) {
	return a.Generate(ctx, input, state)
}

// Query is stateless single-turn execution (UAP-1.1 §4.7): it runs from an
// empty state and returns only the turn.
func (a *Agent) Query(ctx context.Context, input llm.Input) (*llm.Turn, error) {
	r, err := a.Generate(ctx, input, Initial())
	if err != nil {
		return nil, err
	}
	return r.Turn, nil
}

// ErrNothingToResume is returned by Resume when the session's last state
// ends with a final reply: the run it belongs to completed.
var ErrNothingToResume = errors.New("agent: the session's run already completed")

// Resume loads the session's latest checkpoint and continues the run that
// was interrupted (after a crash, say): the strategy goes on from the
// checkpointed state without a new input, and step numbering continues.
// It fails with ErrNoCheckpoint when the session has none.
func (a *Agent) Resume(ctx context.Context, sessionID string) (*Result, error) {
	if a.opts.Checkpoints == nil {
		return nil, errors.New("agent: Resume needs Options.Checkpoints")
	}
	if err := a.FlushCheckpoints(ctx); err != nil { // this process's pending saves come first
		return nil, err
	}
	s, err := a.opts.Checkpoints.Load(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if !Resumable(s) {
		return nil, ErrNothingToResume
	}
	return a.WithSession(sessionID).Generate(ctx, nil, s)
}

// Resumable reports whether a run can continue from s without new input:
// it has history, and it does not end with a final reply (an assistant
// message without tool calls) unless a plan is unfinished.
func Resumable(s *State) bool {
	n := s.Len()
	if n == 0 {
		return false
	}
	if planUnfinished(s.plan) {
		return true
	}
	m, ok := s.messages[n-1].(*llm.AssistantMessage)
	return !ok || m.HasToolCalls()
}

func (a *Agent) run(ctx context.Context, input llm.Input, state *State, emit func(Event)) (res *Result, err error) {
	ctx, span := a.startSpan(ctx)
	defer func() { telemetry.EndError(span, err) }()
	msg, err := toMessage(input)
	if err != nil {
		return nil, err
	}
	if state == nil {
		state = Initial()
	}
	rc := &runContexts{
		mc: MiddlewareContext{Agent: a, Input: msg, State: state, Streaming: emit != nil, Metadata: map[string]any{}, emit: emit},
		ec: ExecutionContext{Agent: a, LLM: a.llm, Hooks: a.hooks, SessionID: a.sessionID, emit: emit},
	}
	mc, ec := &rc.mc, &rc.ec
	ec.mc = mc
	if a.ckpt != nil && a.sessionID != "" {
		// The run's end flushes its checkpoints (never beyond ctx).
		defer a.ckpt.flushSession(ctx, a.sessionID)
	}

	res, err = a.runMiddleware(ctx, mc, ec)
	if n := ec.upp.n; n > 0 {
		a.uppHint.Store(int32(min(n, maxUPPHint)))
	}
	if err == nil {
		return res, nil
	}
	if a.hooks.OnError != nil {
		last := ec.last
		if last == nil {
			last = state
		}
		a.hooks.OnError(ctx, err, last)
	}
	for i := len(a.opts.Middleware) - 1; i >= 0; i-- {
		r, rerr := a.opts.Middleware[i].OnError(ctx, mc, err)
		if rerr != nil {
			return nil, rerr
		}
		if r != nil {
			return r, nil
		}
	}
	return nil, err
}

// runContexts are a run's contexts, allocated together.
type runContexts struct {
	mc MiddlewareContext
	ec ExecutionContext
}

func (a *Agent) runMiddleware(ctx context.Context, mc *MiddlewareContext, ec *ExecutionContext) (*Result, error) {
	emit := mc.emit
	for _, m := range a.opts.Middleware {
		next, err := m.Before(ctx, mc)
		if err != nil {
			return nil, err
		}
		if next != nil {
			*mc = *next
			mc.emit = emit
		}
	}
	if ec.emit != nil {
		for _, m := range a.opts.Middleware {
			if w, ok := m.(streamWrapper); ok {
				ec.emit = w.WrapStream(ctx, mc, ec.emit)
			}
		}
	}
	ec.Input, ec.State = mc.Input, mc.State
	if ec.State == nil {
		ec.State = Initial()
	}
	if ec.Input == nil && ec.State.Len() == 0 {
		return nil, llm.NewError(llm.InvalidRequest, a.provider(), "agent: no input and no history to continue from", nil)
	}
	res, err := a.exec.Execute(ctx, ec)
	if err != nil {
		return nil, err
	}
	if res == nil || res.State == nil {
		return nil, fmt.Errorf("agent: strategy %s returned no result", a.exec.Name())
	}
	for i := len(a.opts.Middleware) - 1; i >= 0; i-- {
		if res, err = a.opts.Middleware[i].After(ctx, mc, res); err != nil {
			return nil, err
		}
		if res == nil {
			return nil, fmt.Errorf("agent: middleware %s returned no result", a.opts.Middleware[i].Name())
		}
	}
	return res, nil
}

// defaultLoop is the strategy of an agent without Options.Execution: the
// loop with no limit (execution.Loop is the same with options).
type defaultLoop struct{}

func (defaultLoop) Name() string { return "loop" }

func (defaultLoop) Execute(ctx context.Context, ec *ExecutionContext) (*Result, error) {
	return ec.RunLoop(ctx, 0)
}

func planUnfinished(plan []PlanStep) bool {
	for _, p := range plan {
		if p.Status != PlanCompleted {
			return true
		}
	}
	return false
}
