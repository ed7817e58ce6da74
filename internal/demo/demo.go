// Package demo holds agentry's offline demonstration pieces: a
// deterministic model (no LLM, no network, no key) and two real tools, so
// that `agentry llm` shows streaming, the tool loop and usage accounting on
// a fresh machine. The demo model is labelled as such wherever it is used.
package demo

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// ModelID is the demo model's id ("scripted:demo" on the command line).
const ModelID = "demo"

// Calculator is a tool evaluating arithmetic expressions.
var Calculator = llm.NewTool("calculate", "Evaluates an arithmetic expression with + - * / % ^ and parentheses.",
	llm.MustSchema(`{"type":"object","properties":{"expression":{"type":"string","description":"e.g. (2+3)*4"}},"required":["expression"]}`),
	func(_ context.Context, args struct {
		Expression string `json:"expression"`
	}) (any, error) {
		v, err := Evaluate(args.Expression)
		if err != nil {
			return nil, err
		}
		return FormatNumber(v), nil
	})

// WordStats is a tool counting the words and characters of a text.
var WordStats = llm.NewTool("word_stats", "Counts the words and characters of a text.",
	llm.MustSchema(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	func(_ context.Context, args struct {
		Text string `json:"text"`
	}) (any, error) {
		return map[string]any{"words": len(strings.Fields(args.Text)), "characters": utf8.RuneCountInString(args.Text)}, nil
	})

// Tools returns the demo tools.
func Tools() []llm.Tool { return []llm.Tool{Calculator, WordStats} }

// Model returns the demo model. For the task (the latest user message
// that is not an agent strategy's prompt) it calls the calculator when the
// task holds arithmetic (FindExpression) and word_stats otherwise, then
// answers from the tool's result. Offered neither, it hands the task to
// the first tool taking one required string (delegate: a sub-agent, a
// search) and answers with what that returned. It also plays along with the agent
// strategies, saying each thing once: it reasons when ReAct asks it to
// (and then acts without reasoning again), plans when Plan asks for a plan
// (structured), reports each plan step's outcome and gives the final
// answer when the plan is done. Without tools it says what it would have
// done.
func Model() *scripted.Model {
	m := scripted.NewFunc(reply)
	m.ID = ModelID
	return m
}

// strategyPrompt reports whether text is a prompt an agent strategy sent
// rather than the user's task.
func strategyPrompt(text string) bool {
	return text == execution.DefaultReasoningPrompt || text == execution.DefaultActionPrompt ||
		strings.Contains(text, "Create an execution plan") || strings.HasPrefix(text, "Execute step") ||
		strings.HasPrefix(text, "All steps of the plan are complete") || strings.HasPrefix(text, "The plan could not be completed")
}

// planStepTool extracts the tool a plan step prompt names: "… (use the
// NAME tool)".
var planStepTool = regexp.MustCompile(`\(use the (\S+) tool\)$`)

func reply(_ context.Context, req *llm.Request) (scripted.Step, error) {
	msgs := req.Messages
	if len(msgs) == 0 {
		return scripted.Step{Text: "(demo model) Nothing to answer."}, nil
	}
	has := map[string]bool{}
	for _, t := range req.Tools {
		has[t.Name] = true
	}
	// The task and the latest prompt (the task or a strategy's), and the
	// tool results since each.
	task, taskAt, prompt, promptAt := "", 0, "", -1
	for i := len(msgs) - 1; i >= 0; i-- {
		u, ok := msgs[i].(*llm.UserMessage)
		if !ok {
			continue
		}
		if promptAt < 0 {
			prompt, promptAt = u.Text(), i
		}
		if !strategyPrompt(u.Text()) {
			task, taskAt = u.Text(), i
			break
		}
	}
	results := resultsSince(msgs, taskAt)
	stepResults := resultsSince(msgs, max(promptAt, 0))
	last := msgs[len(msgs)-1]
	expr := FindExpression(task)
	tool := WordStats.Name
	if expr != "" {
		tool = Calculator.Name
	}
	call := func() scripted.Step {
		if expr != "" {
			return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: Calculator.Name, Arguments: map[string]any{"expression": expr}}}}
		}
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: WordStats.Name, Arguments: map[string]any{"text": task}}}}
	}
	switch {
	case strings.Contains(prompt, "Create an execution plan") && req.Structure != nil:
		return scripted.Step{Data: map[string]any{"steps": []any{
			map[string]any{"id": "work", "description": "use the " + tool + " tool on the task", "tool": tool, "dependsOn": []any{}},
			map[string]any{"id": "answer", "description": "state the result", "dependsOn": []any{"work"}},
		}}}, nil
	case req.Structure != nil:
		return scripted.Step{Data: map[string]any{"text": task, "words": len(strings.Fields(task))}}, nil
	case prompt == execution.DefaultReasoningPrompt:
		if len(results) > 0 {
			return scripted.Step{Text: "The tool has answered; I can give the result now."}, nil
		}
		if expr != "" {
			return scripted.Step{Text: "The task contains the expression " + expr + "; the calculator will evaluate it exactly."}, nil
		}
		return scripted.Step{Text: "There is no arithmetic in the task; I will measure the text."}, nil
	case strings.HasPrefix(prompt, "Execute step"):
		named := planStepTool.FindStringSubmatch(prompt)
		switch {
		case len(stepResults) > 0:
			return scripted.Step{Text: "Step done: " + outcome(req, stepResults)}, nil
		case named != nil && has[named[1]] && named[1] == tool:
			return call(), nil
		}
		return scripted.Step{Text: "Step done: the result is ready to be stated."}, nil
	case last.Type() == llm.TypeToolResult, strategyPrompt(prompt) && len(results) > 0:
		return answer(req, results), nil
	}
	if !has[Calculator.Name] && !has[WordStats.Name] && len(results) == 0 {
		if name, param := delegate(req.Tools); name != "" {
			return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: name, Arguments: map[string]any{param: task}}}}, nil
		}
	}
	if !has[tool] {
		return scripted.Step{Text: fmt.Sprintf("(demo model, no tools enabled) You wrote %s.", plural(len(strings.Fields(task)), "word"))}, nil
	}
	step := call()
	if prompt != execution.DefaultActionPrompt { // ReAct has reasoned already
		step.Reasoning = "There is no arithmetic here; I will measure the text instead."
		if expr != "" {
			step.Reasoning = "The prompt contains the expression " + expr + "; the calculator will evaluate it exactly."
		}
	}
	return step, nil
}

// delegate picks the tool the demo model hands a task to when it has
// neither calculate nor word_stats: the first whose parameters take one
// required string (a sub-agent's input, a search's query), and that
// parameter's name.
func delegate(tools []llm.Tool) (name, param string) {
	for _, t := range tools {
		req, _ := t.Parameters["required"].([]any)
		props, _ := t.Parameters["properties"].(map[string]any)
		if len(req) != 1 {
			continue
		}
		p, _ := req[0].(string)
		if prop, _ := props[p].(map[string]any); prop["type"] == "string" {
			return t.Name, p
		}
	}
	return "", ""
}

// resultsSince returns the tool results of msgs[from:].
func resultsSince(msgs []llm.Message, from int) []llm.ToolResult {
	var out []llm.ToolResult
	for _, m := range msgs[from:] {
		if r, ok := m.(*llm.ToolResultMessage); ok {
			out = append(out, r.Results...)
		}
	}
	return out
}

// outcome says what a plan step's tool calls returned.
func outcome(req *llm.Request, results []llm.ToolResult) string {
	calls := callsByID(req)
	var parts []string
	for _, r := range results {
		c := calls[r.ToolCallID]
		verb := "returned"
		if r.IsError {
			verb = "failed:"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s.", c.ToolName, verb, llm.ResultText(r.Result)))
	}
	return strings.Join(parts, " ")
}

func callsByID(req *llm.Request) map[string]llm.ToolCall {
	calls := map[string]llm.ToolCall{}
	for _, m := range req.Messages {
		if a, ok := m.(*llm.AssistantMessage); ok {
			for _, c := range a.ToolCalls {
				calls[c.ToolCallID] = c
			}
		}
	}
	return calls
}

// plural writes n and the noun, in the plural unless n is 1.
func plural(n any, noun string) string {
	if fmt.Sprint(n) == "1" {
		return "1 " + noun
	}
	return fmt.Sprintf("%v %ss", n, noun)
}

// answer phrases the final reply from the task's tool results.
func answer(req *llm.Request, results []llm.ToolResult) scripted.Step {
	calls := callsByID(req)
	var parts []string
	for _, r := range results {
		c := calls[r.ToolCallID]
		switch {
		case r.IsError:
			parts = append(parts, fmt.Sprintf("The %s tool failed: %s.", c.ToolName, llm.ResultText(r.Result)))
		case c.ToolName == Calculator.Name:
			parts = append(parts, fmt.Sprintf("%v = %s.", c.Arguments["expression"], llm.ResultText(r.Result)))
		case c.ToolName == WordStats.Name:
			if m, ok := r.Result.(map[string]any); ok {
				parts = append(parts, fmt.Sprintf("Your text has %s and %s.", plural(m["words"], "word"), plural(m["characters"], "character")))
				continue
			}
			fallthrough
		default:
			parts = append(parts, strings.TrimSuffix(fmt.Sprintf("%s returned %s", c.ToolName, llm.ResultText(r.Result)), ".")+".")
		}
	}
	return scripted.Step{Text: strings.Join(parts, " ")}
}
