package llm

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/stack"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// LLMOptions configures an LLMInstance (UPP-1.3 §5.2).
type LLMOptions struct {
	// Model is required: a provider's Model function returns one.
	Model ModelReference
	// Config overlays Model.Config; headers are merged, Config's winning.
	Config ProviderConfig
	// Params are copied verbatim into the vendor request body; UPP adds no
	// defaults (Anthropic's max_tokens, for one, must come from here).
	Params map[string]any
	// System is the system prompt. For a provider-native system value
	// (e.g. Anthropic blocks with cache_control) leave it empty and put the
	// value in Params["system"].
	System string
	Tools  []Tool
	// ToolStrategy customizes the tool loop; nil means UPP's defaults
	// (at most 10 tool rounds).
	ToolStrategy *ToolUseStrategy
	// Structure requests structured output conforming to this JSON Schema;
	// the parsed value is returned in Turn.Data.
	Structure Schema
	// Middleware wraps every call (UPP-1.3 §10).
	Middleware []Middleware
	// TracerProvider makes the spans of provider and tool calls ("chat
	// {model}", "execute_tool {tool}", in the OpenTelemetry GenAI
	// semantic conventions); nil is the global provider
	// (otel.GetTracerProvider), which records nothing until a program
	// installs an SDK.
	TracerProvider trace.TracerProvider
	// MeterProvider records gen_ai.client.token.usage and
	// gen_ai.client.operation.duration for each provider call; nil is the
	// global provider.
	MeterProvider metric.MeterProvider
}

// LLMInstance is a configured model (UPP-1.3 §5.3). It is safe for
// concurrent use.
type LLMInstance struct {
	opts     LLMOptions
	provider string
	handler  Handler
	caps     LLMCapabilities
	config   ProviderConfig
	tools    map[string]*Tool
	tracer   trace.Tracer
	metrics  *telemetry.GenAIMetrics
}

// LLM binds opts.Model and checks the options against the provider's
// capabilities: structured output, tools and tool names are checked here,
// media per request. Failures are INVALID_REQUEST.
func LLM(options *LLMOptions) (*LLMInstance, error) {
	var opts LLMOptions
	if options != nil {
		opts = *options
	}
	if opts.Model.Provider == nil {
		return nil, NewError(InvalidRequest, "", "LLMOptions.Model has no provider", nil)
	}
	name := opts.Model.Provider.Name()
	lp, ok := opts.Model.Provider.(LLMProvider)
	if !ok {
		return nil, NewError(InvalidRequest, name, fmt.Sprintf("provider %q does not support the llm modality", name), nil)
	}
	h, err := lp.LLMHandler(opts.Model)
	if err != nil {
		return nil, AsError(err, name, InvalidRequest)
	}
	caps := h.Capabilities()
	if opts.Structure != nil && !caps.StructuredOutput {
		return nil, NewError(InvalidRequest, name, fmt.Sprintf("provider %q does not support structured output", name), nil)
	}
	if len(opts.Tools) > 0 && !caps.Tools {
		return nil, NewError(InvalidRequest, name, fmt.Sprintf("provider %q does not support tools", name), nil)
	}
	tools := make(map[string]*Tool, len(opts.Tools))
	for i := range opts.Tools {
		t := &opts.Tools[i]
		switch {
		case t.Name == "":
			return nil, NewError(InvalidRequest, name, fmt.Sprintf("tool %d has no name", i), nil)
		case t.Run == nil:
			return nil, NewError(InvalidRequest, name, fmt.Sprintf("tool %q has no Run function", t.Name), nil)
		case tools[t.Name] != nil:
			return nil, NewError(InvalidRequest, name, fmt.Sprintf("tool name %q is not unique", t.Name), nil)
		}
		tools[t.Name] = t
	}
	if opts.ToolStrategy != nil && opts.ToolStrategy.MaxIterations < 0 {
		return nil, NewError(InvalidRequest, name, "ToolStrategy.MaxIterations is negative", nil)
	}
	var base ProviderConfig
	if opts.Model.Config != nil {
		base = *opts.Model.Config
	}
	return &LLMInstance{
		opts: opts, provider: name, handler: h, caps: caps,
		config: base.merge(opts.Config), tools: tools,
		tracer: telemetry.Tracer(opts.TracerProvider), metrics: telemetry.GenAIMetricsOf(opts.MeterProvider),
	}, nil
}

// Model returns the bound model reference.
func (l *LLMInstance) Model() ModelReference { return l.opts.Model }

// Capabilities returns the provider API's capabilities.
func (l *LLMInstance) Capabilities() LLMCapabilities { return l.caps }

// Options returns the options the instance was created with.
func (l *LLMInstance) Options() LLMOptions { return l.opts }

// Generate runs inference to completion, executing tool calls in a loop
// (UPP-1.3 §5.5). history is the conversation so far (nil for none); inputs
// are the new messages: a ContentBlock becomes a UserMessage, a Message is
// sent as is. Errors are *Error.
func (l *LLMInstance) Generate(ctx context.Context, history []Message, inputs ...Input) (*Turn, error) {
	return l.run(ctx, history, inputs, nil, false)
}

// GenerateStep runs one cycle of the tool loop: one provider call and, when
// the reply asks for tools, that one round of tool calls — then returns,
// without calling the model again. The Turn holds the input, the reply and
// the tool results; a caller continues by passing the history back.
// ToolUseStrategy.MaxIterations does not apply: the caller decides how many
// steps to take. This is an extension of UPP-1.3 that agent strategies use to
// checkpoint and stop between rounds; Generate is GenerateStep repeated.
func (l *LLMInstance) GenerateStep(ctx context.Context, history []Message, inputs ...Input) (*Turn, error) {
	return l.run(ctx, history, inputs, nil, true)
}

// Stream runs inference like Generate, streaming events (UPP-1.3 §9).
// Nothing happens until the result's Events or Turn is called; any error,
// including a provider that cannot stream, is reported there.
func (l *LLMInstance) Stream(ctx context.Context, history []Message, inputs ...Input) *StreamResult {
	if !l.caps.Streaming {
		return failedStream(ctx, NewError(InvalidRequest, l.provider, fmt.Sprintf("provider %q does not support streaming", l.provider), nil))
	}
	return newStreamResult(ctx, func(ctx context.Context, emit func(StreamEvent)) (*Turn, error) {
		return l.run(ctx, history, inputs, emit, false)
	})
}

// StreamStep is GenerateStep, streaming.
func (l *LLMInstance) StreamStep(ctx context.Context, history []Message, inputs ...Input) *StreamResult {
	if !l.caps.Streaming {
		return failedStream(ctx, NewError(InvalidRequest, l.provider, fmt.Sprintf("provider %q does not support streaming", l.provider), nil))
	}
	return newStreamResult(ctx, func(ctx context.Context, emit func(StreamEvent)) (*Turn, error) {
		return l.run(ctx, history, inputs, emit, true)
	})
}

// EmitStep is StreamStep without the stream: it runs the step on the
// calling goroutine, passes each event to emit as it happens and returns
// the Turn StreamStep's would be. Calls to emit never overlap (tool calls
// emit from their own goroutines, one at a time), and emit must not block
// for long: the step waits for it. A layer that forwards the events into
// a stream of its own (the agent package does) uses it to spare a
// goroutine and a buffer per step. A provider that cannot stream fails
// with INVALID_REQUEST, as StreamStep's result does.
func (l *LLMInstance) EmitStep(ctx context.Context, history []Message, emit func(StreamEvent), inputs ...Input) (*Turn, error) {
	if !l.caps.Streaming {
		return nil, NewError(InvalidRequest, l.provider, fmt.Sprintf("provider %q does not support streaming", l.provider), nil)
	}
	var mu sync.Mutex
	return l.run(ctx, history, inputs, func(ev StreamEvent) {
		mu.Lock()
		defer mu.Unlock()
		emit(ev)
	}, true)
}

// toMessages converts inputs to messages (UPP-1.3 §5.3).
func toMessages(inputs []Input) ([]Message, error) {
	out := make([]Message, 0, len(inputs))
	for _, in := range inputs {
		switch v := in.(type) {
		case Message:
			if v == nil || isNilMessage(v) {
				return nil, fmt.Errorf("nil message input")
			}
			out = append(out, v)
		case ContentBlock:
			out = append(out, NewUserMessage(v))
		case nil:
			return nil, fmt.Errorf("nil input")
		default:
			return nil, fmt.Errorf("unsupported input %T", in)
		}
	}
	return out, nil
}

func isNilMessage(m Message) bool {
	switch v := m.(type) {
	case *UserMessage:
		return v == nil
	case *AssistantMessage:
		return v == nil
	case *ToolResultMessage:
		return v == nil
	}
	return false
}

// checkMedia rejects user media the provider API cannot take.
func (l *LLMInstance) checkMedia(msgs []Message) error {
	for _, m := range msgs {
		u, ok := m.(*UserMessage)
		if !ok {
			continue
		}
		for _, b := range u.Content {
			var kind string
			switch b.(type) {
			case ImageBlock:
				if !l.caps.ImageInput {
					kind = "image"
				}
			case DocumentBlock:
				if !l.caps.DocumentInput {
					kind = "document"
				}
			case AudioBlock:
				if !l.caps.AudioInput {
					kind = "audio"
				}
			case VideoBlock:
				if !l.caps.VideoInput {
					kind = "video"
				}
			}
			if kind != "" {
				return NewError(InvalidRequest, l.provider, fmt.Sprintf("provider %q does not support %s input", l.provider, kind), nil)
			}
		}
	}
	return nil
}

func (l *LLMInstance) fail(err error) *Error { return AsError(err, l.provider, ProviderError) }

// run is the tool loop shared by Generate (emit == nil) and Stream; with
// oneCycle it stops after the first round of tools.
func (l *LLMInstance) run(ctx context.Context, history []Message, inputs []Input, emit func(StreamEvent), oneCycle bool) (turn *Turn, err error) {
	mw := newMiddlewareRun(l, emit != nil)
	defer func() {
		if err != nil {
			mw.onError(ctx, err)
		}
	}()

	newMsgs, err := toMessages(inputs)
	if err != nil {
		return nil, NewError(InvalidRequest, l.provider, err.Error(), nil)
	}
	if len(history)+len(newMsgs) == 0 {
		return nil, NewError(InvalidRequest, l.provider, "no input messages", nil)
	}
	for _, m := range history {
		if m == nil || isNilMessage(m) {
			return nil, NewError(InvalidRequest, l.provider, "nil message in history", nil)
		}
	}
	if err := l.checkMedia(history); err != nil {
		return nil, err
	}
	if err := l.checkMedia(newMsgs); err != nil {
		return nil, err
	}
	if err := mw.start(ctx); err != nil {
		return nil, l.fail(err)
	}
	if emit != nil {
		emit = mw.wrapEmit(ctx, emit)
	}

	all := make([]Message, 0, len(history)+len(newMsgs)+4)
	all = append(append(all, history...), newMsgs...)
	maxRounds := l.opts.ToolStrategy.maxIterations()
	var (
		usages     []TokenUsage
		executions []ToolExecution
		data       any
		rounds     int
		response   *AssistantMessage
	)
	for {
		if err := ctx.Err(); err != nil {
			return nil, l.fail(err)
		}
		req := &Request{
			ModelID: l.opts.Model.ModelID, Messages: all, System: l.opts.System,
			Params: l.opts.Params, Tools: l.opts.Tools, Structure: l.opts.Structure, Config: l.config,
		}
		if err := mw.request(ctx, req); err != nil {
			return nil, l.fail(err)
		}
		var resp *Response
		cctx, span := l.startChat(ctx, req)
		start := time.Now()
		if emit == nil {
			resp, err = l.handler.Complete(cctx, req)
		} else {
			resp, err = l.handler.Stream(cctx, req, emit)
		}
		l.endChat(cctx, span, start, req, resp, err)
		if err != nil {
			if ctx.Err() != nil { // the provider's view of a cancellation may vary
				return nil, l.fail(errors.Join(ctx.Err(), err))
			}
			return nil, l.fail(err)
		}
		if resp == nil || resp.Message == nil {
			return nil, NewError(InvalidResponse, l.provider, "provider returned no message", nil)
		}
		if err := mw.response(ctx, resp); err != nil {
			return nil, l.fail(err)
		}
		response = resp.Message
		usages = append(usages, resp.Usage)
		all = append(all, resp.Message)
		if resp.Data != nil {
			data = resp.Data
		}
		if !resp.Message.HasToolCalls() || len(l.tools) == 0 || resp.Data != nil {
			break
		}
		if rounds >= maxRounds && !oneCycle {
			if h := l.opts.ToolStrategy; h != nil && h.OnMaxIterations != nil {
				h.OnMaxIterations(ctx, maxRounds)
			}
			return nil, NewError(InvalidRequest, l.provider, fmt.Sprintf("tool execution exceeded maximum iterations (%d)", maxRounds), nil)
		}
		results := l.executeTools(ctx, resp.Message.ToolCalls, &executions, emit, mw)
		if err := ctx.Err(); err != nil {
			return nil, l.fail(err)
		}
		rounds++
		all = append(all, NewToolResultMessage(results))
		if oneCycle {
			break
		}
	}

	turn = &Turn{
		Messages:       all[len(history):len(all):len(all)],
		Response:       response,
		ToolExecutions: executions,
		Usage:          aggregate(usages),
		Cycles:         len(usages),
	}
	if l.opts.Structure != nil {
		turn.Data = data
	}
	if err := mw.end(ctx, turn); err != nil {
		return nil, l.fail(err)
	}
	return turn, nil
}

// Result texts sent to the model for calls that did not run normally.
const (
	msgSkipped = "Tool execution skipped"
	msgDenied  = "Tool execution denied by approval handler"
)

// executeTools runs one round's calls concurrently and returns their
// results in call order; executions are appended in completion order.
// The first call runs on the calling goroutine (whose stack has already
// grown), the others on goroutines of their own.
func (l *LLMInstance) executeTools(ctx context.Context, calls []ToolCall, executions *[]ToolExecution, emit func(StreamEvent), mw *middlewareRun) []ToolResult {
	r := &roundRun{l: l, ctx: ctx, round: &round{calls: calls}, executions: executions, emit: emit, mw: mw,
		results: make([]ToolResult, len(calls))}
	if len(calls) == 1 {
		r.execute(0)
		return r.results
	}
	if s := l.opts.ToolStrategy; s != nil && s.Schedule != nil {
		r.runScheduled(validSchedule(s.Schedule(calls), len(calls)))
		return r.results
	}
	var wg sync.WaitGroup
	for i := 1; i < len(calls); i++ {
		wg.Go(func() {
			stack.Grow()
			r.execute(i)
		})
	}
	r.execute(0)
	wg.Wait()
	return r.results
}

// runScheduled runs the round's calls, each after its predecessors
// (preds nil: all at once).
func (r *roundRun) runScheduled(preds [][]int) {
	n := len(r.results)
	done := make([]chan struct{}, n)
	for i := range done {
		done[i] = make(chan struct{})
	}
	run := func(i int) {
		defer close(done[i])
		if preds != nil {
			for _, p := range preds[i] {
				<-done[p] // every call finishes, so this cannot hang
			}
		}
		r.execute(i)
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() {
			stack.Grow()
			run(i)
		})
	}
	run(0)
	wg.Wait()
}

// roundRun is one round of tool calls being executed.
type roundRun struct {
	l          *LLMInstance
	ctx        context.Context
	round      *round
	emit       func(StreamEvent)
	mw         *middlewareRun
	results    []ToolResult
	mu         sync.Mutex
	executions *[]ToolExecution
}

func (r *roundRun) record(x *ToolExecution) {
	r.mu.Lock()
	*r.executions = append(*r.executions, *x)
	r.mu.Unlock()
}

// execute runs call i and stores its result. The path of a call that
// runs is kept to small stack frames: a tool goroutine starts with a small
// stack, and each time it grows the runtime copies it.
func (r *roundRun) execute(i int) {
	call := &r.round.calls[i]
	tool := r.l.tools[call.ToolName]
	if tool == nil || r.ctx.Err() != nil {
		r.results[i] = notRun(call, tool)
		return
	}
	r.results[i] = r.l.executeTool(r, i, call, tool)
}

// notRun is the result of a call of an unknown tool, or of a call left
// pending when the generation was aborted.
//
//go:noinline
func notRun(call *ToolCall, tool *Tool) ToolResult {
	if tool == nil {
		return ToolResult{ToolCallID: call.ToolCallID, Result: fmt.Sprintf("Tool '%s' not found", call.ToolName), IsError: true}
	}
	return ToolResult{ToolCallID: call.ToolCallID, Result: "Tool execution cancelled", IsError: true}
}

func (l *LLMInstance) executeTool(r *roundRun, index int, call *ToolCall, tool *Tool) ToolResult {
	ctx, span := l.startTool(r.ctx, tool, call)
	x := &ToolExecution{ToolName: tool.Name, ToolCallID: call.ToolCallID, Arguments: call.Arguments}
	start := time.Now()
	if r.emit != nil {
		emitToolStart(r.emit, index, call, tool, start)
	}
	if l.runTool(ctx, r, index, call, tool, x, start) {
		r.record(x)
	}
	return r.finish(ctx, span, index, call, tool, x)
}

// finish ends a call: its span, the middleware's OnToolResult and the
// tool_execution_end event.
//
//go:noinline
func (r *roundRun) finish(ctx context.Context, span trace.Span, index int, call *ToolCall, tool *Tool, x *ToolExecution) ToolResult {
	endTool(span, x)
	res := ToolResult{ToolCallID: call.ToolCallID, Result: x.Result, IsError: x.IsError}
	r.mw.toolResult(ctx, tool, res)
	if r.emit != nil {
		emitToolEnd(r.emit, index, call, tool, x)
	}
	return res
}

//go:noinline
func emitToolStart(emit func(StreamEvent), index int, call *ToolCall, tool *Tool, start time.Time) {
	emit(StreamEvent{Type: ToolExecutionStart, Index: index, Delta: EventDelta{ToolCallID: call.ToolCallID, ToolName: tool.Name, Timestamp: start}})
}

//go:noinline
func emitToolEnd(emit func(StreamEvent), index int, call *ToolCall, tool *Tool, x *ToolExecution) {
	emit(StreamEvent{Type: ToolExecutionEnd, Index: index, Delta: EventDelta{
		ToolCallID: call.ToolCallID, ToolName: tool.Name, Result: x.Result, IsError: x.IsError, Timestamp: time.Now(),
	}})
}

// runTool runs one call of a known tool through the hooks, filling x; it
// reports whether the execution is recorded in the turn (a skipped call
// is not).
func (l *LLMInstance) runTool(ctx context.Context, r *roundRun, index int, call *ToolCall, tool *Tool, x *ToolExecution, start time.Time) bool {
	strategy := l.opts.ToolStrategy
	if r.mw != nil || strategy != nil || call.RawArguments != "" || x.Arguments == nil {
		if run, recorded := l.beforeTool(ctx, r, call, tool, x, start); !run {
			return recorded
		}
	}
	tctx := context.WithValue(ctx, callKey{}, &callInfo{call: call, round: r.round, index: index})
	if tool.Approval != nil && !approve(tctx, tool, x) {
		x.Duration = time.Since(start)
		return true
	}
	result, err := guard(tctx, tool.Run, x.Arguments)
	x.Duration = time.Since(start)
	if err != nil || (strategy != nil && strategy.OnAfterCall != nil) {
		result = afterTool(ctx, strategy, tool, x, result, err)
	}
	x.Result = result
	return true
}

// beforeTool runs the hooks that precede a call and answers a call whose
// arguments are not a JSON object: run is false when the tool must not
// run, and recorded then says whether the execution goes into the turn.
//
//go:noinline
func (l *LLMInstance) beforeTool(ctx context.Context, r *roundRun, call *ToolCall, tool *Tool, x *ToolExecution, start time.Time) (run, recorded bool) {
	strategy := l.opts.ToolStrategy
	r.mw.toolCall(ctx, tool, x.Arguments)
	malformed := call.RawArguments != ""
	if strategy != nil {
		if strategy.OnToolCall != nil {
			strategy.OnToolCall(ctx, tool, x.Arguments)
		}
		if strategy.OnBeforeCall != nil {
			d := strategy.OnBeforeCall(ctx, tool, x.Arguments)
			if !d.Proceed {
				x.Result, x.IsError = msgSkipped, true
				return false, false
			}
			if d.Arguments != nil {
				x.Arguments, malformed = d.Arguments, false
			}
		}
	}
	if malformed {
		malformedCall(ctx, strategy, call, tool, x, start)
		return false, true
	}
	if x.Arguments == nil {
		x.Arguments = map[string]any{}
	}
	return true, true
}

// afterTool handles a call's error (OnError, the error result) or passes
// its result through OnAfterCall; it returns the result to record.
//
//go:noinline
func afterTool(ctx context.Context, strategy *ToolUseStrategy, tool *Tool, x *ToolExecution, result any, err error) any {
	if err != nil {
		if strategy != nil && strategy.OnError != nil {
			strategy.OnError(ctx, tool, x.Arguments, err)
		}
		x.IsError, x.Err = true, err
		return err.Error()
	}
	if nr, replace := strategy.OnAfterCall(ctx, tool, x.Arguments, result); replace {
		result = nr
	}
	return result
}

// malformedCall answers a call whose arguments are not a JSON object.
func malformedCall(ctx context.Context, strategy *ToolUseStrategy, call *ToolCall, tool *Tool, x *ToolExecution, start time.Time) {
	x.Err = &ArgumentsError{Tool: tool.Name, Reason: "expected a JSON object, got " + truncate(call.RawArguments, 200), Schema: tool.Parameters}
	x.Result, x.IsError = x.Err.Error(), true
	x.Duration = time.Since(start)
	if strategy != nil && strategy.OnError != nil {
		strategy.OnError(ctx, tool, nil, x.Err)
	}
}

// approve asks the tool's approval handler, recording the decision in x;
// a denied call gets its error result.
func approve(ctx context.Context, tool *Tool, x *ToolExecution) bool {
	ok, err := guard(ctx, tool.Approval, x.Arguments)
	approved := ok && err == nil
	x.Approved = &approved
	if !approved {
		x.Result, x.IsError = msgDenied, true
		if err != nil {
			x.Result = msgDenied + ": " + err.Error()
		}
	}
	return approved
}

// validSchedule returns preds when it is a valid acyclic schedule for n
// calls, else the sequential schedule (each call after the previous one).
func validSchedule(preds [][]int, n int) [][]int {
	if preds == nil {
		return nil
	}
	ok := len(preds) == n
	for i := 0; ok && i < n; i++ {
		for _, p := range preds[i] {
			ok = ok && p >= 0 && p < n && p != i
		}
	}
	// Kahn's algorithm: a schedule is acyclic when every call can be ordered.
	if ok {
		indeg := make([]int, n)
		next := make([][]int, n)
		for i, ps := range preds {
			for _, p := range ps {
				indeg[i]++
				next[p] = append(next[p], i)
			}
		}
		var queue []int
		for i := range indeg {
			if indeg[i] == 0 {
				queue = append(queue, i)
			}
		}
		seen := 0
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			seen++
			for _, x := range next[c] {
				if indeg[x]--; indeg[x] == 0 {
					queue = append(queue, x)
				}
			}
		}
		ok = seen == n
	}
	if ok {
		return preds
	}
	seq := make([][]int, n)
	for i := 1; i < n; i++ {
		seq[i] = []int{i - 1}
	}
	return seq
}

// PanicError is the error a tool (or approval handler) that panicked
// returns; the model receives its message as an error result.
type PanicError struct {
	Value any
	Stack []byte
}

// Error returns "tool panicked: " followed by the panic value.
func (p *PanicError) Error() string { return fmt.Sprintf("tool panicked: %v", p.Value) }

// guard runs f(ctx, args), turning a panic into a *PanicError.
func guard[T any](ctx context.Context, f func(context.Context, map[string]any) (T, error), args map[string]any) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return f(ctx, args)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
