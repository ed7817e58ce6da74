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

// Model returns the demo model: it uses the calculator when the prompt has
// arithmetic in it, word_stats otherwise, and then answers from the tool's
// result; without tools it says what it would have done.
func Model() *scripted.Model {
	m := scripted.NewFunc(reply)
	m.ID = ModelID
	return m
}

func reply(_ context.Context, req *llm.Request) (scripted.Step, error) {
	if len(req.Messages) == 0 {
		return scripted.Step{Text: "(demo model) Nothing to answer."}, nil
	}
	has := map[string]bool{}
	for _, t := range req.Tools {
		has[t.Name] = true
	}
	switch last := req.Messages[len(req.Messages)-1].(type) {
	case *llm.ToolResultMessage:
		return answer(req, last), nil
	default:
		text := last.Text()
		if req.Structure != nil {
			return scripted.Step{Data: map[string]any{"text": text, "words": len(strings.Fields(text))}}, nil
		}
		if expr := exprPattern.FindString(text); expr != "" && has[Calculator.Name] {
			return scripted.Step{
				Reasoning: "The prompt contains the expression " + expr + "; the calculator will evaluate it exactly.",
				Text:      "Let me calculate that.",
				ToolCalls: []llm.ToolCall{{ToolName: Calculator.Name, Arguments: map[string]any{"expression": strings.TrimSpace(expr)}}},
			}, nil
		}
		if has[WordStats.Name] {
			return scripted.Step{
				Reasoning: "There is no arithmetic here; I will measure the text instead.",
				Text:      "Let me count that.",
				ToolCalls: []llm.ToolCall{{ToolName: WordStats.Name, Arguments: map[string]any{"text": text}}},
			}, nil
		}
		return scripted.Step{Text: fmt.Sprintf("(demo model, no tools enabled) You wrote %d words.", len(strings.Fields(text)))}, nil
	}
}

// answer phrases the final reply from a round's tool results.
func answer(req *llm.Request, results *llm.ToolResultMessage) scripted.Step {
	calls := map[string]llm.ToolCall{}
	for _, m := range req.Messages {
		if a, ok := m.(*llm.AssistantMessage); ok {
			for _, c := range a.ToolCalls {
				calls[c.ToolCallID] = c
			}
		}
	}
	var parts []string
	for _, r := range results.Results {
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
