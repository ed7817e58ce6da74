package builtin

import (
	"context"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// EchoModelID names EchoModel on the command line and in agent files
// ("scripted:echo").
const EchoModelID = "echo"

// EchoModel is the offline model of the example echo agent: it answers
// with the text of the latest user message, unchanged, and calls no tool.
func EchoModel() *scripted.Model {
	m := scripted.NewFunc(func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if u, ok := req.Messages[i].(*llm.UserMessage); ok {
				return scripted.Step{Text: u.Text()}, nil
			}
		}
		return scripted.Step{Text: ""}, nil
	})
	m.ID = EchoModelID
	return m
}
