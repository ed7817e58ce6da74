package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Schema is a JSON Schema document, as a decoded JSON object. It describes
// tool parameters and structured output. UPP does not validate against it
// (UPP-1.3 §1.6): it is a contract sent to the model.
type Schema map[string]any

// parseSchema decodes a JSON Schema given as JSON text; it must be an object.
func parseSchema(s string) (Schema, error) {
	var v Schema
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("llm: schema: %w", err)
	}
	if v == nil {
		return nil, fmt.Errorf("llm: schema: not an object")
	}
	return v, nil
}

// MustSchema is ParseSchema that panics on error, for package-level schemas.
func MustSchema(s string) Schema {
	v, err := parseSchema(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Tool is a function the model may call (UPP-1.3 §11.1).
//
// Run receives the arguments exactly as the model sent them: the loop does
// not validate them against Parameters, so treat them as untrusted input.
// Run is called concurrently with the other calls of the same round, and
// must return when ctx is cancelled (streams are aborted through ctx).
type Tool struct {
	Name        string
	Description string
	Parameters  Schema
	Run         func(ctx context.Context, args map[string]any) (any, error)
	// Approval, when set, is asked before every call; false or an error
	// denies the call and the model receives an error result.
	Approval func(ctx context.Context, args map[string]any) (bool, error)
	// Metadata holds provider-namespaced tool options (e.g.
	// Metadata["anthropic"] = {"cache_control": …}); other layers keep their
	// own keys here too ("uap" for sub-agent scheduling).
	Metadata map[string]any
}

// NewTool returns a Tool whose Run decodes the arguments into Args (through
// JSON, so struct tags apply) before calling fn. A decoding failure becomes
// an error result for the model, never a panic. When the call carries the
// model's argument text (ToolCall.ArgumentsJSON) and the arguments were not
// replaced by a hook, Args is decoded from that text directly.
func NewTool[Args any](name, description string, parameters Schema, fn func(ctx context.Context, args Args) (any, error)) Tool {
	return Tool{
		Name:        name,
		Description: description,
		Parameters:  parameters,
		Run: func(ctx context.Context, m map[string]any) (any, error) {
			var args Args
			// The model's own text, when the loop has it and the map is
			// the call's, is decoded once; otherwise (or when that fails,
			// for a number such as 2.0 given for an integer) the map is
			// decoded through JSON, as it always was.
			if raw := rawArguments(ctx, m); raw != nil && json.Unmarshal(raw, &args) == nil {
				return fn(ctx, args)
			}
			args = *new(Args)
			b, err := json.Marshal(m)
			if err == nil {
				err = json.Unmarshal(b, &args)
			}
			if err != nil {
				return nil, fmt.Errorf("invalid arguments for %s: %v", name, err)
			}
			return fn(ctx, args)
		},
	}
}

// ToolCall is a call requested by the model.
type ToolCall struct {
	ToolCallID string
	ToolName   string
	Arguments  map[string]any
	// ArgumentsJSON is the JSON object Arguments was decoded from, as the
	// model sent it, when the provider kept it (NewToolCall does); nil
	// otherwise. It is not part of the JSON form. Tools made by NewTool
	// decode it into their typed input directly instead of re-encoding
	// Arguments. Like the rest of a message, it must not be modified.
	ArgumentsJSON json.RawMessage
	// RawArguments holds the model's argument text when it was not a JSON
	// object (Arguments is then nil). The loop answers such a call with an
	// error result instead of running the tool. Empty otherwise.
	RawArguments string
}

// ToolResult is the outcome of one call, sent back to the model.
type ToolResult struct {
	ToolCallID string
	Result     any
	IsError    bool
}

// ToolExecution records one executed (or denied) call (UPP-1.3 §7.3).
type ToolExecution struct {
	ToolName   string
	ToolCallID string
	Arguments  map[string]any
	Result     any
	IsError    bool
	Duration   time.Duration
	// Approved is nil when the tool has no approval handler.
	Approved *bool
	// Err is the error the call failed with (a tool error, a *PanicError,
	// an *ArgumentsError…), nil on success or denial. It is not part of
	// the JSON form.
	Err error
}

// Infinity as MaxIterations removes the limit on tool rounds. It is distinct
// from the zero value, which selects the UPP default of 10.
const Infinity = math.MaxInt

// defaultMaxIterations is UPP's default limit on tool rounds.
const defaultMaxIterations = 10

// BeforeCall is what OnBeforeCall decides: Proceed false skips the call (the
// model receives "Tool execution skipped"); a non-nil Arguments replaces the
// arguments the tool runs with.
type BeforeCall struct {
	Proceed   bool
	Arguments map[string]any
}

// ToolUseStrategy customizes the tool loop (UPP-1.3 §11.3). Every field is
// optional. The hooks are called concurrently for the calls of one round.
type ToolUseStrategy struct {
	// MaxIterations limits tool rounds: when the model still asks for tools
	// after MaxIterations rounds, OnMaxIterations is called and the
	// generation fails with INVALID_REQUEST. 0 means 10; use Infinity for no
	// limit.
	MaxIterations int
	// OnToolCall observes each call of a known tool before anything else.
	OnToolCall func(ctx context.Context, tool *Tool, args map[string]any)
	// OnBeforeCall may skip a call or rewrite its arguments.
	OnBeforeCall func(ctx context.Context, tool *Tool, args map[string]any) BeforeCall
	// OnAfterCall may replace a successful result: returning replace=true
	// sends result instead.
	OnAfterCall func(ctx context.Context, tool *Tool, args map[string]any, result any) (newResult any, replace bool)
	// OnError observes a failing call (error or panic).
	OnError func(ctx context.Context, tool *Tool, args map[string]any, err error)
	// OnMaxIterations is called once when the limit is hit, before the error.
	OnMaxIterations func(ctx context.Context, maxIterations int)
	// Schedule, when set, orders the calls of a round: preds[i] lists the
	// indexes of the calls that must finish (whatever their outcome) before
	// call i starts; the others still run concurrently. An invalid or
	// cyclic schedule runs the round one call at a time in call order. This
	// extends UPP-1.3: UAP's sequential and dependsOn tools use it.
	Schedule func(calls []ToolCall) (preds [][]int)
}

func (s *ToolUseStrategy) maxIterations() int {
	if s == nil || s.MaxIterations == 0 {
		return defaultMaxIterations
	}
	return s.MaxIterations
}

// callKey is the context key under which the loop puts the current call.
type callKey struct{}

type callInfo struct {
	call  *ToolCall // in the round's calls, which are immutable
	round *round
	index int
}

// round is one tool round: the calls a single model response requested,
// which the loop runs concurrently. Tools can coordinate through it (the
// agent package orders calls with it).
type round struct {
	calls []ToolCall
}

// Calls returns the round's calls in the order the model made them. The
// slice must not be modified.
func (r *round) Calls() []ToolCall { return r.calls }

// ToolCallFrom returns the call a tool's Run is executing, as the model sent
// it (the ID is the provider's). ok is false outside a tool call.
func ToolCallFrom(ctx context.Context) (call ToolCall, ok bool) {
	c, ok := ctx.Value(callKey{}).(*callInfo)
	if !ok {
		return ToolCall{}, false
	}
	return *c.call, true
}

// roundFrom returns the round a tool's Run belongs to and the call's index
// in it. ok is false outside a tool call.
func roundFrom(ctx context.Context) (round *round, index int, ok bool) {
	c, ok := ctx.Value(callKey{}).(*callInfo)
	if !ok {
		return nil, 0, false
	}
	return c.round, c.index, true
}

// ArgumentsError reports tool arguments that cannot be used: text that is
// not a JSON object, or (from a validating wrapper) arguments that do not
// match the tool's schema. Its message, which the model receives as the
// tool result, includes the schema so that the model can correct the call.
type ArgumentsError struct {
	Tool   string
	Reason string
	Schema Schema
}

// Error returns a message naming the tool and the reason and, when Schema
// is set, asking for a new call matching the schema, given as JSON.
func (e *ArgumentsError) Error() string {
	msg := fmt.Sprintf("Invalid arguments for tool '%s': %s.", e.Tool, e.Reason)
	if e.Schema != nil {
		if b, err := json.Marshal(e.Schema); err == nil {
			msg += " Call the tool again with arguments matching this JSON Schema: " + string(b)
		}
	}
	return msg
}
