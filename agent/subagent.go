package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
)

// SubagentOptions describes the tool that exposes an agent as a sub-agent
// (UAP-1.1 §8). Name, Description and Parameters are required: the schema
// is always explicit, never derived from the agent (§8.1).
type SubagentOptions struct {
	Name        string
	Description string
	Parameters  llm.Schema
	// Input builds the sub-agent's input from the arguments; nil uses the
	// string argument "prompt", "query", "task" or "input", in that order.
	Input func(args map[string]any) (string, error)
	// Output turns the sub-agent's turn into the tool result; nil uses
	// the reply text.
	Output func(turn *llm.Turn) any
	// Type names the sub-agent in traces; default Name.
	Type string
	// Sequential and DependsOn order the tool's calls within a round
	// (§8.3).
	Sequential bool
	DependsOn  []string
}

// SubagentTool returns an llm.Tool that runs sub on its input from an empty
// state. When the parent run is streamed, the sub-agent streams too and
// its events reach the parent's stream as subagent_event between
// subagent_start and subagent_end (§8.4). Every execution is recorded as a
// SubagentTrace in the state the parent's step ends with (§8.5) — in every
// strategy, since the trace travels through the tool's context.
func SubagentTool(sub *Agent, options *SubagentOptions) (llm.Tool, error) {
	var opts SubagentOptions
	if options != nil {
		opts = *options
	}
	switch {
	case sub == nil:
		return llm.Tool{}, errors.New("agent: SubagentTool needs an agent")
	case opts.Name == "" || opts.Description == "":
		return llm.Tool{}, errors.New("agent: SubagentTool needs a name and a description")
	case opts.Parameters == nil:
		return llm.Tool{}, errors.New("agent: SubagentTool needs an explicit parameter schema (UAP-1.1 §8.1)")
	}
	typ := opts.Type
	if typ == "" {
		typ = opts.Name
	}
	input := opts.Input
	if input == nil {
		input = defaultSubagentInput
	}
	output := opts.Output
	if output == nil {
		output = func(t *llm.Turn) any { return t.Text() }
	}
	t := llm.Tool{
		Name: opts.Name, Description: opts.Description, Parameters: opts.Parameters,
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			prompt, err := input(args)
			if err != nil {
				return nil, err
			}
			return runSubagent(ctx, sub, typ, prompt, output)
		},
	}
	if opts.Sequential {
		t = Sequential(t)
	}
	if len(opts.DependsOn) > 0 {
		t = DependsOn(t, opts.DependsOn...)
	}
	return t, nil
}

func defaultSubagentInput(args map[string]any) (string, error) {
	for _, k := range []string{"prompt", "query", "task", "input"} {
		if s, ok := args[k].(string); ok && strings.TrimSpace(s) != "" {
			return s, nil
		}
	}
	return "", errors.New(`sub-agent input missing: pass a string "prompt", "query", "task" or "input" argument`)
}

func runSubagent(ctx context.Context, sub *Agent, typ, prompt string, output func(*llm.Turn) any) (any, error) {
	tc, inRun := ToolContextFrom(ctx)
	call, _ := llm.ToolCallFrom(ctx)
	trace := SubagentTrace{SubagentID: ids.New(), SubagentType: typ, ParentToolCallID: call.ToolCallID, Prompt: prompt, StartTime: time.Now().UTC()}
	base := func() map[string]any {
		return map[string]any{"subagentId": trace.SubagentID, "subagentType": typ, "parentToolCallId": call.ToolCallID}
	}
	var (
		res *Result
		err error
	)
	if inRun && tc.Streaming() {
		start := base()
		start["prompt"] = prompt
		tc.Emit(EventSubagentStart, start)
		s := sub.Stream(ctx, llm.Text(prompt), Initial())
		for ev, evErr := range s.Events() {
			if evErr != nil {
				break
			}
			d := base()
			d["event"] = ev
			tc.Emit(EventSubagentEvent, d)
		}
		res, err = s.Result()
	} else {
		res, err = sub.Generate(ctx, llm.Text(prompt), Initial())
	}
	trace.EndTime = time.Now().UTC()
	end := base()
	var result any
	if err != nil {
		trace.Error = err.Error()
		end["success"], end["error"] = false, err.Error()
	} else {
		result = output(res.Turn)
		trace.Success, trace.Result = true, llm.ResultText(result)
		usage := res.Turn.Usage
		trace.Usage = &usage
		for _, x := range res.Turn.ToolExecutions {
			trace.ToolExecutions = append(trace.ToolExecutions, ToolExecutionTrace{
				ToolName: x.ToolName, ToolCallID: x.ToolCallID, Arguments: x.Arguments,
				Result: llm.ResultText(x.Result), IsError: x.IsError, Duration: x.Duration.Milliseconds(),
			})
		}
		end["success"], end["result"] = true, trace.Result
	}
	if inRun {
		tc.Emit(EventSubagentEnd, end)
		tc.RecordTrace(trace)
	}
	if err != nil {
		return nil, fmt.Errorf("sub-agent %s failed: %w", typ, err)
	}
	return result, nil
}
