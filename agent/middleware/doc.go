// Package middleware provides opt-in UAP-1.1 agent middleware (§9): Logging
// (the logging() middleware of §9.3), Budget (the resource and cost limits
// §15.1 leaves to the developer), ContextWindow (context window management
// through State.WithContext, §6.3) and ToolArgumentRepair (tool arguments
// validated against each tool's JSON Schema, with bounded retries).
//
// Each constructor returns an agent.Middleware to put in
// agent.Options.Middleware; nothing here is applied unless listed there.
// One middleware value serves any number of agents and concurrent runs:
// what a middleware counts during a run lives in that run's
// MiddlewareContext.Metadata, under a key private to the middleware value.
//
// Step hooks run in slice order after every step, so the order matters
// where middleware look at the state: a Budget listed before a
// ContextWindow sees (and reports in its error) the unpruned state. A
// typical order is
//
//	Middleware: []agent.Middleware{
//		middleware.Logging(&middleware.LoggingOptions{}),
//		middleware.Budget(&middleware.BudgetOptions{MaxTotalTokens: 200_000}),
//		middleware.ToolArgumentRepair(&middleware.ToolArgumentRepairOptions{}),
//		middleware.ContextWindow(&middleware.ContextWindowOptions{KeepToolResults: 3}),
//	}
//
// The limits of Budget and ToolArgumentRepair end a run with a typed error
// (*BudgetExceededError, *RepairExhaustedError) that carries the state
// reached at the end of the last step, a valid conversation from which the
// caller may resume (agent.Generate with a nil input) or inspect.
package middleware

import (
	"fmt"
	"sync/atomic"

	"github.com/agentry-dev/agentry/agent"
)

// instances numbers middleware values, so that each keeps its per-run data
// under its own key even when one agent lists two of the same kind.
var instances atomic.Int64

func newKey(kind string) string {
	return fmt.Sprintf("agentry/middleware.%s#%d", kind, instances.Add(1))
}

// runData returns the per-run value a middleware keeps under key in the
// run's metadata, created with init on first use. Hooks of one run are
// called one at a time, so the value needs no lock.
func runData[T any](mc *agent.MiddlewareContext, key string, init func() *T) *T {
	if v, ok := mc.Metadata[key].(*T); ok {
		return v
	}
	v := init()
	putRunData(mc, key, v)
	return v
}

func putRunData(mc *agent.MiddlewareContext, key string, v any) {
	if mc.Metadata == nil { // a middleware's Before replaced the context without it
		mc.Metadata = map[string]any{}
	}
	mc.Metadata[key] = v
}
