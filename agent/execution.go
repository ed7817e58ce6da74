package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/agentry-dev/agentry/internal/turns"
	"github.com/agentry-dev/agentry/llm"
)

// ExecutionStrategy decides how an agent executes (UAP-1.1 §5): Loop,
// ReAct and Plan in agent/execution, or a custom one. Execute runs one
// agent call from ec.State and ec.Input to a Result.
//
// A strategy has a single code path for Generate and Stream: it uses the
// ExecutionContext's primitives (Call, StartStep, EndStep, Finish), which
// stream when the run is streamed. That is what makes a stream's Result
// identical to what Generate returns (§11.3). Strategies must not keep
// per-run state in the strategy value: one value serves concurrent runs.
type ExecutionStrategy interface {
	Name() string
	Execute(ctx context.Context, ec *ExecutionContext) (*Result, error)
}

// Result is the outcome of a run (GenerateResult and ExecutionResult of
// UAP-1.1).
type Result struct {
	// Turn merges every model call of the run: its Messages are the input
	// followed by everything produced, its usage and tool executions those
	// of all calls, its Response the last reply.
	Turn *llm.Turn
	// State is the state reached: the starting state plus the input and
	// every message produced.
	State *State
}

// ExecutionContext is what a strategy works with, and the primitives it
// builds on. It serves one run.
type ExecutionContext struct {
	Agent *Agent
	// LLM is the UPP instance of the current step (UAP uses UPP
	// directly): the agent's own, or, for an agent with Toolsets, one
	// bound to the tools StartStep resolved for the step. Read it after
	// StartStep.
	LLM *llm.LLMInstance
	// Input is the new input; nil when a run is resumed from its state.
	Input llm.Message
	// State is the state the run starts from, before Input.
	State *State
	// Hooks are the agent's strategy hooks (never nil).
	Hooks *StrategyHooks
	// SessionID is the checkpoint session ("" without checkpoints).
	SessionID string

	emit func(Event)
	mc   *MiddlewareContext
	last *State // the latest state, for OnError
	// toolsErr is why the current step's tools could not be resolved;
	// the step's Call returns it.
	toolsErr error

	mu         sync.Mutex            // Call may run concurrently (plan steps)
	upp        uppSlab               // the UPP events of a streamed run's calls
	uppForward func(llm.StreamEvent) // forwardUPP(&upp), used by the call holding upp
	uap        []UAPEvent            // the UAP events' array being filled
	turns      []*llm.Turn
	traces     []SubagentTrace
	toolRounds int
}

// streaming reports whether the run is streamed.
func (ec *ExecutionContext) streaming() bool { return ec.emit != nil }

// Emit sends a UAP event (nothing when not streaming).
func (ec *ExecutionContext) Emit(typ EventType, step int, data map[string]any) {
	if ec.emit != nil {
		ec.emit(Event{Source: SourceUAP, UAP: ec.uapEvent(UAPEvent{Type: typ, Step: step, AgentID: ec.Agent.id, Data: data})})
	}
}

// uapSlab is how many UAP events of a run are allocated at once (4 × 48
// bytes: a size class of its own).
const uapSlab = 4

// uapEvent returns a new copy of ev, from an array of uapSlab events
// (each event is handed out once, and never changed after).
func (ec *ExecutionContext) uapEvent(ev UAPEvent) *UAPEvent {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if len(ec.uap) == cap(ec.uap) {
		ec.uap = make([]UAPEvent, 0, uapSlab)
	}
	ec.uap = append(ec.uap, ev)
	return &ec.uap[len(ec.uap)-1]
}

// data builds event data only when there is a stream to send it to.
func (ec *ExecutionContext) data(key string, value any) map[string]any {
	if ec.emit == nil {
		return nil
	}
	return map[string]any{key: value}
}

// Begin returns the state a run works on: the starting state with the
// input appended and the agent's ID in the metadata.
func (ec *ExecutionContext) Begin() *State {
	s := ec.State.clone() // one new state, not one per change
	if ec.Input != nil {
		s.messages = append(s.messages, ec.Input)
	}
	if len(s.metadata) == 0 {
		s.metadata = map[string]any{MetadataAgentID: ec.Agent.idValue}
	} else {
		s.metadata = maps.Clone(s.metadata)
		s.metadata[MetadataAgentID] = ec.Agent.idValue
	}
	ec.last = s
	return s
}

// StartStep begins the next step: it numbers it (the state's step + 1,
// so numbering continues across runs of a session), calls OnStepStart and
// emits step_start with data. For an agent with Options.Toolsets it then
// resolves the step's tools and sets LLM to an instance bound to them; if
// they cannot be resolved, the step's Call fails with the reason.
func (ec *ExecutionContext) StartStep(ctx context.Context, state *State, data map[string]any) (*State, int) {
	step := state.Step() + 1
	state = state.WithStep(step)
	ec.last = state
	if ec.Hooks.OnStepStart != nil {
		ec.Hooks.OnStepStart(ctx, step, state)
	}
	ec.Emit(EventStepStart, step, data)
	if len(ec.Agent.opts.Toolsets) > 0 {
		inst, err := ec.Agent.stepLLM(ctx, state)
		if err == nil {
			ec.LLM = inst
		}
		ec.toolsErr = err
	}
	return state, step
}

// Call makes one model call with inst (usually ec.LLM): one cycle of the
// UPP tool loop (llm.GenerateStep, or EmitStep when streaming, forwarding
// its events), with the run's ToolContext in the tools' context. The turn
// becomes part of the run's merged Turn. history is sent as is; inputs are
// new messages. Call is safe for concurrent use (the plan strategy runs
// independent steps at once); the other primitives are not.
func (ec *ExecutionContext) Call(ctx context.Context, step int, state *State, inst *llm.LLMInstance, history []llm.Message, inputs ...llm.Input) (*llm.Turn, error) {
	if err := ctx.Err(); err != nil {
		return nil, llm.AsError(err, ec.Agent.provider(), llm.Cancelled)
	}
	if ec.toolsErr != nil {
		return nil, ec.toolsErr
	}
	cctx := &toolCtx{Context: ctx}
	tc := &cctx.tc
	tc.AgentID, tc.SessionID, tc.Step, tc.State, tc.emit = ec.Agent.id, ec.SessionID, step, state, ec.emit
	if ec.mc != nil {
		tc.Metadata = ec.mc.Metadata
	}
	limit := ec.Agent.toolRoundLimit
	var slab *uppSlab
	ec.mu.Lock()
	tc.roundsExhausted = limit > 0 && ec.toolRounds >= limit
	if ec.emit != nil {
		if slab = &ec.upp; slab.busy {
			slab = &uppSlab{} // a concurrent call (plan steps) has the run's
		}
		slab.busy = true
	}
	ec.mu.Unlock()
	var (
		turn *llm.Turn
		err  error
	)
	if ec.emit == nil {
		turn, err = inst.GenerateStep(cctx, history, inputs...)
	} else {
		// The step's events go straight into the run's stream: no
		// stream (goroutine, buffer) of its own per step. EmitStep's
		// calls never overlap, and no other call uses slab meanwhile.
		turn, err = inst.EmitStep(cctx, history, ec.forwardUPP(slab), inputs...)
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if slab != nil {
		slab.busy = false
	}
	ec.traces = append(ec.traces, tc.takeTraces()...)
	if err != nil {
		return nil, err
	}
	if ec.turns == nil {
		ec.turns = make([]*llm.Turn, 0, 4)
	}
	ec.turns = append(ec.turns, turn)
	if turn.Response != nil && turn.Response.HasToolCalls() {
		if tc.roundsExhausted {
			if h := ec.Agent.opts.ToolStrategy; h != nil && h.OnMaxIterations != nil {
				h.OnMaxIterations(ctx, limit)
			}
			return nil, llm.NewError(llm.InvalidRequest, ec.Agent.provider(), fmt.Sprintf("tool execution exceeded maximum iterations (%d)", limit), nil)
		}
		ec.toolRounds++
	}
	return turn, nil
}

// forwardUPP returns the function that passes a call's UPP events into
// the run's stream, copied into slab: for the run's own slab, made once a
// run (only the call holding the slab uses it).
func (ec *ExecutionContext) forwardUPP(slab *uppSlab) func(llm.StreamEvent) {
	if slab == &ec.upp && ec.uppForward != nil {
		return ec.uppForward
	}
	first := ec.Agent.uppHint.Load()
	f := func(ev llm.StreamEvent) {
		ec.emit(Event{Source: SourceUPP, UPP: slab.add(&ev, first)})
	}
	if slab == &ec.upp {
		ec.uppForward = f
	}
	return f
}

// uppSlab holds the copies of a run's UPP events that its Events point
// to, allocated a few at a time rather than one by one. The first array
// of a run is sized for as many events as the agent's previous streamed
// run had (Agent.uppHint, at most maxUPPHint), the next ones for
// eventSlab: a consumer that keeps one event keeps its array alive, so
// none is large. Events are never reused or overwritten.
type uppSlab struct {
	buf  []llm.StreamEvent
	n    int  // events copied so far
	busy bool // a call is using it (guarded by ExecutionContext.mu)
}

const (
	// eventSlab is how many UPP events an array holds after the first
	// (8 × 176 bytes fills a size class of the Go allocator exactly).
	eventSlab = 8
	// maxUPPHint bounds the first array.
	maxUPPHint = 64
)

// add copies ev into the slab and returns the copy; first is how many
// events the first array is made for.
func (s *uppSlab) add(ev *llm.StreamEvent, first int32) *llm.StreamEvent {
	if len(s.buf) == cap(s.buf) {
		n := eventSlab
		if s.n == 0 && first > eventSlab {
			n = int(first)
		}
		// slices.Grow rounds the capacity up to the allocation's size.
		s.buf = slices.Grow([]llm.StreamEvent(nil), n)
	}
	s.buf = append(s.buf, *ev)
	s.n++
	return &s.buf[len(s.buf)-1]
}

// EndStep finishes a step whose model call(s) produced turn (nil when the
// step made none) and reached state: it records sub-agent traces, calls
// OnAct/OnObserve and OnStepEnd, emits action/observation and step_end,
// runs the middleware step hooks (which may replace the state), queues the
// checkpoint (waiting only while the session's checkpoint queue is full,
// see Options.CheckpointQueue), and evaluates StopCondition. It returns the state to
// continue from and whether to stop; an error from a step hook ends the
// run.
func (ec *ExecutionContext) EndStep(ctx context.Context, step int, turn *llm.Turn, state *State, data map[string]any) (*State, bool, error) {
	ec.mu.Lock()
	traces := ec.traces
	ec.traces = nil
	ec.mu.Unlock()
	for _, t := range traces {
		state = state.WithSubagentTrace(t)
	}
	if turn != nil && (ec.Hooks.OnAct != nil || ec.emit != nil) {
		var calls []llm.ToolCall
		for _, m := range turn.Messages {
			if a, ok := m.(*llm.AssistantMessage); ok {
				calls = append(calls, a.ToolCalls...)
			}
		}
		if len(calls) > 0 {
			if ec.Hooks.OnAct != nil {
				ec.Hooks.OnAct(ctx, step, calls)
			}
			ec.Emit(EventAction, step, ec.data("toolCalls", calls))
		}
	}
	if turn != nil {
		if len(turn.ToolExecutions) > 0 {
			if ec.Hooks.OnObserve != nil {
				ec.Hooks.OnObserve(ctx, step, turn.ToolExecutions)
			}
			ec.Emit(EventObservation, step, ec.data("observations", turn.ToolExecutions))
		}
	}
	ec.last = state
	if ec.Hooks.OnStepEnd != nil {
		ec.Hooks.OnStepEnd(ctx, step, &Result{Turn: turn, State: state})
	}
	ec.Emit(EventStepEnd, step, data)
	var hookErr error
	for _, m := range ec.Agent.opts.Middleware {
		h, ok := m.(stepHook)
		if !ok {
			continue
		}
		next, err := h.OnStep(ctx, ec.mc, StepInfo{Step: step, Turn: turn, State: state})
		if next != nil {
			state = next
		}
		if err != nil {
			hookErr = err
			break
		}
	}
	ec.last = state
	ec.Agent.checkpoint(ctx, ec.SessionID, state)
	if hookErr != nil {
		return state, true, hookErr
	}
	stop := ec.Hooks.StopCondition != nil && ec.Hooks.StopCondition(ctx, state)
	return state, stop, nil
}

// Finish completes the run: it merges the run's model calls into one
// Turn, records the session in the state's metadata, and calls OnComplete.
func (ec *ExecutionContext) Finish(ctx context.Context, state *State) *Result {
	if ec.SessionID != "" {
		state = state.WithMetadata(MetadataSessionID, ec.SessionID)
	}
	r := &Result{Turn: ec.mergedTurn(), State: state}
	ec.last = state
	if ec.Hooks.OnComplete != nil {
		ec.Hooks.OnComplete(ctx, r)
	}
	return r
}

func (ec *ExecutionContext) mergedTurn() *llm.Turn {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return turns.Merge(ec.Input, ec.turns...)
}

// RunLoop runs the loop strategy (UAP-1.1 §5.2): each step is one model
// call and the round of tools it requests; the run ends when a reply asks
// for no tools, when StopCondition says so, or after maxIterations tool
// rounds (0 or llm.Infinity: no limit). The default strategy and
// execution.Loop are RunLoop; custom strategies may build on it.
func (ec *ExecutionContext) RunLoop(ctx context.Context, maxIterations int) (*Result, error) {
	state := ec.Begin()
	for rounds := 0; ; {
		var step int
		state, step = ec.StartStep(ctx, state, ec.data("iteration", state.Step()+1))
		turn, err := ec.Call(ctx, step, state, ec.LLM, state.messages)
		if err != nil {
			return nil, err
		}
		state = state.WithMessages(turn.Messages...)
		var stop bool
		state, stop, err = ec.EndStep(ctx, step, turn, state, ec.data("iteration", step))
		if err != nil {
			return nil, err
		}
		if stop || turn.Response == nil || !turn.Response.HasToolCalls() {
			break
		}
		rounds++
		if maxIterations > 0 && maxIterations != llm.Infinity && rounds >= maxIterations {
			break
		}
	}
	return ec.Finish(ctx, state), nil
}
