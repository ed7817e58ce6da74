package gemini

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/wire"
)

// name is the provider name and the metadata namespace.
const name = "gemini"

// defaultBaseURL is the Gemini API address used when
// ProviderConfig.BaseURL is empty.
const defaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

const version = "1.0.0"

// envKeys are the environment variables the key is read from, in order.
var envKeys = []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}

// Provider is the Gemini provider. Model is the usual way to use it.
var Provider llm.LLMProvider = provider{}

// Options are the binding options of a Gemini model reference.
type Options struct {
	// Config is provider-level configuration bound to the reference
	// (ModelReference.Config); LLMOptions.Config overlays it.
	Config *llm.ProviderConfig
}

// Model returns a reference to the Gemini model id (for example
// "gemini-2.5-flash"; a full resource name such as "models/…" or
// "tunedModels/…" is used as it is). opts may be nil.
func Model(id string, opts *Options) llm.ModelReference {
	ref := llm.ModelReference{ModelID: id, Provider: Provider}
	if opts != nil {
		ref.Config = opts.Config
		ref.Options = *opts
	}
	return ref
}

type provider struct{}

func (provider) Name() string    { return name }
func (provider) Version() string { return version }

func (provider) LLMHandler(ref llm.ModelReference) (llm.Handler, error) {
	switch ref.Options.(type) {
	case nil, Options, *Options:
	default:
		return nil, llm.NewError(llm.InvalidRequest, name, "model reference options must be gemini.Options", nil)
	}
	return handler{}, nil
}

type handler struct{}

func (handler) Capabilities() llm.LLMCapabilities {
	return llm.LLMCapabilities{
		Streaming: true, Tools: true, StructuredOutput: true,
		ImageInput: true, DocumentInput: true, AudioInput: true, VideoInput: true,
	}
}

func newClient(cfg llm.ProviderConfig) *wire.Client {
	c := &wire.Client{
		Provider:       name,
		Config:         cfg,
		DefaultBaseURL: defaultBaseURL,
		EnvKeys:        envKeys,
		Authorize:      func(h http.Header, key string) { h.Set("x-goog-api-key", key) },
		ParseError:     parseError,
		RetryDelay:     retryDelay,
	}
	if !strings.Contains(c.URL(""), "/v1") {
		c.BaseURLHint = "the Gemini base URL includes the API version (e.g. " + defaultBaseURL + ")"
	}
	return c
}

// modelPath returns the URL path of a model's resource: "models/{id}"
// unless id is already a resource name.
func modelPath(id string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return "", llm.NewError(llm.InvalidRequest, name, "no model id", nil)
	}
	segs := strings.Split(id, "/")
	if len(segs) == 1 {
		segs = []string{"models", id}
	}
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", llm.NewError(llm.InvalidRequest, name, "invalid model id "+id, nil)
		}
		segs[i] = url.PathEscape(s)
	}
	return "/" + strings.Join(segs, "/"), nil
}

func (handler) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	path, err := modelPath(req.ModelID)
	if err != nil {
		return nil, err
	}
	body, err := buildBody(req)
	if err != nil {
		return nil, err
	}
	data, err := newClient(req.Config).PostJSON(ctx, path+":generateContent", body)
	if err != nil {
		return nil, err
	}
	return decodeResponse(data, req.Structure != nil)
}

func (handler) Stream(ctx context.Context, req *llm.Request, emit func(llm.StreamEvent)) (*llm.Response, error) {
	path, err := modelPath(req.ModelID)
	if err != nil {
		return nil, err
	}
	body, err := buildBody(req)
	if err != nil {
		return nil, err
	}
	client := newClient(req.Config)
	rc, err := client.Open(ctx, http.MethodPost, path+":streamGenerateContent?alt=sse", body, true)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	resp, err := decodeStream(rc, req.Structure != nil, emit)
	if err != nil {
		return nil, client.ReadError(ctx, err)
	}
	return resp, nil
}
