// Package llmtest is the conformance kit for UPP-1.3 providers, in the
// manner of testing/slogtest: a provider's tests call Run with a Target
// that serves scripted replies through the provider's real code path
// (normally an httptest server speaking the vendor's wire format), and Run
// checks the behaviour the llm package relies on — text, streaming events,
// tool round trips, structured output, reasoning, params passthrough,
// history, error normalization, retries and cancellation.
//
// NewServer builds such a Target for an HTTP provider: it runs the reply
// queue, the request record, hanging and error replies, and leaves to a
// Vendor only what differs between vendors — decoding a request into an
// Observed and writing a reply or an error in the vendor's format.
//
// The scripted model (llm/scripted) passes the kit too.
package llmtest

import (
	"time"

	"github.com/agentry-dev/agentry/llm"
)

// Reply is one scripted model reply, which the Target renders in its
// vendor's wire format (streamed when the request asks for a stream).
type Reply struct {
	// Text is the reply text. A Target may split it into several deltas
	// when streaming.
	Text string
	// Reasoning is reasoning text, emitted before Text. Only used when
	// the Target declares Reasoning.
	Reasoning string
	// ToolCalls are tool calls, emitted after Text. Arguments are JSON
	// objects.
	ToolCalls []llm.ToolCall
	// Object is the structured output as JSON text (the kit sets it only
	// for requests with a Structure).
	Object string
	// InputTokens and OutputTokens are the usage to report.
	InputTokens, OutputTokens int

	// Status, when non-zero, makes the reply an HTTP error with this
	// status and the vendor's error body carrying ErrorMessage.
	Status       int
	ErrorMessage string
	// RetryAfter, when non-zero, is sent as a Retry-After header (whole
	// seconds) with an error reply.
	RetryAfter time.Duration

	// Hang makes the Target accept the request and then send nothing
	// until the request's context ends (for cancellation tests).
	Hang bool
}

// Observed is what a Target saw in one request, decoded from the vendor
// wire format.
type Observed struct {
	// Stream reports whether the request asked for a streamed reply.
	Stream bool
	// System is the system prompt sent.
	System string
	// UserTexts are the texts of the user turns, in order.
	UserTexts []string
	// AssistantTexts are the texts of the assistant turns, in order.
	AssistantTexts []string
	// ToolCallIDs are the IDs of assistant tool calls sent back as
	// history, in order.
	ToolCallIDs []string
	// ToolResults are the tool results sent, in order. ToolCallID is
	// empty when the vendor format carries no call ids; Result holds the
	// result as the text the vendor received.
	ToolResults []llm.ToolResult
	// Tools are the names of the declared function tools, in order.
	Tools []string
	// Structured reports whether a structured-output schema was sent.
	Structured bool
	// Params holds the body's top-level fields that are not the
	// provider's own: the kit checks its params arrive verbatim. A Target
	// may simply return every top-level field.
	Params map[string]any
}

// Target is a provider under test, set up by the provider's test.
type Target struct {
	// Model is the model under test; its requests must be served from
	// the queue filled by Script.
	Model llm.ModelReference
	// Config is merged into every LLMOptions the kit builds (the test
	// server's base URL, a key, an HTTP client…).
	Config llm.ProviderConfig
	// Params are added to every request's params (for vendors that need
	// some, such as Anthropic's max_tokens).
	Params map[string]any
	// Script queues replies; each request takes the next one. A request
	// with an empty queue must fail the test.
	Script func(replies ...Reply)
	// Requests returns what every request so far carried, in order.
	Requests func() []Observed

	// Reasoning declares that the vendor format carries reasoning.
	Reasoning bool
	// NoHTTP declares an in-process model: the HTTP error cases (Status,
	// RetryAfter) are skipped.
	NoHTTP bool
}
