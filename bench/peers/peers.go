// Package peers measures one agent turn in agentry and in other Go agent
// frameworks on the same scenario (package scenario; issue 17). It is a
// module of its own, outside agentry's ./...; see README.md.
package peers

import "github.com/agentry-dev/agentry/bench/peers/scenario"

// Runners lists the runners of this module, the floor first. Google ADK Go
// runs in the module adkgo: it cannot be linked with agentry's dependencies.
var Runners = []scenario.Runner{
	{Name: "floor", What: "hand-written: model call, 2 tools in goroutines with JSON in/out, model call", New: newFloor},
	{Name: "agentry-llm", What: "agentry llm.Generate tool loop, llm.NewTool", New: newAgentryLLM},
	{Name: "agentry-agent", What: "agentry agent.New (Loop) Generate, llm.NewTool", New: newAgentryAgent},
	{Name: "agentry-llm-stream", What: "agentry llm.Stream tool loop, the answer in 20 text deltas read by the caller", New: newAgentryLLMStream},
	{Name: "agentry-agent-stream", What: "agentry agent.New (Loop) Stream, the answer in 20 text deltas read by the caller", New: newAgentryAgentStream},
	{Name: "eino-react", What: "Eino flow/agent/react, utils.InferTool", New: newEinoReact},
	{Name: "eino-adk", What: "Eino adk.ChatModelAgent via adk.Runner, utils.InferTool", New: newEinoADK},
	{Name: "langchaingo", What: "langchaingo agents.Executor with OpenAIFunctionsAgent, tools.Tool", New: newLangchaingo},
	{Name: "genkit", What: "Genkit genkit.Generate with genkit.DefineTool and genkit.DefineModel", New: newGenkit},
}
