package openai

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/wire"
)

// defaultBaseURL is OpenAI's API address.
const defaultBaseURL = "https://api.openai.com/v1"

// API names one of the two OpenAI APIs.
type API string

// The APIs a model can be bound to.
const (
	// Responses is POST {base}/responses, the default for OpenAI models.
	Responses API = "responses"
	// ChatCompletions is POST {base}/chat/completions, the default for
	// Compatible servers.
	ChatCompletions API = "chat_completions"
)

// Options are the provider-specific binding options of a model. The zero
// value uses the provider's default API and sends no organization or
// project header.
type Options struct {
	// API selects the API; empty means Responses for OpenAI and
	// ChatCompletions for a Compatible server.
	API API
	// Organization, when set, is sent as the OpenAI-Organization header.
	Organization string
	// Project, when set, is sent as the OpenAI-Project header.
	Project string
	// Strict sends "strict": true with the function tools and the
	// structured-output schema: the model then follows them exactly, but
	// OpenAI accepts only schemas whose properties are all required and
	// that set additionalProperties to false.
	Strict bool
}

// provider is an adapter for servers speaking OpenAI's wire format: OpenAI
// itself (Provider) or a compatible server (see Compatible). It is safe for
// concurrent use.
type provider struct {
	name        string
	baseURL     string
	keyOptional bool
	defaultAPI  API
}

// Provider is the provider for OpenAI's API; its key comes from
// OPENAI_API_KEY unless ProviderConfig.APIKey is set. Model is the usual
// way to use it.
var Provider llm.LLMProvider = openAI

var openAI = &provider{name: "openai", baseURL: defaultBaseURL, defaultAPI: Responses}

// Model returns a reference to an OpenAI model. nil opts means defaults
// (the Responses API).
//
//	openai.Model("gpt-5-mini", nil)
func Model(id string, opts *Options) llm.ModelReference { return openAI.model(id, opts) }

// Compatible returns a reference to a model served by an OpenAI-compatible
// server at baseURL (e.g. "http://localhost:8000/v1"). The provider is
// named name: its metadata goes under that name and its key is read from
// <NAME>_API_KEY when ProviderConfig.APIKey is nil; the key is optional.
// The API defaults to ChatCompletions.
//
//	openai.Compatible("vllm", "http://localhost:8000/v1", "Qwen/Qwen3-8B", nil)
func Compatible(name, baseURL, modelID string, opts *Options) llm.ModelReference {
	p := &provider{name: name, baseURL: baseURL, keyOptional: true, defaultAPI: ChatCompletions}
	return p.model(modelID, opts)
}

// model returns a reference to a model of p.
func (p *provider) model(id string, opts *Options) llm.ModelReference {
	ref := llm.ModelReference{ModelID: id, Provider: p}
	if opts != nil {
		o := *opts
		ref.Options = &o
	}
	return ref
}

// Name returns the provider name ("openai", or a Compatible server's name).
func (p *provider) Name() string { return p.name }

// Version returns the adapter version.
func (p *provider) Version() string { return "1.0.0" }

// LLMHandler binds ref to the API its Options select. ref.Options must be
// nil, Options or *Options.
func (p *provider) LLMHandler(ref llm.ModelReference) (llm.Handler, error) {
	opts, err := wire.ModelOptions[Options](p.name, ref.Options)
	if err != nil {
		return nil, err
	}
	if opts.API == "" {
		opts.API = p.defaultAPI
	}
	if opts.API != Responses && opts.API != ChatCompletions {
		return nil, llm.NewError(llm.InvalidRequest, p.name, fmt.Sprintf("unknown API %q", opts.API), nil)
	}
	return &handler{p: p, opts: opts}, nil
}

// handler is a model bound to one API.
type handler struct {
	p    *provider
	opts Options
}

// Capabilities are static per API: audio input only on Chat Completions.
func (h *handler) Capabilities() llm.LLMCapabilities {
	return llm.LLMCapabilities{
		Streaming:        true,
		Tools:            true,
		StructuredOutput: true,
		ImageInput:       true,
		DocumentInput:    true,
		VideoInput:       false,
		AudioInput:       h.opts.API == ChatCompletions,
	}
}

func (h *handler) client(cfg llm.ProviderConfig) *wire.Client {
	headers := map[string]string{}
	if h.opts.Organization != "" {
		headers["OpenAI-Organization"] = h.opts.Organization
	}
	if h.opts.Project != "" {
		headers["OpenAI-Project"] = h.opts.Project
	}
	c := &wire.Client{
		Provider:       h.p.name,
		Config:         cfg,
		DefaultBaseURL: h.p.baseURL,
		KeyOptional:    h.p.keyOptional,
		Authorize:      func(hd http.Header, key string) { hd.Set("Authorization", "Bearer "+key) },
		Headers:        headers,
		ParseError:     parseError,
	}
	if !strings.Contains(c.URL(""), "/v1") {
		c.BaseURLHint = "OpenAI-compatible servers usually serve under /v1 (e.g. http://localhost:8000/v1)"
	}
	return c
}

// path returns the API's endpoint.
func (h *handler) path() string {
	if h.opts.API == ChatCompletions {
		return "/chat/completions"
	}
	return "/responses"
}

func (h *handler) decodeOptions(req *llm.Request) decodeOptions {
	return decodeOptions{provider: h.p.name, structured: req.Structure != nil}
}

func (h *handler) body(req *llm.Request, stream bool) (map[string]any, error) {
	b := builder{provider: h.p.name, strict: h.opts.Strict}
	if h.opts.API == ChatCompletions {
		return b.chatBody(req, stream)
	}
	return b.responsesBody(req, stream)
}

// Complete performs one non-streamed call.
func (h *handler) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	body, err := h.body(req, false)
	if err != nil {
		return nil, err
	}
	data, err := h.client(req.Config).PostJSON(ctx, h.path(), body)
	if err != nil {
		return nil, err
	}
	if h.opts.API == ChatCompletions {
		return decodeChatResponse(data, h.decodeOptions(req))
	}
	return decodeResponsesResponse(data, h.decodeOptions(req))
}

// Stream performs one streamed call, emitting events as they arrive.
func (h *handler) Stream(ctx context.Context, req *llm.Request, emit func(llm.StreamEvent)) (*llm.Response, error) {
	body, err := h.body(req, true)
	if err != nil {
		return nil, err
	}
	client := h.client(req.Config)
	rc, err := client.Open(ctx, http.MethodPost, h.path(), body, true)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var resp *llm.Response
	if h.opts.API == ChatCompletions {
		resp, err = decodeChatStream(rc, h.decodeOptions(req), emit)
	} else {
		resp, err = decodeResponsesStream(rc, h.decodeOptions(req), emit)
	}
	if err != nil {
		// Protocol failures are already *llm.Error; anything else is the
		// body failing (cancellation, idle timeout, network).
		return nil, client.ReadError(ctx, err)
	}
	return resp, nil
}
