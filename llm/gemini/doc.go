// Package gemini provides the Google Gemini provider for the llm package
// (UPP-1.3), speaking the Gemini API's generateContent and
// streamGenerateContent methods on net/http.
//
// A model is bound with Model:
//
//	model, err := llm.LLM(&llm.LLMOptions{Model: gemini.Model("gemini-2.5-flash", nil)})
//
// # Requests
//
// POST {base}/models/{model}:generateContent, or
// {base}/models/{model}:streamGenerateContent?alt=sse when streaming; the
// default base is https://generativelanguage.googleapis.com/v1beta. The key
// travels in the x-goog-api-key header and, when ProviderConfig.APIKey is
// nil, comes from GEMINI_API_KEY, else GOOGLE_API_KEY.
//
// The body starts as a shallow copy of LLMOptions.Params (copied verbatim;
// no defaults are added), then the provider sets:
//
//   - contents: the conversation, always (any contents in params is replaced);
//   - systemInstruction: {parts: [{text}]}, when System is not empty;
//   - tools: when tools are declared, one {functionDeclarations: […]} entry
//     appended to a copy of params' tools array (so provider-native tools
//     such as googleSearch given in params are kept);
//   - generationConfig: when a Structure is requested, a copy of params'
//     generationConfig with responseMimeType "application/json" and
//     responseJsonSchema set (and responseSchema removed, which the API
//     forbids next to responseJsonSchema). The caller's map is not modified.
//
// Tool parameters are sent as parametersJsonSchema and structured output as
// responseJsonSchema: both take standard JSON Schema, which is what
// llm.Schema holds, whereas parameters and responseSchema take the
// OpenAPI 3.0 subset (upper-case types, no additionalProperties…), which
// would need a lossy conversion.
//
// # Messages
//
// User messages and tool results become "user" contents, assistant messages
// "model" contents (an assistant message with no content and no calls, such
// as a reply cut off by MAX_TOKENS while thinking, is left out: the API
// rejects empty contents). Text is a text part; images, documents, audio,
// video and binary blocks with data are inlineData parts {mimeType, data}
// (base64); URL sources are fileData parts {mimeType, fileUri} (Files API
// URIs, and the public URLs the API accepts). A missing MIME type is
// sniffed from the data, and is INVALID_REQUEST when it cannot be. Text
// documents are sent as inlineData with their MIME type (text/plain by
// default); the Gemini API has no field for a document title, so Title is
// not sent. Reasoning blocks are text parts with thought: true; a user
// message cannot hold one.
//
// Tool calls are functionCall parts {name, args, id?}. Gemini often omits
// call ids: the provider then generates one (a UUID) for the llm.ToolCall
// and sends no id back, so the API only ever sees its own ids. A tool
// result is a functionResponse part {name, response, id?}, its name looked
// up from the assistant tool call with the same ToolCallID (an unknown id
// is INVALID_REQUEST). The response must be an object: an object result is
// sent as it is; any other result is wrapped as {"output": result}, and an
// error result as {"error": result}, the keys the API documents for a
// function's output and error details. A call whose arguments were not an
// object (llm.ToolCall.RawArguments) is sent with args {}.
//
// # Vendor data
//
// Assistant messages carry metadata["gemini"]: responseId, modelVersion,
// finishReason and finishMessage as received, plus what is needed to send
// the message back exactly: thoughtSignatures (keyed "c<i>" for Content[i]
// and "t<j>" for ToolCalls[j]), functionCallIds (the vendor's ids, same
// keys) and, when the parts were not all content followed by all calls,
// partOrder (the keys in the order the parts came). Thought signatures are
// re-sent on the same parts; consecutive text (or thought) parts are merged
// into one block, which keeps the signature the last of them carried. A
// signature on an empty part with no block to attach to (a stream's final
// chunk often has one) gets an empty text block of its own. Parts the
// package does not model (executableCode, codeExecutionResult, fileData,
// inline data other than image, audio or video) are kept as received under
// unsupportedParts and are not sent back.
//
// # Responses
//
// Only the first candidate is read (candidateCount in generationConfig
// passes through, but the other candidates are dropped). Inline image,
// audio and video output becomes image, audio and video blocks. Usage: InputTokens = promptTokenCount +
// toolUsePromptTokenCount, OutputTokens = candidatesTokenCount +
// thoughtsTokenCount, CacheReadTokens = cachedContentTokenCount (which
// promptTokenCount includes). StopReason is finishReason verbatim. A
// prompt blocked by promptFeedback.blockReason, or a candidate stopped by a
// content filter (SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII,
// IMAGE_SAFETY…) with no content, is CONTENT_FILTERED. With a Structure,
// Response.Data is the reply text parsed as JSON (nil if it does not
// parse), and streamed text arrives as object_delta events.
//
// A stream is SSE whose events each hold a whole GenerateContentResponse;
// a function call arrives whole, as one tool_call_delta. The stream is
// complete once a chunk carries a finishReason; one that ends earlier is
// INVALID_RESPONSE ("stream truncated"). An {"error": …} event is mapped
// like an HTTP error body.
//
// Error bodies {"error": {code, message, status}} map by status:
// RESOURCE_EXHAUSTED → RATE_LIMITED, or QUOTA_EXCEEDED when the message
// speaks of an exhausted quota, billing or credits and the error carries no
// RetryInfo (no time after which a retry could succeed); INVALID_ARGUMENT,
// FAILED_PRECONDITION and OUT_OF_RANGE → INVALID_REQUEST; PERMISSION_DENIED
// and UNAUTHENTICATED → AUTHENTICATION_FAILED; NOT_FOUND → MODEL_NOT_FOUND;
// UNAVAILABLE, INTERNAL, DEADLINE_EXCEEDED and other server failures →
// PROVIDER_ERROR. Whatever the status, a message about the input exceeding
// the token limit is CONTEXT_LENGTH_EXCEEDED and an invalid API key (which
// the API reports as a 400 INVALID_ARGUMENT with reason API_KEY_INVALID)
// AUTHENTICATION_FAILED. Other statuses keep the HTTP status's code.
package gemini
