package middleware

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
)

// LoggingOptions configures Logging (UAP-1.1 §9.3). The zero value logs at
// Info to slog.Default(), with timing and without content.
type LoggingOptions struct {
	// Level is the level of every record but failures, which are logged
	// at Error. The zero value is Info.
	Level slog.Level
	// Logger receives the records; nil uses slog.Default().
	Logger *slog.Logger
	// IncludeMessages adds content to the records: the input, each step's
	// reply text and tool arguments and results, the final reply. Off by
	// default: content may hold personal data.
	IncludeMessages bool
	// NoTiming leaves durations out of the records (the specification's
	// includeTiming, whose default true is the zero value here).
	NoTiming bool
}

// Logging returns middleware that logs each run with log/slog (UAP-1.1
// §9.3): its start ("agent start": agent id, streaming, history length,
// starting step and a summary of the input — its type, size and number of
// blocks), every step ("agent step": step number, tool calls and the names
// of the tools called, failed tool calls, token usage, history length),
// the end ("agent end": steps, model calls, token usage) and a failure
// ("agent error", at Error level). Durations are included unless NoTiming
// is set: per step (since the previous step ended) and per run.
//
// Configuration — API keys, provider settings — is never logged, and
// content only with IncludeMessages. The records of the model calls
// themselves are llm.Logging's, a UPP middleware (LLMOptions.Middleware).
func Logging(options *LoggingOptions) agent.Middleware {
	var opts LoggingOptions
	if options != nil {
		opts = *options
	}
	return &logging{opts: opts, key: newKey("logging")}
}

type logging struct {
	opts LoggingOptions
	key  string
}

// logRun is what Logging tracks during a run.
type logRun struct {
	start, stepStart time.Time
	firstStep, step  int // the state's step at the start, and the last step seen
}

func (l *logging) logger() *slog.Logger {
	if l.opts.Logger != nil {
		return l.opts.Logger
	}
	return slog.Default()
}

func (l *logging) Name() string { return "logging" }

func (l *logging) Before(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
	now := time.Now()
	r := &logRun{start: now, stepStart: now, firstStep: mc.State.Step(), step: mc.State.Step()}
	putRunData(mc, l.key, r)
	if !l.logger().Enabled(ctx, l.opts.Level) {
		return nil, nil
	}
	attrs := l.base(mc)
	attrs = append(attrs, "streaming", mc.Streaming, "history", mc.State.Len(), "step", mc.State.Step())
	if in := mc.Input; in == nil {
		attrs = append(attrs, "resumed", true)
	} else {
		attrs = append(attrs, "input_type", string(in.Type()), "input_bytes", len(in.Text()), "input_blocks", len(in.Blocks()))
		if l.opts.IncludeMessages {
			attrs = append(attrs, "input", in.Text())
		}
	}
	l.logger().Log(ctx, l.opts.Level, "agent start", attrs...)
	return nil, nil
}

// OnStep logs a finished step; it never changes the state.
func (l *logging) OnStep(ctx context.Context, mc *agent.MiddlewareContext, step agent.StepInfo) (*agent.State, error) {
	r := runData(mc, l.key, func() *logRun { return &logRun{stepStart: time.Now()} })
	r.step = step.Step
	stepStart := r.stepStart
	r.stepStart = time.Now()
	if !l.logger().Enabled(ctx, l.opts.Level) {
		return nil, nil
	}
	attrs := append(l.base(mc), "step", step.Step)
	var (
		reply string
		usage llm.TokenUsage
		execs []llm.ToolExecution
	)
	tools := calledTools(step.Turn)
	if t := step.Turn; t != nil {
		reply, usage, execs = t.Text(), t.Usage, t.ToolExecutions
	}
	failed := 0
	for _, x := range execs {
		if x.IsError {
			failed++
		}
	}
	attrs = append(attrs, "tool_calls", len(tools))
	if len(tools) > 0 {
		attrs = append(attrs, "tools", tools)
	}
	attrs = append(attrs, "tool_errors", failed, "input_tokens", usage.InputTokens, "output_tokens", usage.OutputTokens,
		"history", step.State.Len())
	if !l.opts.NoTiming {
		attrs = append(attrs, "duration", r.stepStart.Sub(stepStart))
	}
	if l.opts.IncludeMessages {
		attrs = append(attrs, "response", reply)
		if len(execs) > 0 {
			attrs = append(attrs, "tool_executions", executionRecords(execs))
		}
	}
	l.logger().Log(ctx, l.opts.Level, "agent step", attrs...)
	return nil, nil
}

// calledTools returns the names of the tools a turn's replies called, in
// call order.
func calledTools(t *llm.Turn) []string {
	if t == nil {
		return nil
	}
	var names []string
	for _, m := range t.Messages {
		if a, ok := m.(*llm.AssistantMessage); ok {
			for _, c := range a.ToolCalls {
				names = append(names, c.ToolName)
			}
		}
	}
	return names
}

func executionRecords(execs []llm.ToolExecution) []map[string]any {
	out := make([]map[string]any, len(execs))
	for i, x := range execs {
		out[i] = map[string]any{"tool": x.ToolName, "tool_call_id": x.ToolCallID, "arguments": x.Arguments,
			"result": llm.ResultText(x.Result), "is_error": x.IsError}
	}
	return out
}

func (l *logging) After(ctx context.Context, mc *agent.MiddlewareContext, res *agent.Result) (*agent.Result, error) {
	if !l.logger().Enabled(ctx, l.opts.Level) {
		return res, nil
	}
	attrs := l.base(mc)
	r, _ := mc.Metadata[l.key].(*logRun)
	if r != nil {
		attrs = append(attrs, "steps", res.State.Step()-r.firstStep)
	}
	if t := res.Turn; t != nil {
		attrs = append(attrs, "cycles", t.Cycles, "tool_calls", len(calledTools(t)),
			"input_tokens", t.Usage.InputTokens, "output_tokens", t.Usage.OutputTokens)
	}
	attrs = append(attrs, "history", res.State.Len())
	if r != nil && !l.opts.NoTiming {
		attrs = append(attrs, "duration", time.Since(r.start))
	}
	if l.opts.IncludeMessages {
		attrs = append(attrs, "response", res.Turn.Text())
	}
	l.logger().Log(ctx, l.opts.Level, "agent end", attrs...)
	return res, nil
}

func (l *logging) OnError(ctx context.Context, mc *agent.MiddlewareContext, err error) (*agent.Result, error) {
	attrs := append(l.base(mc), "error", err)
	if r, ok := mc.Metadata[l.key].(*logRun); ok {
		attrs = append(attrs, "steps", r.step-r.firstStep)
		if !l.opts.NoTiming {
			attrs = append(attrs, "duration", time.Since(r.start))
		}
	}
	l.logger().Log(ctx, slog.LevelError, "agent error", attrs...)
	return nil, nil
}

func (l *logging) base(mc *agent.MiddlewareContext) []any {
	attrs := []any{"agent_id", mc.Agent.ID()}
	if s := mc.Agent.SessionID(); s != "" {
		attrs = append(attrs, "session_id", s)
	}
	return attrs
}
