// Package agent implements UAP-1.1, the Unified Agent Protocol: agents on
// top of the UPP llm package, with immutable state, interchangeable
// execution strategies, lifecycle hooks, middleware, sub-agents,
// streaming and checkpoints.
//
//	a, err := agent.New(&agent.Options{
//		LLMOptions: llm.LLMOptions{
//			Model:  anthropic.Model("claude-sonnet-4-5", nil),
//			Params: map[string]any{"max_tokens": 4096},
//			Tools:  []llm.Tool{search, fetch},
//		},
//		Execution: execution.ReAct(&execution.ReActOptions{}),
//		Strategy: agent.StrategyHooks{
//			StopCondition: func(ctx context.Context, s *agent.State) bool { return s.Step() >= 20 },
//		},
//	})
//	res, err := a.Ask(ctx, llm.Text("Summarise today's incidents"), agent.Initial())
//	fmt.Println(res.Turn.Text(), res.State.Len())
//
// UPP types are used directly (§1.4): the agent's Options embed
// llm.LLMOptions, inputs are llm.Input, results carry *llm.Turn, events
// carry llm.StreamEvent, errors are *llm.Error where UPP produced them.
//
// Nothing is limited by default (§2.4): strategies run until the model
// stops asking for tools or StrategyHooks.StopCondition says so. A step is
// one model call and the round of tools it requests; the state is
// checkpointed after every step, in order and in the background, when
// Options.Checkpoints is set.
package agent
