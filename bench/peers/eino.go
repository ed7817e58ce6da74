package peers

import (
	"context"
	"errors"

	"github.com/agentry-dev/agentry/bench/peers/scenario"
	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// einoModel is the fake model as an Eino model.ToolCallingChatModel. Eino
// carries arguments and tool results as JSON text, so the fake converts
// nothing.
type einoModel struct{ rec *scenario.Record }

func (m einoModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.rec.Model()
	meta := &schema.ResponseMeta{Usage: &schema.TokenUsage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
	if input[len(input)-1].Role == schema.Tool {
		for _, msg := range input {
			if msg.Role == schema.Tool {
				m.rec.Result(msg.Content)
			}
		}
		return &schema.Message{Role: schema.Assistant, Content: scenario.Answer, ResponseMeta: meta}, nil
	}
	return &schema.Message{Role: schema.Assistant, ResponseMeta: meta, ToolCalls: []schema.ToolCall{
		{ID: scenario.WeatherID, Type: "function", Function: schema.FunctionCall{Name: scenario.WeatherName, Arguments: scenario.WeatherArgs}},
		{ID: scenario.ClockID, Type: "function", Function: schema.FunctionCall{Name: scenario.ClockName, Arguments: scenario.ClockArgs}},
	}}, nil
}

func (einoModel) Stream(context.Context, []*schema.Message, ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return nil, errors.New("fake model: streaming is not part of the scenario")
}

func (m einoModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

func einoTools(rec *scenario.Record) ([]tool.BaseTool, error) {
	weather, err := utils.InferTool(scenario.WeatherName, scenario.WeatherDesc,
		func(_ context.Context, in scenario.WeatherIn) (scenario.WeatherOut, error) {
			return scenario.Weather(rec, in)
		})
	if err != nil {
		return nil, err
	}
	clock, err := utils.InferTool(scenario.ClockName, scenario.ClockDesc,
		func(_ context.Context, in scenario.ClockIn) (scenario.ClockOut, error) {
			return scenario.Clock(rec, in)
		})
	if err != nil {
		return nil, err
	}
	return []tool.BaseTool{weather, clock}, nil
}

func newEinoReact(rec *scenario.Record) (scenario.Turn, error) {
	ctx := context.Background()
	tools, err := einoTools(rec)
	if err != nil {
		return nil, err
	}
	a, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: einoModel{rec},
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools}, // parallel by default
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) {
		msg, err := a.Generate(ctx, []*schema.Message{schema.UserMessage(scenario.Question)})
		if err != nil {
			return "", err
		}
		return msg.Content, nil
	}, nil
}

func newEinoADK(rec *scenario.Record) (scenario.Turn, error) {
	ctx := context.Background()
	tools, err := einoTools(rec)
	if err != nil {
		return nil, err
	}
	a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "assistant",
		Description: "Answers with tools.",
		Model:       einoModel{rec},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: tools}},
	})
	if err != nil {
		return nil, err
	}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: a})
	return func(ctx context.Context) (string, error) {
		events := runner.Query(ctx, scenario.Question)
		var answer string
		for {
			ev, ok := events.Next()
			if !ok {
				break
			}
			if ev.Err != nil {
				return "", ev.Err
			}
			if ev.Output == nil || ev.Output.MessageOutput == nil || ev.Output.MessageOutput.Role != schema.Assistant {
				continue
			}
			msg, err := ev.Output.MessageOutput.GetMessage()
			if err != nil {
				return "", err
			}
			answer = msg.Content
		}
		return answer, nil
	}, nil
}
