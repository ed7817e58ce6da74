// Package llm implements UPP-1.3, the Unified Provider Protocol, for the
// LLM modality: one interface to every model provider, with messages and
// content blocks, threads, turns and token usage, tools and the tool loop,
// structured output, streaming, normalized errors, retries and API keys.
//
// A provider package (llm/anthropic, llm/openai, llm/gemini, llm/ollama,
// llm/scripted) returns a ModelReference; LLM binds it:
//
//	claude, err := llm.LLM(&llm.LLMOptions{
//		Model:  anthropic.Model("claude-sonnet-4-5", nil),
//		Params: map[string]any{"max_tokens": 1024},
//		System: "You are terse.",
//		Tools:  []llm.Tool{weather},
//	})
//	turn, err := claude.Generate(ctx, nil, llm.Text("Weather in Paris?"))
//	fmt.Println(turn.Text())
//
// Generate and Stream run the tool loop (UPP-1.3 §5.5): the calls of one
// round run concurrently, their results go back to the model as one tool
// result message in call order, and a failing, unknown, skipped or denied
// tool becomes an error result the model sees — the loop goes on. After
// ToolUseStrategy.MaxIterations rounds (default 10; Infinity for none) a
// further request for tools calls OnMaxIterations and fails with
// INVALID_REQUEST.
//
// Every error is an *Error carrying one of the twelve UPP codes; the codes
// are sentinels for errors.Is. Cancelling the context (or Abort on a
// stream) reaches in-flight tools and fails with CANCELLED.
//
// Messages, threads and turns have the JSON forms of the reference
// implementation (MessageJSON, ThreadJSON, TurnJSON), pinned by golden files
// in testdata/json.
package llm
