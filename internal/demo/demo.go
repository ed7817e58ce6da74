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

// exprPattern finds an arithmetic expression: numbers joined by operators.
var exprPattern = regexp.MustCompile(`[-(]*\d+(?:\.\d+)?\)*(?:\s*[-+*/%^]\s*[-(]*\d+(?:\.\d+)?\)*)+`)

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
// task holds arithmetic and word_stats otherwise, then answers from the
// tool's result. It also plays along with the agent strategies: it reasons
// when ReAct asks it to, plans when Plan asks for a plan (structured), and
// executes plan steps. Without tools it says what it would have done.
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

func reply(_ context.Context, req *llm.Request) (scripted.Step, error) {
	msgs := req.Messages
	if len(msgs) == 0 {
		return scripted.Step{Text: "(demo model) Nothing to answer."}, nil
	}
	has := map[string]bool{}
	for _, t := range req.Tools {
		has[t.Name] = true
	}
	// The task, and the tool results since.
	task, taskAt := "", 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if u, ok := msgs[i].(*llm.UserMessage); ok && !strategyPrompt(u.Text()) {
			task, taskAt = u.Text(), i
			break
		}
	}
	var results []llm.ToolResult
	for _, m := range msgs[taskAt:] {
		if r, ok := m.(*llm.ToolResultMessage); ok {
			results = append(results, r.Results...)
		}
	}
	last := msgs[len(msgs)-1]
	prompt := ""
	if u, ok := last.(*llm.UserMessage); ok {
		prompt = u.Text()
	}
	expr := exprPattern.FindString(task)
	tool := WordStats.Name
	if expr != "" {
		tool = Calculator.Name
	}
	switch {
	case strings.Contains(prompt, "Create an execution plan") && req.Structure != nil:
		return scripted.Step{Data: map[string]any{"steps": []any{
			map[string]any{"id": "work", "description": "use the " + tool + " tool on the task", "tool": tool, "dependsOn": []any{}},
			map[string]any{"id": "answer", "description": "state the result", "dependsOn": []any{"work"}},
		}}}, nil
	case req.Structure != nil:
		return scripted.Step{Data: map[string]any{"text": task, "words": len(strings.Fields(task))}}, nil
	case last.Type() == llm.TypeToolResult:
		return answer(req, results), nil
	case prompt == execution.DefaultReasoningPrompt:
		if len(results) > 0 {
			return scripted.Step{Text: "The tool has answered; I can give the result now."}, nil
		}
		if expr != "" {
			return scripted.Step{Text: "The task contains the expression " + expr + "; the calculator will evaluate it exactly."}, nil
		}
		return scripted.Step{Text: "There is no arithmetic in the task; I will measure the text."}, nil
	case strategyPrompt(prompt) && len(results) > 0:
		return answer(req, results), nil
	}
	if !has[tool] {
		return scripted.Step{Text: fmt.Sprintf("(demo model, no tools enabled) You wrote %d words.", len(strings.Fields(task)))}, nil
	}
	call := llm.ToolCall{ToolName: WordStats.Name, Arguments: map[string]any{"text": task}}
	step := scripted.Step{Reasoning: "There is no arithmetic here; I will measure the text instead.", Text: "Let me count that."}
	if expr != "" {
		call = llm.ToolCall{ToolName: Calculator.Name, Arguments: map[string]any{"expression": strings.TrimSpace(expr)}}
		step = scripted.Step{Reasoning: "The prompt contains the expression " + expr + "; the calculator will evaluate it exactly.", Text: "Let me calculate that."}
	}
	step.ToolCalls = []llm.ToolCall{call}
	return step, nil
}

// answer phrases the final reply from the task's tool results.
func answer(req *llm.Request, results []llm.ToolResult) scripted.Step {
	calls := map[string]llm.ToolCall{}
	for _, m := range req.Messages {
		if a, ok := m.(*llm.AssistantMessage); ok {
			for _, c := range a.ToolCalls {
				calls[c.ToolCallID] = c
			}
		}
	}
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
				parts = append(parts, fmt.Sprintf("Your text has %v words and %v characters.", m["words"], m["characters"]))
				continue
			}
			fallthrough
		default:
			parts = append(parts, fmt.Sprintf("%s returned %s.", c.ToolName, llm.ResultText(r.Result)))
		}
	}
	return scripted.Step{Text: strings.Join(parts, " ")}
}
