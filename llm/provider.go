package llm

import (
	"context"
	"net/http"
	"time"
)

// Provider is a vendor adapter (UPP-1.3 §4). A provider that serves the LLM
// modality also implements LLMProvider; LLM reports INVALID_REQUEST for a
// provider that does not.
type Provider interface {
	Name() string    // e.g. "anthropic"; the metadata namespace
	Version() string // adapter version
}

// LLMProvider is a Provider that serves the LLM modality.
type LLMProvider interface {
	Provider
	// LLMHandler binds a model. It is called once per LLM call; it may
	// resolve different handlers by ref.Options (e.g. which vendor API).
	LLMHandler(ref ModelReference) (Handler, error)
}

// ModelReference names a model of a provider (UPP-1.3 §4.5). Provider
// packages return one from their Model function:
//
//	anthropic.Model("claude-sonnet-4-5", nil)
type ModelReference struct {
	ModelID  string
	Provider Provider
	// Config is the provider-level configuration set by the factory; an
	// LLMOptions.Config overlays it.
	Config *ProviderConfig
	// Options holds provider-specific binding options (such as which API
	// to use); each provider documents its type.
	Options any
}

// String returns "provider:model".
func (r ModelReference) String() string {
	if r.Provider == nil {
		return r.ModelID
	}
	return r.Provider.Name() + ":" + r.ModelID
}

// LLMCapabilities declares what the provider's API supports (UPP-1.3 §5.4).
type LLMCapabilities struct {
	Streaming        bool
	Tools            bool
	StructuredOutput bool
	ImageInput       bool
	DocumentInput    bool
	VideoInput       bool
	AudioInput       bool
}

// Handler is a bound model: what a provider implements for one model. The
// llm core owns the tool loop; a Handler performs single request/response
// cycles (UPP-1.3 §5.5). Handlers are used concurrently.
type Handler interface {
	Capabilities() LLMCapabilities
	// Complete performs one inference call.
	Complete(ctx context.Context, req *Request) (*Response, error)
	// Stream performs one streaming inference call: it calls emit for each
	// event as it arrives and returns the assembled response. emit must not
	// be called after Stream returns.
	Stream(ctx context.Context, req *Request, emit func(StreamEvent)) (*Response, error)
}

// Request is one inference call as the core hands it to a Handler.
type Request struct {
	ModelID string
	// Messages is the whole conversation: history, new input and the
	// messages of earlier cycles of this turn. Handlers must not modify it.
	Messages []Message
	System   string
	// Params is copied verbatim into the vendor body (UPP-1.3 §2.1).
	Params    map[string]any
	Tools     []Tool
	Structure Schema
	Config    ProviderConfig
}

// Response is the result of one inference call.
type Response struct {
	Message *AssistantMessage
	Usage   TokenUsage
	// StopReason is the vendor's stop reason, verbatim.
	StopReason string
	// Data is the parsed structured output, when the request had a
	// Structure and the model produced it.
	Data any
}

// ProviderConfig is the infrastructure configuration shared by all providers
// (UPP-1.3 §4.1). The zero value works: the key comes from the provider's
// environment variable, the vendor's default URL is used, and there is no
// retry.
type ProviderConfig struct {
	// APIKey supplies keys; nil reads <PROVIDER>_API_KEY from the
	// environment and fails with AUTHENTICATION_FAILED when it is unset.
	APIKey KeyStrategy
	// BaseURL overrides the vendor's API address.
	BaseURL string
	// Timeout bounds each HTTP attempt's wait for response headers and
	// every pause between streamed chunks; 0 means 120 s. The caller's
	// context bounds the whole call.
	Timeout time.Duration
	// HTTPClient is the transport (UPP's custom fetch); nil uses a shared
	// client.
	HTTPClient *http.Client
	// RetryStrategy decides retries of retryable failures; nil never retries.
	RetryStrategy RetryStrategy
	// Headers are sent with every request and win over the provider's own.
	Headers map[string]string
	// RetryAfterMax caps how long a provider's Retry-After is honoured;
	// 0 means 1 hour.
	RetryAfterMax time.Duration
	// APIVersion overrides the vendor API version header where one exists.
	APIVersion string
}

// merge overlays explicit on base: set fields of explicit win, headers are
// merged with explicit's winning.
func (base ProviderConfig) merge(explicit ProviderConfig) ProviderConfig {
	out := base
	if explicit.APIKey != nil {
		out.APIKey = explicit.APIKey
	}
	if explicit.BaseURL != "" {
		out.BaseURL = explicit.BaseURL
	}
	if explicit.Timeout != 0 {
		out.Timeout = explicit.Timeout
	}
	if explicit.HTTPClient != nil {
		out.HTTPClient = explicit.HTTPClient
	}
	if explicit.RetryStrategy != nil {
		out.RetryStrategy = explicit.RetryStrategy
	}
	if explicit.RetryAfterMax != 0 {
		out.RetryAfterMax = explicit.RetryAfterMax
	}
	if explicit.APIVersion != "" {
		out.APIVersion = explicit.APIVersion
	}
	if len(base.Headers)+len(explicit.Headers) > 0 {
		h := make(map[string]string, len(base.Headers)+len(explicit.Headers))
		for k, v := range base.Headers {
			h[k] = v
		}
		for k, v := range explicit.Headers {
			h[k] = v
		}
		out.Headers = h
	}
	return out
}
