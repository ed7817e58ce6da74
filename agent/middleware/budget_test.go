package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/middleware"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// renamed is a scripted model reporting another provider name, to price
// it under that provider's token conventions.
type renamed struct {
	llm.LLMProvider
	name string
}

func (r renamed) Name() string { return r.name }

// run runs a on "go" from an empty state, streamed or not.
func run(t *testing.T, a *agent.Agent, stream bool) (*agent.Result, error) {
	t.Helper()
	if stream {
		return a.Stream(t.Context(), llm.Text("go"), nil).Result()
	}
	return a.Generate(t.Context(), llm.Text("go"), nil)
}

func TestBudget(t *testing.T) {
	slow := func(s scripted.Step) scripted.Step { s.Delay = 2 * time.Second; return s }
	twoCalls := scripted.Step{ToolCalls: []llm.ToolCall{call("a", "echo", map[string]any{"v": "a"}), call("b", "echo", map[string]any{"v": "b"})},
		Usage: llm.TokenUsage{InputTokens: 1, OutputTokens: 1}}
	cached := func(id string) scripted.Step {
		s := toolStep(id, 1000, 100)
		s.Usage.CacheReadTokens = 400
		return s
	}
	// Prices per million tokens: 1000 input (400 of them cache reads) and
	// 100 output cost (600*3 + 400*0.3 + 100*15) / 1e6 = 0.00342 when the
	// input includes the cache reads, (1000*3 + 400*0.3 + 100*15) / 1e6 =
	// 0.00462 when it does not (Anthropic).
	price := middleware.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}

	tests := []struct {
		name     string
		opts     middleware.BudgetOptions
		model    func(*scripted.Model) llm.ModelReference // nil: the scripted model itself
		script   []scripted.Step
		want     *middleware.BudgetExceededError // without State; nil: the run completes
		wantStep int
	}{
		{
			name:     "no limits",
			script:   []scripted.Step{toolStep("1", 10, 5), toolStep("2", 10, 5), textStep("done", 10, 5)},
			wantStep: 3,
		},
		{
			name:     "usage at the limits is within them",
			opts:     middleware.BudgetOptions{MaxInputTokens: 30, MaxOutputTokens: 15, MaxTotalTokens: 45, MaxToolCalls: 2, MaxCost: 0.0003, Prices: map[string]middleware.Price{"scripted": {Input: 5, Output: 10}}},
			script:   []scripted.Step{toolStep("1", 10, 5), toolStep("2", 10, 5), textStep("done", 10, 5)},
			wantStep: 3,
		},
		{
			name:     "input tokens",
			opts:     middleware.BudgetOptions{MaxInputTokens: 15},
			script:   []scripted.Step{toolStep("1", 10, 5), toolStep("2", 10, 5)},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitInputTokens, Limit: 15, Used: 20},
			wantStep: 2,
		},
		{
			name:     "output tokens",
			opts:     middleware.BudgetOptions{MaxOutputTokens: 4},
			script:   []scripted.Step{toolStep("1", 10, 5)},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitOutputTokens, Limit: 4, Used: 5},
			wantStep: 1,
		},
		{
			name:     "total tokens",
			opts:     middleware.BudgetOptions{MaxTotalTokens: 40},
			script:   []scripted.Step{toolStep("1", 10, 5), toolStep("2", 10, 5), textStep("done", 10, 5)},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitTotalTokens, Limit: 40, Used: 45},
			wantStep: 3,
		},
		{
			name:     "several limits: the first in order",
			opts:     middleware.BudgetOptions{MaxTotalTokens: 10, MaxOutputTokens: 1, MaxToolCalls: 0},
			script:   []scripted.Step{toolStep("1", 10, 5)},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitOutputTokens, Limit: 1, Used: 5},
			wantStep: 1,
		},
		{
			name:     "tool calls",
			opts:     middleware.BudgetOptions{MaxToolCalls: 3},
			script:   []scripted.Step{twoCalls, twoCalls},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitToolCalls, Limit: 3, Used: 4},
			wantStep: 2,
		},
		{
			name:     "cost, provider:model price, cached input included",
			opts:     middleware.BudgetOptions{MaxCost: 0.005, Prices: map[string]middleware.Price{"scripted:scripted": price, "scripted": {}}},
			script:   []scripted.Step{cached("1"), cached("2")},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitCost, Limit: 0.005, Used: 2 * 0.00342},
			wantStep: 2,
		},
		{
			name: "cost, model price, Anthropic conventions",
			opts: middleware.BudgetOptions{MaxCost: 0.004, Prices: map[string]middleware.Price{"claude-x": price}},
			model: func(m *scripted.Model) llm.ModelReference {
				return llm.ModelReference{ModelID: "claude-x", Provider: renamed{m.Ref().Provider.(llm.LLMProvider), "anthropic"}}
			},
			script:   []scripted.Step{cached("1")},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitCost, Limit: 0.004, Used: 0.00462},
			wantStep: 1,
		},
		{
			name:     "wall time",
			opts:     middleware.BudgetOptions{MaxDuration: 3 * time.Second},
			script:   []scripted.Step{slow(toolStep("1", 1, 1)), slow(toolStep("2", 1, 1))},
			want:     &middleware.BudgetExceededError{Kind: middleware.LimitDuration, Limit: 3, Used: 4},
			wantStep: 2,
		},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					m := scripted.NewT(t, tt.script...)
					ref := m.Ref()
					if tt.model != nil {
						ref = tt.model(m)
					}
					a := newAgent(t, ref, []llm.Tool{echo}, middleware.Budget(&tt.opts))
					res, err := run(t, a, stream)
					var state *agent.State
					if tt.want == nil {
						if err != nil {
							t.Fatalf("run failed: %v", err)
						}
						state = res.State
					} else {
						var be *middleware.BudgetExceededError
						if !errors.As(err, &be) {
							t.Fatalf("err = %T, want *BudgetExceededError", err)
						}
						opts := []cmp.Option{cmpopts.IgnoreFields(middleware.BudgetExceededError{}, "State"), cmpopts.EquateApprox(0, 1e-12)}
						if diff := cmp.Diff(tt.want, be, opts...); diff != "" {
							t.Errorf("error (-want +got):\n%s", diff)
						}
						state = be.State
					}
					if state.Step() != tt.wantStep {
						t.Errorf("state step = %d, want %d", state.Step(), tt.wantStep)
					}
					if err := checkConversation(state.Messages()); err != nil {
						t.Errorf("state: %v", err)
					}
					want := 1 + 2*tt.wantStep // the input, each step's reply and results
					if len(tt.script[len(tt.script)-1].ToolCalls) == 0 {
						want-- // but the last step has no results
					}
					if state.Len() != want {
						t.Errorf("state holds %d messages, want %d", state.Len(), want)
					}
				})
			})
		}
	}
}

func TestBudgetErrorText(t *testing.T) {
	tests := []struct {
		err  *middleware.BudgetExceededError
		want string
	}{
		{&middleware.BudgetExceededError{Kind: middleware.LimitTotalTokens, Limit: 1000, Used: 1500},
			"middleware: budget exceeded: total_tokens used 1500, limit 1000"},
		{&middleware.BudgetExceededError{Kind: middleware.LimitCost, Limit: 0.5, Used: 0.625},
			"middleware: budget exceeded: cost used 0.625, limit 0.5"},
		{&middleware.BudgetExceededError{Kind: middleware.LimitDuration, Limit: 2, Used: 2.5},
			"middleware: budget exceeded: duration used 2.5s, limit 2s"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// MaxCost without a price for the model fails the run before any model
// call.
func TestBudgetMissingPrice(t *testing.T) {
	m := scripted.NewT(t) // any call fails the test
	a := newAgent(t, m.Ref(), nil, middleware.Budget(&middleware.BudgetOptions{MaxCost: 1,
		Prices: map[string]middleware.Price{"anthropic:claude-x": {Input: 1}}}))
	_, err := a.Generate(t.Context(), llm.Text("go"), nil)
	if err == nil || !strings.Contains(err.Error(), `no entry for "scripted:scripted" or "scripted"`) {
		t.Errorf("err = %v, want a missing price", err)
	}
	if be := (*middleware.BudgetExceededError)(nil); errors.As(err, &be) {
		t.Errorf("a configuration error is a *BudgetExceededError")
	}
}

// The state of a BudgetExceededError resumes the run, with a new budget.
func TestBudgetResume(t *testing.T) {
	m := scripted.NewT(t, toolStep("1", 10, 5), toolStep("2", 10, 5), textStep("done", 10, 5))
	a := newAgent(t, m.Ref(), []llm.Tool{echo}, middleware.Budget(&middleware.BudgetOptions{MaxTotalTokens: 20}))
	_, err := a.Generate(t.Context(), llm.Text("go"), nil)
	var be *middleware.BudgetExceededError
	if !errors.As(err, &be) || be.State.Step() != 2 {
		t.Fatalf("err = %v, want the budget exceeded at step 2", err)
	}
	res, err := a.Generate(t.Context(), nil, be.State)
	if err != nil {
		t.Fatal(err)
	}
	if res.Turn.Text() != "done" || res.State.Step() != 3 || res.State.Len() != 6 {
		t.Errorf("resumed: text %q, step %d, %d messages; want done, 3, 6", res.Turn.Text(), res.State.Step(), res.State.Len())
	}
	if reqs := m.Requests(); len(reqs[2].Messages) != 5 {
		t.Errorf("the resumed call sent %d messages, want the 5 of the state", len(reqs[2].Messages))
	}
}

// One Budget value serves concurrent runs, each with its own account: 8
// runs of 20 tokens each stay within a 30-token budget.
func TestBudgetConcurrentRuns(t *testing.T) {
	m := scripted.NewFunc(func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		if _, ok := req.Messages[len(req.Messages)-1].(*llm.UserMessage); ok {
			return toolStep("", 5, 5), nil
		}
		return textStep("done", 5, 5), nil
	})
	a := newAgent(t, m.Ref(), []llm.Tool{echo}, middleware.Budget(&middleware.BudgetOptions{MaxTotalTokens: 30}))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = a.Generate(t.Context(), llm.Text("go"), nil)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}
