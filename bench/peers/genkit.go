package peers

import (
	"context"

	"github.com/agentry-dev/agentry/bench/peers/scenario"
	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
)

// genkitModel is the fake model as a Genkit model function. Genkit carries
// tool inputs and outputs as Go values, so the fake decodes the argument
// text into maps and encodes each tool output as JSON.
func genkitModel(rec *scenario.Record) ai.ModelFunc {
	return func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		rec.Model()
		usage := &ai.GenerationUsage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
		if req.Messages[len(req.Messages)-1].Role == ai.RoleTool {
			for _, msg := range req.Messages {
				for _, p := range msg.Content {
					if p.IsToolResponse() {
						if err := rec.ResultJSON(p.ToolResponse.Output); err != nil {
							return nil, err
						}
					}
				}
			}
			return &ai.ModelResponse{Request: req, Message: ai.NewModelTextMessage(scenario.Answer), FinishReason: ai.FinishReasonStop, Usage: usage}, nil
		}
		wargs, err := scenario.DecodeArgs(scenario.WeatherArgs)
		if err != nil {
			return nil, err
		}
		cargs, err := scenario.DecodeArgs(scenario.ClockArgs)
		if err != nil {
			return nil, err
		}
		msg := ai.NewModelMessage(
			ai.NewToolRequestPart(&ai.ToolRequest{Ref: scenario.WeatherID, Name: scenario.WeatherName, Input: wargs}),
			ai.NewToolRequestPart(&ai.ToolRequest{Ref: scenario.ClockID, Name: scenario.ClockName, Input: cargs}),
		)
		return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop, Usage: usage}, nil
	}
}

func newGenkit(rec *scenario.Record) (scenario.Turn, error) {
	g := genkit.Init(context.Background())
	m := genkit.DefineModel(g, "fake/model", &ai.ModelOptions{
		Supports: &ai.ModelSupports{Tools: true, Multiturn: true, SystemRole: true},
	}, genkitModel(rec))
	weather := genkit.DefineTool(g, scenario.WeatherName, scenario.WeatherDesc,
		func(_ *ai.ToolContext, in scenario.WeatherIn) (scenario.WeatherOut, error) {
			return scenario.Weather(rec, in)
		})
	clock := genkit.DefineTool(g, scenario.ClockName, scenario.ClockDesc,
		func(_ *ai.ToolContext, in scenario.ClockIn) (scenario.ClockOut, error) {
			return scenario.Clock(rec, in)
		})
	return func(ctx context.Context) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModel(m), ai.WithPrompt(scenario.Question), ai.WithTools(weather, clock))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	}, nil
}
