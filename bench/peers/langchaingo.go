package peers

import (
	"context"
	"encoding/json"

	"github.com/agentry-dev/agentry/bench/peers/scenario"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"
)

// lcModel is the fake model as a langchaingo llms.Model. langchaingo carries
// arguments and tool results as text, so the fake converts nothing.
type lcModel struct{ rec *scenario.Record }

func (m lcModel) GenerateContent(_ context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	m.rec.Model()
	info := map[string]any{"PromptTokens": 10, "CompletionTokens": 5, "TotalTokens": 15}
	if msgs[len(msgs)-1].Role == llms.ChatMessageTypeTool {
		for _, msg := range msgs {
			for _, p := range msg.Parts {
				if r, ok := p.(llms.ToolCallResponse); ok {
					m.rec.Result(r.Content)
				}
			}
		}
		return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: scenario.Answer, StopReason: "stop", GenerationInfo: info}}}, nil
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{StopReason: "tool_calls", GenerationInfo: info, ToolCalls: []llms.ToolCall{
		{ID: scenario.WeatherID, Type: "function", FunctionCall: &llms.FunctionCall{Name: scenario.WeatherName, Arguments: scenario.WeatherArgs}},
		{ID: scenario.ClockID, Type: "function", FunctionCall: &llms.FunctionCall{Name: scenario.ClockName, Arguments: scenario.ClockArgs}},
	}}}}, nil
}

func (m lcModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// lcTool is a typed tool on langchaingo's tools.Tool, which has no typed
// helper: the tool decodes its JSON input and encodes its output itself.
type lcTool[In, Out any] struct {
	name, desc string
	fn         func(In) (Out, error)
}

func (t lcTool[In, Out]) Name() string        { return t.name }
func (t lcTool[In, Out]) Description() string { return t.desc }

func (t lcTool[In, Out]) Call(_ context.Context, input string) (string, error) {
	var in In
	if err := json.Unmarshal([]byte(input), &in); err != nil {
		return "", err
	}
	out, err := t.fn(in)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func newLangchaingo(rec *scenario.Record) (scenario.Turn, error) {
	ts := []tools.Tool{
		lcTool[scenario.WeatherIn, scenario.WeatherOut]{scenario.WeatherName, scenario.WeatherDesc, func(in scenario.WeatherIn) (scenario.WeatherOut, error) { return scenario.Weather(rec, in) }},
		lcTool[scenario.ClockIn, scenario.ClockOut]{scenario.ClockName, scenario.ClockDesc, func(in scenario.ClockIn) (scenario.ClockOut, error) { return scenario.Clock(rec, in) }},
	}
	ex := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(lcModel{rec}, ts))
	return func(ctx context.Context) (string, error) {
		return chains.Run(ctx, ex, scenario.Question)
	}, nil
}
