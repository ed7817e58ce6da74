package cli

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// vendorServer imitates each provider's API at its usual paths just
// enough for one non-streamed reply "hello from <path>"; anything else is
// 404 page not found.
type vendorServer struct {
	*httptest.Server
	mu     sync.Mutex
	models []string // the "model" of each request
}

func (v *vendorServer) asked() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.models...)
}

func newVendorServer(t *testing.T) *vendorServer {
	t.Helper()
	v := &vendorServer{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool   `json:"stream"`
			Model  string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		v.mu.Lock()
		v.models = append(v.models, req.Model)
		v.mu.Unlock()
		text := "hello from " + r.URL.Path
		var body string
		switch p := r.URL.Path; {
		case p == "/v1/chat/completions" && req.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, chunk := range []string{
				`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"` + text + `"},"finish_reason":null}]}`,
				`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
			} {
				io.WriteString(w, "data: "+chunk+"\n\n")
			}
			io.WriteString(w, "data: [DONE]\n\n")
			return
		case p == "/v1/chat/completions":
			body = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
		case p == "/v1/responses":
			body = `{"id":"r1","object":"response","status":"completed","output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`
		case p == "/v1/messages":
			body = `{"id":"msg1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` + text + `"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`
		case strings.HasPrefix(p, "/v1beta/models/") && strings.HasSuffix(p, ":generateContent"):
			body = `{"candidates":[{"content":{"role":"model","parts":[{"text":"` + text + `"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2}}`
		case p == "/api/chat":
			body = `{"model":"m","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"` + text + `"},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":1}`
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(v.Close)
	return v
}

// closedURL returns the URL of a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// Every provider takes its API address from <PROVIDER>_BASE_URL and the
// vendor's own variable (OPENAI_BASE_URL, OLLAMA_HOST…); a flag wins.
func TestProviderBaseURLFromEnvironment(t *testing.T) {
	for _, key := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY"} {
		t.Setenv(key, "test-key")
	}
	for _, name := range []string{"OPENAI_BASE_URL", "OPENAI_CHAT_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL",
		"OLLAMA_HOST", "OLLAMA_BASE_URL", "COMPAT_BASE_URL", "GROQ_BASE_URL"} {
		t.Setenv(name, "")
	}
	v := newVendorServer(t)
	for _, tc := range []struct {
		model, env, base, path string
	}{
		{"openai:gpt-x", "OPENAI_BASE_URL", "/v1", "/v1/responses"},
		{"openai-chat:gpt-x", "OPENAI_BASE_URL", "/v1", "/v1/chat/completions"},
		{"openai-chat:gpt-x", "OPENAI_CHAT_BASE_URL", "/v1", "/v1/chat/completions"},
		{"anthropic:claude-x", "ANTHROPIC_BASE_URL", "", "/v1/messages"},
		{"gemini:gemini-x", "GEMINI_BASE_URL", "/v1beta", "/v1beta/models/gemini-x:generateContent"},
		{"gemini:gemini-x", "GOOGLE_GEMINI_BASE_URL", "/v1beta", "/v1beta/models/gemini-x:generateContent"},
		{"ollama:llama-x", "OLLAMA_HOST", "", "/api/chat"},
		{"ollama:llama-x", "OLLAMA_BASE_URL", "", "/api/chat"},
		{"compat:tiny", "COMPAT_BASE_URL", "/v1", "/v1/chat/completions"},
		{"groq:llama-x", "GROQ_BASE_URL", "/v1", "/v1/chat/completions"},
	} {
		t.Run(tc.model+" "+tc.env, func(t *testing.T) {
			t.Setenv(tc.env, v.URL+tc.base)
			code, out, errs := runCLI(t, "", "llm", "--no-stream", "--retries", "0", "-m", tc.model, "hi")
			if code != 0 || out != "hello from "+tc.path+"\n" {
				t.Errorf("exit %d, stdout %q, want the reply from %s\n%s", code, out, tc.path, errs)
			}
			// The flag wins over the variable.
			t.Setenv(tc.env, closedURL(t)+tc.base)
			code, out, errs = runCLI(t, "", "llm", "--no-stream", "--retries", "0", "-m", tc.model, "--base-url", v.URL+tc.base, "hi")
			if code != 0 || out != "hello from "+tc.path+"\n" {
				t.Errorf("--base-url over %s: exit %d, stdout %q\n%s", tc.env, code, out, errs)
			}
		})
	}
}

// A refused connection names the URL tried and says so in words; a 404
// from a base URL that serves nothing there says to check the base URL
// (OpenAI-compatible servers serve under /v1), not the model name.
func TestProviderNetworkAndNotFoundErrors(t *testing.T) {
	t.Setenv("COMPAT_BASE_URL", "")
	closed := closedURL(t)
	code, _, errs := runCLI(t, "", "llm", "--retries", "0", "-m", "compat:tiny", "--base-url", closed+"/v1", "hi")
	want := "agentry: compat: NETWORK_ERROR: cannot reach " + closed + "/v1/chat/completions: connection refused — is the server running there? (the address: --base-url, else COMPAT_BASE_URL)\n"
	if code != 1 || errs != want {
		t.Errorf("refused: exit %d, stderr\n%q, want\n%q", code, errs, want)
	}
	v := newVendorServer(t)
	code, _, errs = runCLI(t, "", "llm", "--retries", "0", "-m", "compat:tiny", "--base-url", v.URL, "hi")
	want = "agentry: compat: MODEL_NOT_FOUND (HTTP 404): nothing is served at " + v.URL + "/chat/completions (404 page not found): check the base URL; OpenAI-compatible servers usually serve under /v1 (e.g. http://localhost:8000/v1)\n"
	if code != 1 || errs != want {
		t.Errorf("404: exit %d, stderr\n%q, want\n%q", code, errs, want)
	}
	// Each provider says what its base URL looks like.
	for _, key := range []string{"ANTHROPIC_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(key, "test-key")
	}
	for _, tc := range []struct{ model, base, hint string }{
		{"anthropic:m", v.URL + "/v1", "the Anthropic base URL is the server's root, without /v1"},
		{"gemini:m", v.URL, "the Gemini base URL includes the API version"},
		{"ollama:m", v.URL + "/v1", "the Ollama base URL is the server's root"},
	} {
		code, _, errs := runCLI(t, "", "llm", "--retries", "0", "-m", tc.model, "--base-url", tc.base, "hi")
		if code != 1 || !strings.Contains(errs, "MODEL_NOT_FOUND (HTTP 404): nothing is served at "+tc.base) || !strings.Contains(errs, tc.hint) || strings.Contains(errs, "model name") {
			t.Errorf("%s at %s: exit %d, stderr %q", tc.model, tc.base, code, errs)
		}
	}
}

// serve --agent-model compat:MODEL takes the base URL from
// --agent-base-url (or COMPAT_BASE_URL), and the support agent then asks
// that server; without one, serve says where to give it. (The run itself
// ends fail_safe: a model that only greets gives no evidence.)
func TestServeAgentModelBaseURL(t *testing.T) {
	t.Setenv("COMPAT_BASE_URL", "")
	v := newVendorServer(t)
	ask := func(t *testing.T, srv *inProcessServe) map[string]any {
		t.Helper()
		resp, err := http.Post(srv.plainURL+"/v1/runs", "application/json", strings.NewReader(`{"agent":"support","input":"hi","wait":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var run map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&run); err != nil {
			t.Fatalf("%s: %v", resp.Status, err)
		}
		return run
	}
	srv := serveInProcess(t, t.TempDir(), "--tls-addr", "", "--agent-model", "compat:tiny", "--agent-base-url", v.URL+"/v1")
	if run := ask(t, srv); run["status"] == nil || len(v.asked()) == 0 || v.asked()[0] != "tiny" {
		t.Errorf("--agent-base-url: run %v, the server was asked for %v\n%s", run, v.asked(), srv.output.String())
	}
	srv.stop()

	t.Setenv("COMPAT_BASE_URL", v.URL+"/v1")
	before := len(v.asked())
	srv = serveInProcess(t, t.TempDir(), "--tls-addr", "", "--agent-model", "compat:small")
	if run := ask(t, srv); run["status"] == nil || len(v.asked()) == before || v.asked()[before] != "small" {
		t.Errorf("COMPAT_BASE_URL: run %v, the server was asked for %v\n%s", run, v.asked(), srv.output.String())
	}
	srv.stop()

	t.Setenv("COMPAT_BASE_URL", "")
	code, _, errs := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--tls-addr", "", "--store", "memory:", "--data", t.TempDir(), "--agent-model", "compat:tiny")
	if code != 2 || !strings.Contains(errs, "--agent-base-url") || !strings.Contains(errs, "COMPAT_BASE_URL") {
		t.Errorf("no base URL: exit %d, stderr %q", code, errs)
	}
}
