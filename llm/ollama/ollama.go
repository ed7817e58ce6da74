// Package ollama provides the Ollama provider for UPP-1.3: chat models
// served by a local or remote Ollama server, or by ollama.com, through
// Ollama's native chat API (POST /api/chat).
//
//	ref := ollama.Model("llama3.2", nil)
//	model, err := llm.LLM(&llm.LLMOptions{Model: ref})
//
// # Address and key
//
// The server is ProviderConfig.BaseURL; when that is empty, the OLLAMA_HOST
// environment variable (normalised as Ollama does: "host:port", ":port" or a
// bare host get the http scheme, a missing port is 11434, an unspecified bind
// address such as 0.0.0.0 is reached at loopback); when that is empty too,
// http://localhost:11434. The key is optional: a configured
// ProviderConfig.APIKey, else OLLAMA_API_KEY, is sent as
// "Authorization: Bearer <key>" (ollama.com's hosted API needs it; a local
// server ignores it). A configured key strategy that fails is still an
// AUTHENTICATION_FAILED error.
//
// # Request body
//
// The body starts as a shallow copy of LLMOptions.Params, copied verbatim:
// model options such as temperature go in Params["options"], and "think",
// "keep_alive", "truncate" and the like at the top level. The provider then
// sets these fields over Params:
//
//	model     the model ID
//	messages  the conversation, with the system prompt first as a
//	          {"role": "system"} message when LLMOptions.System is set
//	tools     the function tools, when there are any
//	stream    false for Generate, true for Stream (Ollama streams by default)
//	format    the LLMOptions.Structure JSON Schema, when set
//
// # Content mapping
//
// Text blocks become a message's content (joined by a blank line); images
// given as bytes or base64 go in "images" as base64. Ollama takes no image
// URLs, documents, audio, video or binary data: such blocks fail with
// INVALID_REQUEST. Reasoning blocks are sent back as "thinking" on
// assistant messages; assistant tool calls as "tool_calls" with their
// arguments as an object (arguments that were not a JSON object are sent
// as {}); tool results as {"role": "tool"} messages carrying the result
// text, the tool's name ("tool_name") and the call ID ("tool_call_id").
// Ollama has no error flag for tool results.
//
// Responses: "thinking" becomes a reasoning block, "content" a text block
// (parsed into Response.Data when a Structure was requested), tool calls
// get a generated ID when Ollama sends none, prompt_eval_count and
// eval_count are the usage, done_reason the stop reason, and the model,
// created_at, done_reason and durations (nanoseconds) are kept in the
// message metadata under "ollama".
//
// # Streaming
//
// Streams are NDJSON. Each content run (reasoning, text, or structured
// output) is one stream block; Ollama delivers each tool call whole, so each
// becomes a block of its own with one tool_call_delta carrying the complete
// arguments JSON. Block indexes count all stream blocks in order, tool calls
// included. An {"error": …} line fails the stream; a stream that ends
// without its done line is INVALID_RESPONSE.
package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/wire"
)

// name is the provider's name and its metadata namespace.
const name = "ollama"

// version is the adapter version.
const version = "1.0.0"

// defaultBaseURL is the address used when neither ProviderConfig.BaseURL
// nor OLLAMA_HOST is set.
const defaultBaseURL = "http://localhost:11434"

// chatPath is the native chat endpoint.
const chatPath = "/api/chat"

// maxLine bounds one NDJSON line of a stream.
const maxLine = 16 << 20

// Options are the binding options of an Ollama model reference. The zero
// value (or nil) means defaults.
type Options struct {
	// Config is provider-level configuration carried by the reference
	// (for example the BaseURL of a remote server); LLMOptions.Config
	// overlays it.
	Config *llm.ProviderConfig
}

// Provider is the Ollama provider. Model references returned by Model use
// it; it can also be put into a ModelReference directly.
var Provider llm.LLMProvider = provider{}

type provider struct{}

func (provider) Name() string    { return name }
func (provider) Version() string { return version }

// LLMHandler binds a model. It fails with INVALID_REQUEST when the
// reference has no model ID or carries options of another type.
func (provider) LLMHandler(ref llm.ModelReference) (llm.Handler, error) {
	if ref.ModelID == "" {
		return nil, llm.NewError(llm.InvalidRequest, name, "model ID is empty", nil)
	}
	switch ref.Options.(type) {
	case nil, *Options, Options:
	default:
		return nil, llm.NewError(llm.InvalidRequest, name, fmt.Sprintf("model options must be *ollama.Options, not %T", ref.Options), nil)
	}
	return handler{}, nil
}

// Model returns a reference to the Ollama model id (for example
// "llama3.2" or "qwen3:8b"); opts may be nil.
func Model(id string, opts *Options) llm.ModelReference {
	ref := llm.ModelReference{ModelID: id, Provider: Provider}
	if opts != nil {
		ref.Options = opts
		ref.Config = opts.Config
	}
	return ref
}

// handler is a bound model. It holds no state: everything comes with the
// request, so it is safe for concurrent use.
type handler struct{}

// Capabilities of Ollama's chat API: tools, structured output (format) and
// images; no documents, audio or video.
func (handler) Capabilities() llm.LLMCapabilities {
	return llm.LLMCapabilities{
		Streaming:        true,
		Tools:            true,
		StructuredOutput: true,
		ImageInput:       true,
	}
}

func (handler) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	body, err := buildBody(req, false)
	if err != nil {
		return nil, err
	}
	c := newClient(req.Config)
	data, err := c.PostJSON(ctx, chatPath, body)
	if err != nil {
		return nil, explain(c, err)
	}
	return decodeResponse(data, req.Structure != nil)
}

func (handler) Stream(ctx context.Context, req *llm.Request, emit func(llm.StreamEvent)) (*llm.Response, error) {
	body, err := buildBody(req, true)
	if err != nil {
		return nil, err
	}
	c := newClient(req.Config)
	rc, err := c.Open(ctx, http.MethodPost, chatPath, body, true)
	if err != nil {
		return nil, explain(c, err)
	}
	defer rc.Close()
	resp, err := decodeStream(rc, req.Structure != nil, emit)
	if err != nil {
		var e *llm.Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, c.ReadError(ctx, err)
	}
	return resp, nil
}

func newClient(cfg llm.ProviderConfig) *wire.Client {
	c := &wire.Client{
		Provider:       name,
		Config:         cfg,
		DefaultBaseURL: baseURLFromEnv(),
		// Only the environment key is optional: a configured strategy
		// that fails still fails the request.
		KeyOptional:  true,
		StreamAccept: "application/x-ndjson",
		Authorize:    func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
		ParseError:   parseError,
	}
	if base := strings.TrimRight(c.URL(""), "/"); strings.HasSuffix(base, "/v1") || strings.HasSuffix(base, "/api") {
		c.BaseURLHint = "the Ollama base URL is the server's root (e.g. " + defaultBaseURL + "): /api/chat is added to it"
	}
	return c
}

// baseURLFromEnv is the default server address: OLLAMA_HOST, normalised,
// else http://localhost:11434.
func baseURLFromEnv() string {
	if h := normalizeHost(os.Getenv("OLLAMA_HOST")); h != "" {
		return h
	}
	return defaultBaseURL
}

// explain rewrites a refused connection, the usual sign that Ollama is not
// running, into a message that says where it was looked for and how to
// start it.
func explain(c *wire.Client, err error) error {
	var e *llm.Error
	if !errors.As(err, &e) || e.Code != llm.NetworkError || !errors.Is(e, syscall.ECONNREFUSED) {
		return err
	}
	base := c.URL("")
	if u, perr := url.Parse(base); perr == nil {
		base = u.Redacted()
	}
	out := *e
	out.Message = fmt.Sprintf("Ollama is not reachable at %s (connection refused): start it with `ollama serve`, "+
		"or point ProviderConfig.BaseURL or OLLAMA_HOST at a running server", base)
	return &out
}
