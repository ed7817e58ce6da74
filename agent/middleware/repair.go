package middleware

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/schemas"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// defaultMaxRetries is ToolArgumentRepair's MaxRetries when it is 0.
const defaultMaxRetries = 2

// ToolArgumentRepairOptions configures ToolArgumentRepair.
type ToolArgumentRepairOptions struct {
	// MaxRetries is how many times in a row the model may call a tool
	// again after its arguments were invalid: the run ends on the
	// failure after that, the (MaxRetries+1)-th in a row. 0 means
	// 2, since a model usually needs one or two tries to
	// correct a call; a negative value allows none (the first invalid
	// call ends the run), llm.Infinity removes the limit.
	MaxRetries int
	// Logger receives a record, when the agent is created, for each tool
	// whose parameter schema does not compile; nil uses slog.Default().
	Logger *slog.Logger
}

// RepairExhaustedError ends a run in which the model kept calling a tool
// with invalid arguments. Match it with errors.As.
type RepairExhaustedError struct {
	// Tool is the tool's name.
	Tool string
	// Attempts counts the steps in a row in which the tool's arguments
	// were invalid.
	Attempts int
	// Last is the last of those failures; errors.As reaches it.
	Last *llm.ArgumentsError
	// State is the state reached at the end of the last failing step,
	// with the invalid call and its error result.
	State *agent.State
}

// Error returns a message naming the tool and the number of failed
// attempts, followed by the last failure's reason when there is one.
func (e *RepairExhaustedError) Error() string {
	msg := fmt.Sprintf("middleware: tool %q received invalid arguments %d times in a row", e.Tool, e.Attempts)
	if e.Last != nil {
		msg += ": " + e.Last.Reason
	}
	return msg
}

// Unwrap returns Last.
func (e *RepairExhaustedError) Unwrap() error {
	if e.Last == nil {
		return nil
	}
	return e.Last
}

// ToolArgumentRepair returns middleware that validates every tool call's
// arguments against the tool's Parameters (JSON Schema, formats asserted)
// before the tool runs. Invalid arguments do not reach the tool: the call
// fails with an *llm.ArgumentsError, whose message — the validation
// failures with the JSON Pointer of each offending value, then the schema
// — is the tool result the model receives, so that it can correct the call.
// Arguments that are not a JSON object at all are answered the same way by
// the llm core. A tool's Approval is not asked about invalid arguments:
// such a call is let through to fail validation.
//
// Retries are bounded: after every step, a tool whose calls failed with an
// ArgumentsError (from either source) counts one failed attempt, and a
// tool whose calls went through resets its count; when a tool's count
// goes over MaxRetries the run ends with a *RepairExhaustedError. Counts
// are per run and per tool.
//
// The schemas are compiled once, when the agent is created. A tool
// without Parameters is left alone, and so is a tool whose schema does not
// compile (a remote or file $ref, which is never loaded, or an invalid
// schema): its arguments go to it unvalidated, as without this middleware,
// and Logger gets an error record naming the tool. Failing the tool's
// calls instead would only tell the model about a fault it cannot repair.
func ToolArgumentRepair(options *ToolArgumentRepairOptions) agent.Middleware {
	var opts ToolArgumentRepairOptions
	if options != nil {
		opts = *options
	}
	return &repair{opts: opts, key: newKey("tool-argument-repair")}
}

type repair struct {
	opts ToolArgumentRepairOptions
	key  string
}

// repairRun is a run's count of failed attempts per tool.
type repairRun struct {
	failures map[string]int
}

// Name returns "tool-argument-repair".
func (r *repair) Name() string { return "tool-argument-repair" }

func (r *repair) maxRetries() int {
	switch {
	case r.opts.MaxRetries == 0:
		return defaultMaxRetries
	case r.opts.MaxRetries < 0:
		return 0
	}
	return r.opts.MaxRetries
}

// WrapTool returns t validating its arguments.
func (r *repair) WrapTool(t llm.Tool) llm.Tool {
	if t.Run == nil || t.Parameters == nil {
		return t
	}
	sch, err := compileSchema(t.Parameters)
	if err != nil {
		logger := r.opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Error("tool arguments will not be validated: the parameter schema does not compile", "tool", t.Name, "error", err)
		return t
	}
	name, params, run, approval := t.Name, t.Parameters, t.Run, t.Approval
	t.Run = func(ctx context.Context, args map[string]any) (any, error) {
		if reason := validate(sch, args); reason != "" {
			return nil, &llm.ArgumentsError{Tool: name, Reason: reason, Schema: params}
		}
		return run(ctx, args)
	}
	if approval != nil {
		// The core asks for approval before Run: let invalid calls through
		// to fail in Run rather than ask anyone about them.
		t.Approval = func(ctx context.Context, args map[string]any) (bool, error) {
			if validate(sch, args) != "" {
				return true, nil
			}
			return approval(ctx, args)
		}
	}
	return t
}

// Before does nothing: the work is done by WrapTool and OnStep.
func (r *repair) Before(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
	return nil, nil
}

// OnStep counts the step's argument failures per tool and ends the run
// when a tool has run out of retries.
func (r *repair) OnStep(ctx context.Context, mc *agent.MiddlewareContext, step agent.StepInfo) (*agent.State, error) {
	if step.Turn == nil || len(step.Turn.ToolExecutions) == 0 {
		return nil, nil
	}
	run := runData(mc, r.key, func() *repairRun { return &repairRun{failures: map[string]int{}} })
	type verdict struct {
		failure *llm.ArgumentsError // the first in call order
		passed  bool
	}
	verdicts := map[string]*verdict{}
	var order []string
	for _, x := range inCallOrder(step.Turn) {
		v := verdicts[x.ToolName]
		if v == nil {
			v = &verdict{}
			verdicts[x.ToolName] = v
			order = append(order, x.ToolName)
		}
		var ae *llm.ArgumentsError
		switch {
		case errors.As(x.Err, &ae):
			if v.failure == nil {
				v.failure = ae
			}
		case x.Approved != nil && !*x.Approved:
			// denied before its arguments were looked at: no verdict
		default:
			v.passed = true
		}
	}
	for _, tool := range order {
		switch v := verdicts[tool]; {
		case v.failure != nil:
			run.failures[tool]++
			if n := run.failures[tool]; n > r.maxRetries() {
				return nil, &RepairExhaustedError{Tool: tool, Attempts: n, Last: v.failure, State: step.State}
			}
		case v.passed:
			delete(run.failures, tool)
		}
	}
	return nil, nil
}

// inCallOrder returns a turn's tool executions (recorded in completion
// order) in the order of the calls, so that what is reported does not
// depend on which of concurrent calls ended first.
func inCallOrder(t *llm.Turn) []llm.ToolExecution {
	pos := map[string]int{}
	for _, m := range t.Messages {
		if a, ok := m.(*llm.AssistantMessage); ok {
			for _, c := range a.ToolCalls {
				if _, dup := pos[c.ToolCallID]; !dup {
					pos[c.ToolCallID] = len(pos)
				}
			}
		}
	}
	at := func(x llm.ToolExecution) int {
		if p, ok := pos[x.ToolCallID]; ok {
			return p
		}
		return len(pos) // unknown ids last, in completion order
	}
	execs := slices.Clone(t.ToolExecutions)
	slices.SortStableFunc(execs, func(a, b llm.ToolExecution) int { return cmp.Compare(at(a), at(b)) })
	return execs
}

// After returns res unchanged.
func (r *repair) After(ctx context.Context, mc *agent.MiddlewareContext, res *agent.Result) (*agent.Result, error) {
	return res, nil
}

// OnError does not recover: it passes err on.
func (r *repair) OnError(ctx context.Context, mc *agent.MiddlewareContext, err error) (*agent.Result, error) {
	return nil, nil
}

// schemaURL names a tool's schema inside its own compiler.
const schemaURL = "urn:agentry:tool-parameters"

func compileSchema(s llm.Schema) (*jsonschema.Schema, error) {
	return schemas.Compile(schemaURL, s)
}

// toJSONValue converts v to the form jsonschema works on (numbers as
// json.Number, slices as []any…) through its JSON encoding.
func toJSONValue(v any) (any, error) { return schemas.Value(v) }

// maxReasons bounds the failures listed in an ArgumentsError, and
// maxReasonLen each failure's text (which may quote the argument).
const (
	maxReasons   = 10
	maxReasonLen = 300
)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// validate returns why args do not match sch, "" when they do.
func validate(sch *jsonschema.Schema, args map[string]any) string {
	v, err := toJSONValue(args)
	if err != nil {
		return "" // not JSON, so not the model's: the tool decides
	}
	err = sch.Validate(v)
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	type failure struct{ at, msg string }
	var failures []failure
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
		if u.Error == nil {
			return
		}
		if _, ok := u.Error.Kind.(*kind.Schema); !ok {
			failures = append(failures, failure{u.InstanceLocation, truncate(u.Error.String(), maxReasonLen)})
		}
	}
	walk(ve.DetailedOutput())
	// The validator visits properties in map order: sort, the top level first.
	slices.SortFunc(failures, func(a, b failure) int {
		return cmp.Or(strings.Compare(a.at, b.at), strings.Compare(a.msg, b.msg))
	})
	failures = slices.Compact(failures)
	var reasons []string
	for _, f := range failures {
		at := "at the top level"
		if f.at != "" {
			at = "at '" + f.at + "'"
		}
		reasons = append(reasons, at+": "+f.msg)
	}
	if len(reasons) == 0 {
		return strings.TrimSpace(ve.Error())
	}
	if len(reasons) > maxReasons {
		reasons = append(reasons[:maxReasons], fmt.Sprintf("and %d more", len(reasons)-maxReasons))
	}
	return strings.Join(reasons, "; ")
}
