package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/workflow"
)

// A main that serves one workflow of its own over UAIP and UIAP, and one
// agent of its own under governance at /v1/runs. A real main calls
// srv.Serve(ctx) (it listens on Config.Addr) and, after it, Shutdown;
// here the handler is served by httptest, and the example posts to it.
func ExampleNew() {
	ctx := context.Background()

	// A workflow: one stage whose task greets.
	type hello struct {
		Name string `json:"name"`
	}
	greet := workflow.NewTask("greet", "Greets someone", func(ctx context.Context, args hello, st *workflow.TaskState) (any, error) {
		return "hello, " + args.Name, nil
	})
	greet.Risk = workflow.RiskReadOnly
	wf := &workflow.Workflow{Name: "greeter", InitialStage: "start",
		Stages: map[string]*workflow.Stage{"start": {Name: "start", Tasks: map[string]*workflow.Task{"greet": greet}}}}

	// An agent: a read-only tool, and a model (scripted here; any
	// provider:model works) that calls it, then answers.
	forecast := govern.Declare(llm.Tool{Name: "forecast", Description: "Tomorrow's weather in a city.",
		Parameters: llm.Schema{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		Run:        func(ctx context.Context, args map[string]any) (any, error) { return "sunny", nil },
	}, govern.Declaration{Tier: govern.ReadOnly})
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "forecast", Arguments: map[string]any{"city": "Lyon"}}}},
		scripted.Step{Text: "Sunny in Lyon tomorrow."},
	)

	srv, err := server.New(ctx, &server.Config{
		Workflows: []*workflow.Workflow{wf},
		Agents: []server.Agent{{Name: "weather",
			Options: agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{forecast}}}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown(ctx)
	hs := httptest.NewServer(srv.Handler()) // a real main: srv.Serve(ctx)
	defer hs.Close()

	post := func(path, body string) string {
		resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", len(b) > 0)
	}
	fmt.Println("UAIP initialize:", post("/initialize", `{"workflow_name":"greeter"}`))

	run, err := srv.Runs().Start(ctx, &runs.StartParams{Agent: "weather", Input: "Weather in Lyon tomorrow?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	run, _ = srv.Runs().Wait(ctx, run.RequestID)
	fmt.Println("run:", run.Status, run.Output)
	// Output:
	// UAIP initialize: 200 true
	// run: delivered Sunny in Lyon tomorrow.
}
