// Package openai provides the OpenAI provider of UPP-1.3 (the Unified
// Provider Protocol): GPT models through the Responses API
// (POST {base}/responses) or the Chat Completions API
// (POST {base}/chat/completions), and any OpenAI-compatible server (vLLM,
// llama.cpp server, Groq, OpenRouter, DeepSeek…) through Compatible.
//
//	model, err := llm.LLM(&llm.LLMOptions{
//		Model:  openai.Model("gpt-5-mini", nil), // Responses API
//		Params: map[string]any{"max_output_tokens": 1024},
//	})
//
// # Which API
//
// Options.API picks the API. OpenAI's own models default to Responses, as
// the UPP reference implementation does: it is OpenAI's current API and the
// only one that hands back reasoning items (encrypted_content) for the next
// turn. Compatible servers default to ChatCompletions, which nearly all of
// them speak.
//
//	openai.Model("gpt-4o", &openai.Options{API: openai.ChatCompletions})
//
// # Compatible servers
//
// Compatible binds a model of another server that speaks OpenAI's wire
// format. The provider takes the name given: metadata is stored under it
// and the key is read from <NAME>_API_KEY; the key is optional, since local
// servers need none.
//
//	// A local llama.cpp or vLLM server, no key:
//	local := openai.Compatible("local", "http://localhost:8080/v1", "qwen3", nil)
//	// Groq, key from GROQ_API_KEY:
//	groq := openai.Compatible("groq", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile", nil)
//
// A ProviderConfig.BaseURL overrides the server address of either kind.
//
// # Request bodies
//
// The body starts as a copy of LLMOptions.Params (UPP adds no defaults:
// max_output_tokens, temperature, reasoning, store, include… come from
// there), and the provider then sets only these fields:
//
//	Chat Completions: model, messages (the system prompt first, as a
//	  "system" message), tools (the function tools appended to any
//	  params tools), response_format (when a Structure is set), stream and
//	  stream_options.include_usage (when streaming; other stream_options
//	  keys are kept); "stream" is removed from non-streamed requests.
//	Responses: model, input, instructions (when the system prompt is not
//	  empty), tools (function tools appended to any params tools, such as
//	  web_search), text.format (when a Structure is set; other text keys,
//	  such as verbosity, are kept) and stream; "stream" is removed from
//	  non-streamed requests.
//
// Function tools are sent with "strict": false on the Responses API (whose
// default is true, which would reject most schemas); Options.Strict sends
// strict true for tools and the structured-output schema on both APIs. The
// keys of a Tool.Metadata[<provider name>] map are set on that tool's
// function definition, overriding these.
//
// # Messages
//
// User content: text; images by URL, base64 or bytes (as URLs or data URLs;
// a missing MIME type is sniffed); documents as files (PDF data as a data
// URL with a filename; by URL only on Responses, as file_url), text
// documents as text; audio (WAV and MP3) on Chat Completions only. Video,
// binary blocks and anything else are INVALID_REQUEST. Tool results are
// sent as llm.ResultText (neither API has an error flag).
//
// Chat Completions takes no reasoning in its input, except that servers
// which emit reasoning_content or reasoning (DeepSeek, vLLM) want it back
// on tool-calling turns: an assistant message whose metadata records the
// field its reasoning came in ("reasoning_field") sends it back in that
// field; other reasoning blocks are not sent.
//
// Responses assistant output is kept item by item so that it can be sent
// back exactly: each reasoning item becomes one ReasoningBlock (its summary,
// or its reasoning text when there is no summary), each message item one
// TextBlock, each function_call item one ToolCall, and
// Metadata["openai"]["items"] lists the output items in order — reasoning
// and provider-native tool items (web_search_call…) verbatim, message and
// function_call items by id. On the next request these are rebuilt in that
// order with their ids, as the API requires for reasoning models.
// Reasoning blocks without that metadata (e.g. from another provider) are
// not sent. With "store": false in params, add
// "include": ["reasoning.encrypted_content"] so reasoning items carry their
// content.
//
// # Responses
//
// Usage: InputTokens is prompt_tokens / input_tokens (which include cached
// tokens), CacheReadTokens the cached_tokens detail; OpenAI reports no
// cache writes. StopReason is the Chat finish_reason verbatim; for
// Responses it is the response status ("completed"), or the
// incomplete_details reason ("max_output_tokens", "content_filter") when
// the status is "incomplete". Metadata[<provider name>] holds "api", the
// vendor "id", "model", the stop data and, when present, "refusal",
// "system_fingerprint", "service_tier" and the items above. A refusal is
// returned as text. With a Structure, Data is the reply text parsed as
// JSON (nil if it is not JSON).
//
// Chat Completions uses only the first choice (params "n" above 1 is not
// supported).
//
// # Streaming
//
// Events: message_start; for each block, content_block_start, its deltas
// and content_block_stop; message_stop. Text, reasoning and tool-call
// blocks share one index space in order of appearance; a tool-call block's
// content_block_start carries the call's ID and name, and each arguments
// fragment is a tool_call_delta. With a Structure, reply text fragments are
// object_delta events instead of text_delta. The stream must end with its
// terminal event (data: [DONE], response.completed or response.incomplete),
// or the call fails with INVALID_RESPONSE.
//
// # Errors
//
// OpenAI's error body {"error":{"message","type","code","param"}} refines
// the HTTP status: context_length_exceeded is CONTEXT_LENGTH_EXCEEDED;
// insufficient_quota and the billing codes (sent with status 429) are
// QUOTA_EXCEEDED, not RATE_LIMITED; content_filter and content policy
// violations are CONTENT_FILTERED; model_not_found is MODEL_NOT_FOUND;
// rate_limit_exceeded is RATE_LIMITED. Errors inside a stream (an "error"
// event, response.failed, a Chat chunk carrying "error") map the same way,
// server errors to PROVIDER_ERROR.
//
// ProviderConfig.APIVersion is not used: OpenAI's API has no version
// header.
package openai
