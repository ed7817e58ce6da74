// Package adkgo runs the bench/peers scenario on Google ADK Go. It is a
// module of its own because ADK Go (v2.2.0) needs go.opentelemetry.io/otel/log
// v0.x, whose API v1.47.0 (required by agentry) no longer has.
package adkgo

import (
	"context"
	"iter"
	"strconv"
	"sync/atomic"

	"github.com/agentry-dev/agentry/bench/peers/scenario"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/genai"
)

// adkModel is the fake model as an ADK model.LLM. ADK carries function call
// arguments and responses as maps, so the fake decodes the argument text
// and encodes each response as JSON.
type adkModel struct{ rec *scenario.Record }

func (adkModel) Name() string { return "fake" }

func (m adkModel) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(m.reply(req))
	}
}

func (m adkModel) reply(req *model.LLMRequest) (*model.LLMResponse, error) {
	m.rec.Model()
	usage := &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 10, CandidatesTokenCount: 5, TotalTokenCount: 15}
	last := req.Contents[len(req.Contents)-1]
	if len(last.Parts) > 0 && last.Parts[0].FunctionResponse != nil {
		for _, c := range req.Contents {
			for _, p := range c.Parts {
				if p.FunctionResponse != nil {
					if err := m.rec.ResultJSON(p.FunctionResponse.Response); err != nil {
						return nil, err
					}
				}
			}
		}
		return &model.LLMResponse{Content: genai.NewContentFromText(scenario.Answer, genai.RoleModel),
			UsageMetadata: usage, FinishReason: genai.FinishReasonStop, TurnComplete: true}, nil
	}
	wargs, err := scenario.DecodeArgs(scenario.WeatherArgs)
	if err != nil {
		return nil, err
	}
	cargs, err := scenario.DecodeArgs(scenario.ClockArgs)
	if err != nil {
		return nil, err
	}
	content := &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{
		{FunctionCall: &genai.FunctionCall{ID: scenario.WeatherID, Name: scenario.WeatherName, Args: wargs}},
		{FunctionCall: &genai.FunctionCall{ID: scenario.ClockID, Name: scenario.ClockName, Args: cargs}},
	}}
	return &model.LLMResponse{Content: content, UsageMetadata: usage, FinishReason: genai.FinishReasonStop, TurnComplete: true}, nil
}

func newADKGo(rec *scenario.Record) (scenario.Turn, error) {
	weather, err := functiontool.New(functiontool.Config{Name: scenario.WeatherName, Description: scenario.WeatherDesc},
		func(_ agent.Context, in scenario.WeatherIn) (scenario.WeatherOut, error) {
			return scenario.Weather(rec, in)
		})
	if err != nil {
		return nil, err
	}
	clock, err := functiontool.New(functiontool.Config{Name: scenario.ClockName, Description: scenario.ClockDesc},
		func(_ agent.Context, in scenario.ClockIn) (scenario.ClockOut, error) { return scenario.Clock(rec, in) })
	if err != nil {
		return nil, err
	}
	a, err := llmagent.New(llmagent.Config{Name: "assistant", Description: "Answers with tools.",
		Model: adkModel{rec}, Tools: []tool.Tool{weather, clock}})
	if err != nil {
		return nil, err
	}
	sessions := session.InMemoryService()
	r, err := runner.New(runner.Config{AppName: "peers", Agent: a, SessionService: sessions, AutoCreateSession: true})
	if err != nil {
		return nil, err
	}
	var n atomic.Int64
	return func(ctx context.Context) (string, error) {
		// A fresh conversation per turn, as for the other runners; the
		// session is deleted afterwards so the store does not grow.
		id := strconv.FormatInt(n.Add(1), 10)
		defer sessions.Delete(ctx, &session.DeleteRequest{AppName: "peers", UserID: "user", SessionID: id})
		var answer string
		for ev, err := range r.Run(ctx, "user", id, genai.NewContentFromText(scenario.Question, genai.RoleUser), agent.RunConfig{}) {
			if err != nil {
				return "", err
			}
			if ev.Content == nil || ev.Author == "user" || ev.Partial {
				continue
			}
			for _, p := range ev.Content.Parts {
				if p.Text != "" {
					answer = p.Text
				}
			}
		}
		return answer, nil
	}, nil
}
