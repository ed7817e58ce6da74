// Package anthropic provides the UPP-1.3 provider for Anthropic's Claude
// models, speaking the Messages API (POST /v1/messages) on net/http.
//
//	model, err := llm.LLM(&llm.LLMOptions{
//		Model:  anthropic.Model("claude-sonnet-4-5", nil),
//		Params: map[string]any{"max_tokens": 1024},
//	})
//
// # Keys, headers and configuration
//
// The key comes from ProviderConfig.APIKey, else ANTHROPIC_API_KEY, and is
// sent as x-api-key. Every request carries anthropic-version (2023-06-01,
// or ProviderConfig.APIVersion) and, when Options.Betas is set or the
// structured-output method needs one, anthropic-beta (comma-joined).
// ProviderConfig.Headers win over all of these.
//
// # The request body
//
// The body starts as a shallow copy of LLMOptions.Params, copied verbatim:
// UPP adds no defaults. In particular the Messages API requires max_tokens,
// and it must come from Params: without it the call fails with
// INVALID_REQUEST before any request is sent. Over the params the provider
// sets:
//
//   - model and messages, always;
//   - system, when LLMOptions.System is non-empty (for a native system
//     array, e.g. with cache_control, leave System empty and pass
//     Params["system"]);
//   - tools, when LLMOptions.Tools is non-empty or structured output uses
//     the tool method: the UPP tools are appended after any provider-native
//     tools in Params["tools"];
//   - stream: true for Stream; a stream field in Params is dropped for
//     Complete;
//   - the structured-output settings (see StructuredOutput): tool_choice
//     with the tool method, output_config.format (merged into any
//     Params["output_config"]) with the native method, output_format with
//     the native beta method.
//
// A tool's Metadata["anthropic"] map is merged into its tool object (for
// cache_control, strict, …); the name, description and input_schema UPP
// sets are not overridden.
//
// # Messages
//
// Consecutive messages of one role are merged into one turn, as the API
// requires alternating roles: a ToolResultMessage becomes tool_result
// blocks of a user turn, together with any user message that follows.
// User content may hold text, images (base64, bytes or URL) and documents
// (PDF as base64, bytes or URL; plain text); audio, video and binary blocks
// fail with INVALID_REQUEST, as do media in assistant messages. An
// assistant message goes back as its text and reasoning blocks in order,
// then its tool calls as tool_use blocks (a call whose arguments were not
// a JSON object is sent with an empty input).
//
// # Reasoning
//
// thinking blocks become ReasoningBlocks and redacted_thinking blocks empty
// ReasoningBlocks. Their signatures and redacted data are kept, in order,
// in the message metadata under "anthropic" (key "reasoning"), and are sent
// back with the blocks on the next request, as the API requires when
// thinking is combined with tool use. A ReasoningBlock without Anthropic
// data (from another provider, say) cannot be verified by the API and is
// left out of the request; the API allows earlier turns' thinking to be
// omitted.
//
// # Responses
//
// The assistant message's metadata["anthropic"] holds id, model,
// stop_reason, stop_sequence and the reasoning data. Usage maps
// input_tokens and output_tokens as reported (Anthropic's input_tokens
// excludes cached tokens), cache_read_input_tokens to CacheReadTokens and
// cache_creation_input_tokens to CacheWriteTokens. Blocks with no UPP form
// (server-tool use and results, such as web search) are not part of the
// message.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/wire"
)

// name is the provider's name and metadata namespace.
const name = "anthropic"

// version is the adapter's version.
const version = "0.1.0"

// defaultBaseURL is the Anthropic API address.
const defaultBaseURL = "https://api.anthropic.com"

// defaultAPIVersion is the anthropic-version header sent unless
// ProviderConfig.APIVersion overrides it.
const defaultAPIVersion = "2023-06-01"

// structuredOutputBeta is the beta flag the native beta method sends.
const structuredOutputBeta = "structured-outputs-2025-11-13"

// StructuredOutput selects how a request's Structure is sent.
type StructuredOutput string

// The structured-output methods.
//
// The default is StructuredOutputTool, because it works with every Claude
// model and every server speaking the Messages API, and takes any JSON
// Schema: the native methods decode under constraints that accept only a
// subset of JSON Schema (objects need additionalProperties false; numeric
// and length constraints are refused) and only on recent models, while UPP
// passes the caller's schema unchanged. Choose StructuredOutputNative for
// guaranteed schema conformance on a model that supports it, and whenever
// extended thinking is enabled: the API refuses a forced tool_choice
// together with thinking.
const (
	// StructuredOutputTool declares a json_response tool whose input_schema
	// is the Structure and forces it with tool_choice {type: "tool"}, or
	// {type: "any"} when the request also has tools so that the model may
	// call them first. The json_response call is not returned as a tool
	// call: its input becomes Response.Data and a text block with the
	// JSON, and streams as object_delta. The Structure must describe an
	// object.
	StructuredOutputTool StructuredOutput = "tool"
	// StructuredOutputNative sets output_config.format to
	// {type: "json_schema", schema}. The reply text is the JSON; it
	// streams as object_delta.
	StructuredOutputNative StructuredOutput = "native"
	// StructuredOutputNativeBeta is the native method's earlier, beta
	// form: output_format {type: "json_schema", schema} with the
	// anthropic-beta flag "structured-outputs-2025-11-13", for servers that have not
	// moved to output_config.
	StructuredOutputNativeBeta StructuredOutput = "native-beta"
)

// Options are the Anthropic binding options of a model. The zero value
// works.
type Options struct {
	// Betas are sent in the anthropic-beta header, comma-joined.
	Betas []string
	// StructuredOutput selects the structured-output method; empty means
	// StructuredOutputTool.
	StructuredOutput StructuredOutput
}

// Provider is the Anthropic provider. Model is the usual way to use it.
var Provider llm.LLMProvider = provider{}

type provider struct{}

// name returns "anthropic".
func (provider) Name() string { return name }

// version returns the adapter version.
func (provider) Version() string { return version }

// LLMHandler binds a model; ref.Options may be nil, Options or *Options.
func (provider) LLMHandler(ref llm.ModelReference) (llm.Handler, error) {
	opts, err := wire.ModelOptions[Options](name, ref.Options)
	if err != nil {
		return nil, err
	}
	switch opts.StructuredOutput {
	case "":
		opts.StructuredOutput = StructuredOutputTool
	case StructuredOutputTool, StructuredOutputNative, StructuredOutputNativeBeta:
	default:
		return nil, llm.NewError(llm.InvalidRequest, name, fmt.Sprintf("unknown StructuredOutput method %q", opts.StructuredOutput), nil)
	}
	opts.Betas = append([]string(nil), opts.Betas...)
	return &handler{model: ref.ModelID, opts: opts}, nil
}

// Model returns a reference to an Anthropic model, e.g.
// Model("claude-sonnet-4-5", nil). opts may be nil for the defaults; it is
// copied.
func Model(id string, opts *Options) llm.ModelReference {
	var o Options
	if opts != nil {
		o = *opts
		o.Betas = append([]string(nil), opts.Betas...)
	}
	return llm.ModelReference{ModelID: id, Provider: Provider, Options: o}
}

type handler struct {
	model string
	opts  Options
}

func (h *handler) Capabilities() llm.LLMCapabilities {
	return llm.LLMCapabilities{
		Streaming:        true,
		Tools:            true,
		StructuredOutput: true,
		ImageInput:       true,
		DocumentInput:    true,
	}
}

const messagesPath = "/v1/messages"

func (h *handler) client(cfg llm.ProviderConfig, betas []string) *wire.Client {
	version := cfg.APIVersion
	if version == "" {
		version = defaultAPIVersion
	}
	headers := map[string]string{"anthropic-version": version}
	if len(betas) > 0 {
		headers["anthropic-beta"] = strings.Join(betas, ",")
	}
	c := &wire.Client{
		Provider:       name,
		Config:         cfg,
		DefaultBaseURL: defaultBaseURL,
		Authorize:      func(h http.Header, key string) { h.Set("x-api-key", key) },
		Headers:        headers,
		ParseError:     parseError,
	}
	if strings.HasSuffix(strings.TrimRight(c.URL(""), "/"), "/v1") {
		c.BaseURLHint = "the Anthropic base URL is the server's root, without /v1 (/v1/messages is added to it)"
	}
	return c
}

func (h *handler) build(req *llm.Request, stream bool) (*builtRequest, error) {
	model := req.ModelID
	if model == "" {
		model = h.model
	}
	return buildRequest(model, req, h.opts, stream)
}

// Complete performs one Messages API call.
func (h *handler) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	b, err := h.build(req, false)
	if err != nil {
		return nil, err
	}
	data, err := h.client(req.Config, b.betas).PostJSON(ctx, messagesPath, b.body)
	if err != nil {
		return nil, err
	}
	msg, err := decodeResponse(data)
	if err != nil {
		return nil, err
	}
	return toResponse(msg, b.mode)
}

// Stream performs one streamed Messages API call.
func (h *handler) Stream(ctx context.Context, req *llm.Request, emit func(llm.StreamEvent)) (*llm.Response, error) {
	b, err := h.build(req, true)
	if err != nil {
		return nil, err
	}
	c := h.client(req.Config, b.betas)
	body, err := c.Open(ctx, http.MethodPost, messagesPath, b.body, true)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	msg, err := decodeStream(body, b.mode, emit)
	if err != nil {
		var e *llm.Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, c.ReadError(ctx, err)
	}
	return toResponse(msg, b.mode)
}
