package middleware

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
)

// BudgetOptions configures Budget. Every limit is off at zero (UAP-1.1
// §2.4: nothing is limited unless asked), so the zero value limits
// nothing.
type BudgetOptions struct {
	// MaxInputTokens, MaxOutputTokens and MaxTotalTokens limit the tokens
	// of the run's model calls, as the provider reports them
	// (llm.TokenUsage).
	MaxInputTokens  int
	MaxOutputTokens int
	MaxTotalTokens  int
	// MaxToolCalls limits the tool calls the model requests.
	MaxToolCalls int
	// MaxDuration limits the run's wall time.
	MaxDuration time.Duration
	// MaxCost limits the run's cost, computed with Prices, in Prices'
	// currency. A run of a model without a price fails at its start.
	MaxCost float64
	// Prices maps "provider:model" (e.g. "anthropic:claude-sonnet-4-5") or
	// a bare model id to its prices; the first form wins.
	Prices map[string]Price
}

// Price is a model's price per million tokens, in any currency.
//
// Providers report cached tokens differently: Anthropic's input tokens
// exclude cache reads and writes, the others' (OpenAI and compatible
// APIs, Gemini) include them. Budget prices the cached part of the input
// at CacheRead and CacheWrite and the rest at Input, whichever the
// convention, which it tells by the provider's name ("anthropic" or
// another).
type Price struct {
	Input      float64
	Output     float64
	CacheRead  float64
	CacheWrite float64
}

// microCost prices one usage in millionths of the currency (summed as
// such, so that round prices add up exactly); inputIncludesCache says
// whether InputTokens counts the cached tokens too.
func (p Price) microCost(u llm.TokenUsage, inputIncludesCache bool) float64 {
	in := u.InputTokens
	if inputIncludesCache {
		in = max(0, in-u.CacheReadTokens-u.CacheWriteTokens)
	}
	return float64(in)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*p.CacheWrite
}

// LimitKind names a Budget limit.
type LimitKind string

// The limits of a Budget, in the order they are checked.
const (
	LimitInputTokens  LimitKind = "input_tokens"
	LimitOutputTokens LimitKind = "output_tokens"
	LimitTotalTokens  LimitKind = "total_tokens"
	LimitToolCalls    LimitKind = "tool_calls"
	LimitCost         LimitKind = "cost"
	LimitDuration     LimitKind = "duration"
)

// BudgetExceededError ends a run whose usage went over a Budget limit.
// Match it with errors.As.
type BudgetExceededError struct {
	// Kind is the limit exceeded (the first, in the order of the
	// LimitKind constants, when a step exceeded several).
	Kind LimitKind
	// Limit and Used are in Kind's unit: tokens, tool calls, the Prices'
	// currency, or seconds for LimitDuration.
	Limit, Used float64
	// State is the state reached at the end of the step that went over
	// the limit: a complete conversation, to inspect or to resume from
	// (Generate with a nil input continues the run).
	State *agent.State
}

// Error returns a message naming the limit exceeded, the amount used and
// the limit, as durations for LimitDuration.
func (e *BudgetExceededError) Error() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	if e.Kind == LimitDuration {
		f = func(v float64) string { return time.Duration(v * float64(time.Second)).String() }
	}
	return fmt.Sprintf("middleware: budget exceeded: %s used %s, limit %s", e.Kind, f(e.Used), f(e.Limit))
}

// Budget returns middleware that limits each run's resources (UAP-1.1
// §15.1, resource exhaustion and cost control): tokens, tool calls, wall
// time and cost. A run that goes over a limit ends with a
// *BudgetExceededError carrying the state
// reached.
//
// The check is made after every step (a step hook), so a run stops at a
// step boundary with a consistent state, but a step's model call and tool
// calls are not interrupted: a run can exceed a limit by up to one step's
// usage, and a limit only stops the steps after the one that crossed it.
// A step that crosses a limit fails the run even when it was the last:
// its reply is then in the error's State. The wall time is checked the
// same way, not through a context deadline, which would abort a model or
// tool call in flight and leave no state to resume from (nor can a
// middleware give the run a context); for a hard deadline, give the run a
// context with a timeout as well.
//
// The budget is per run, counted from zero by each Generate, Stream and
// Resume: continuing from a BudgetExceededError's state starts a new
// budget. It counts the agent's own model calls; sub-agents run their
// own middleware and need their own Budget.
func Budget(options *BudgetOptions) agent.Middleware {
	var opts BudgetOptions
	if options != nil {
		opts = *options
	}
	return &budget{opts: opts, key: newKey("budget")}
}

type budget struct {
	opts BudgetOptions
	key  string
}

// budgetRun is a run's consumption so far.
type budgetRun struct {
	start         time.Time
	price         *Price // nil without MaxCost
	includesCache bool
	in, out       int
	calls         int
	microCost     float64
}

// Name returns "budget".
func (b *budget) Name() string { return "budget" }

// Before starts the run's count, failing when MaxCost is set and Prices
// has no price for the agent's model.
func (b *budget) Before(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
	r, err := b.newRun(mc)
	if err != nil {
		return nil, err
	}
	putRunData(mc, b.key, r)
	return nil, nil
}

func (b *budget) newRun(mc *agent.MiddlewareContext) (*budgetRun, error) {
	r := &budgetRun{start: time.Now()}
	if b.opts.MaxCost <= 0 {
		return r, nil
	}
	ref := mc.Agent.Options().Model
	provider := ""
	if ref.Provider != nil {
		provider = ref.Provider.Name()
	}
	full := ref.String()
	p, ok := b.opts.Prices[full]
	if !ok {
		p, ok = b.opts.Prices[ref.ModelID]
	}
	if !ok {
		return nil, fmt.Errorf("middleware: budget: MaxCost is set but Prices has no entry for %q or %q", full, ref.ModelID)
	}
	r.price, r.includesCache = &p, provider != "anthropic"
	return r, nil
}

// OnStep adds the step's usage and ends the run when a limit is exceeded.
func (b *budget) OnStep(ctx context.Context, mc *agent.MiddlewareContext, step agent.StepInfo) (*agent.State, error) {
	r, ok := mc.Metadata[b.key].(*budgetRun)
	if !ok { // Before was skipped: count from here
		var err error
		if r, err = b.newRun(mc); err != nil {
			return nil, err
		}
		putRunData(mc, b.key, r)
	}
	if t := step.Turn; t != nil {
		r.in += t.Usage.InputTokens
		r.out += t.Usage.OutputTokens
		r.calls += len(calledTools(t))
		if r.price != nil {
			r.microCost += r.price.microCost(t.Usage, r.includesCache)
		}
	}
	o := b.opts
	exceeded := func(kind LimitKind, limit, used float64) error {
		return &BudgetExceededError{Kind: kind, Limit: limit, Used: used, State: step.State}
	}
	switch elapsed := time.Since(r.start); {
	case o.MaxInputTokens > 0 && r.in > o.MaxInputTokens:
		return nil, exceeded(LimitInputTokens, float64(o.MaxInputTokens), float64(r.in))
	case o.MaxOutputTokens > 0 && r.out > o.MaxOutputTokens:
		return nil, exceeded(LimitOutputTokens, float64(o.MaxOutputTokens), float64(r.out))
	case o.MaxTotalTokens > 0 && r.in+r.out > o.MaxTotalTokens:
		return nil, exceeded(LimitTotalTokens, float64(o.MaxTotalTokens), float64(r.in+r.out))
	case o.MaxToolCalls > 0 && r.calls > o.MaxToolCalls:
		return nil, exceeded(LimitToolCalls, float64(o.MaxToolCalls), float64(r.calls))
	case o.MaxCost > 0 && r.microCost/1e6 > o.MaxCost:
		return nil, exceeded(LimitCost, o.MaxCost, r.microCost/1e6)
	case o.MaxDuration > 0 && elapsed > o.MaxDuration:
		return nil, exceeded(LimitDuration, o.MaxDuration.Seconds(), elapsed.Seconds())
	}
	return nil, nil
}

// After returns res unchanged.
func (b *budget) After(ctx context.Context, mc *agent.MiddlewareContext, res *agent.Result) (*agent.Result, error) {
	return res, nil
}

// OnError does not recover: it passes err on.
func (b *budget) OnError(ctx context.Context, mc *agent.MiddlewareContext, err error) (*agent.Result, error) {
	return nil, nil
}
