package peers

import (
	"context"
	"errors"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/bench/peers/scenario"
	"github.com/agentry-dev/agentry/llm"
)

// agentryModel is the fake model as an llm.LLMProvider and llm.Handler.
// A tool call carries its arguments decoded (a map) and as the model's
// text, so the fake builds its calls from the argument text with
// llm.NewToolCall, as agentry's provider adapters do; tool results are Go
// values, so it renders them with llm.ResultText as a provider adapter
// does.
type agentryModel struct{ rec *scenario.Record }

func (agentryModel) Name() string                                         { return "fake" }
func (agentryModel) Version() string                                      { return "1.0.0" }
func (m agentryModel) LLMHandler(llm.ModelReference) (llm.Handler, error) { return m, nil }
func (agentryModel) Capabilities() llm.LLMCapabilities {
	return llm.LLMCapabilities{Tools: true, Streaming: true}
}

func (m agentryModel) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.rec.Model()
	usage := llm.TokenUsage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
	if req.Messages[len(req.Messages)-1].Type() == llm.TypeToolResult {
		for _, msg := range req.Messages {
			if tr, ok := msg.(*llm.ToolResultMessage); ok {
				for _, r := range tr.Results {
					m.rec.Result(llm.ResultText(r.Result))
				}
			}
		}
		return &llm.Response{Message: llm.NewAssistantMessage([]llm.ContentBlock{llm.TextBlock{Text: scenario.Answer}}, nil),
			Usage: usage, StopReason: "end_turn"}, nil
	}
	calls := []llm.ToolCall{
		llm.NewToolCall(scenario.WeatherID, scenario.WeatherName, []byte(scenario.WeatherArgs)),
		llm.NewToolCall(scenario.ClockID, scenario.ClockName, []byte(scenario.ClockArgs)),
	}
	for _, c := range calls {
		if c.Arguments == nil {
			return nil, errors.New("fake model: arguments are not a JSON object")
		}
	}
	return &llm.Response{Message: llm.NewAssistantMessage(nil, calls), Usage: usage, StopReason: "tool_use"}, nil
}

var (
	agentryWeatherSchema = llm.MustSchema(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}`)
	agentryClockSchema   = llm.MustSchema(`{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}`)
)

func agentryOptions(rec *scenario.Record) llm.LLMOptions {
	weather := llm.NewTool(scenario.WeatherName, scenario.WeatherDesc, agentryWeatherSchema,
		func(_ context.Context, in scenario.WeatherIn) (any, error) { return scenario.Weather(rec, in) })
	clock := llm.NewTool(scenario.ClockName, scenario.ClockDesc, agentryClockSchema,
		func(_ context.Context, in scenario.ClockIn) (any, error) { return scenario.Clock(rec, in) })
	return llm.LLMOptions{
		Model: llm.ModelReference{ModelID: "fake", Provider: agentryModel{rec}},
		Tools: []llm.Tool{weather, clock},
	}
}

func newAgentryLLM(rec *scenario.Record) (scenario.Turn, error) {
	opts := agentryOptions(rec)
	inst, err := llm.LLM(&opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) {
		turn, err := inst.Generate(ctx, nil, llm.Text(scenario.Question))
		if err != nil {
			return "", err
		}
		return turn.Text(), nil
	}, nil
}

func newAgentryAgent(rec *scenario.Record) (scenario.Turn, error) {
	a, err := agent.New(&agent.Options{LLMOptions: agentryOptions(rec)})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) {
		res, err := a.Generate(ctx, llm.Text(scenario.Question), nil)
		if err != nil {
			return "", err
		}
		return res.Turn.Text(), nil
	}, nil
}
