package ollama

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/llm/internal/providertest"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/llm"
)

func TestProviderIdentity(t *testing.T) {
	if Provider.Name() != "ollama" || Provider.Version() == "" {
		t.Errorf("Name, Version = %q, %q", Provider.Name(), Provider.Version())
	}
	ref := Model("llama3.2", &Options{Config: &llm.ProviderConfig{BaseURL: "http://gpu-box:11434"}})
	if ref.String() != "ollama:llama3.2" || ref.Config == nil || ref.Config.BaseURL != "http://gpu-box:11434" {
		t.Errorf("Model = %+v", ref)
	}
	if _, err := Provider.LLMHandler(llm.ModelReference{ModelID: "x", Provider: Provider, Options: "api"}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("foreign options: err = %v, want INVALID_REQUEST", err)
	}
	if _, err := Provider.LLMHandler(llm.ModelReference{Provider: Provider}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("empty model ID: err = %v, want INVALID_REQUEST", err)
	}
	h, err := Provider.LLMHandler(ref)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.LLMCapabilities{Streaming: true, Tools: true, StructuredOutput: true, ImageInput: true}
	if diff := cmp.Diff(want, h.Capabilities()); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
}

// A plain reply, with the system prompt and params passed through.
func TestGenerate_PlainReply(t *testing.T) {
	srv := newServer(t, reply{Fixture: "chat_plain.json"})
	m := newLLM(t, llm.LLMOptions{
		Config: config(srv.URL),
		System: "You are terse.",
		Params: map[string]any{
			"options":    map[string]any{"temperature": 0, "num_ctx": 8192, "seed": 101},
			"keep_alive": "10m",
			"think":      false,
			"messages":   "overwritten by the provider",
		},
	})
	turn, err := m.Generate(context.Background(), nil, llm.Text("Hello!"))
	if err != nil {
		t.Fatal(err)
	}
	if got := turn.Text(); got != "Hello! How are you today?" {
		t.Errorf("text = %q", got)
	}
	wantUsage := llm.TokenUsage{InputTokens: 26, OutputTokens: 298, TotalTokens: 324,
		Cycles: []llm.CycleUsage{{InputTokens: 26, OutputTokens: 298}}}
	if diff := cmp.Diff(wantUsage, turn.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	wantMeta := map[string]any{
		"model": "llama3.2", "created_at": "2023-12-12T14:13:43.416799Z", "done_reason": "stop",
		"total_duration": int64(5191566416), "load_duration": int64(2154458),
		"prompt_eval_duration": int64(383809000), "eval_duration": int64(4799921000),
	}
	if diff := cmp.Diff(wantMeta, turn.Response.Metadata.Provider("ollama")); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/api/chat" {
		t.Errorf("path = %q", r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer test-key" {
		t.Errorf("Authorization = %q", got)
	}
	checkGolden(t, "request_plain.json", r.Body)
}

func TestGenerate_StopReasonVerbatim(t *testing.T) {
	srv := newServer(t, reply{Body: `{"model":"m","message":{"role":"assistant","content":"cut"},"done":true,"done_reason":"length","prompt_eval_count":1,"eval_count":2}`})
	m := newLLM(t, llm.LLMOptions{Config: config(srv.URL), Middleware: []llm.Middleware{{
		OnResponse: func(_ context.Context, mc *llm.MiddlewareContext) error {
			if mc.Response.StopReason != "length" {
				t.Errorf("StopReason = %q, want length", mc.Response.StopReason)
			}
			return nil
		},
	}}})
	if _, err := m.Generate(context.Background(), nil, llm.Text("hi")); err != nil {
		t.Fatal(err)
	}
}

// Two parallel tool calls, then the results in the next request.
func TestGenerate_ToolRoundTrip(t *testing.T) {
	deterministicIDs(t)
	srv := newServer(t, reply{Fixture: "chat_tools.json"}, reply{Fixture: "chat_after_tools.json"})
	weather := llm.Tool{
		Name:        "get_current_weather",
		Description: "Get the current weather for a location",
		Parameters: llm.MustSchema(`{"type":"object","properties":{"location":{"type":"string"},` +
			`"format":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location","format"]}`),
		Run: func(_ context.Context, args map[string]any) (any, error) {
			return map[string]any{"temperature": 22, "unit": args["format"]}, nil
		},
	}
	clock := llm.Tool{
		Name:        "get_current_time",
		Description: "Get the local time of a timezone",
		Parameters:  llm.MustSchema(`{"type":"object","properties":{"timezone":{"type":"string"}}}`),
		Run:         func(context.Context, map[string]any) (any, error) { return "14:05", nil },
	}
	m := newLLM(t, llm.LLMOptions{Config: config(srv.URL), Tools: []llm.Tool{weather, clock}})
	turn, err := m.Generate(context.Background(), nil, llm.Text("Weather and time in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Cycles != 2 || len(turn.ToolExecutions) != 2 {
		t.Fatalf("cycles = %d, executions = %d", turn.Cycles, len(turn.ToolExecutions))
	}
	first := turn.Messages[1].(*llm.AssistantMessage)
	wantCalls := []llm.ToolCall{
		{ToolCallID: "call_id-2", ToolName: "get_current_weather", Arguments: map[string]any{"format": "celsius", "location": "Paris, FR"}},
		{ToolCallID: "call_id-3", ToolName: "get_current_time", Arguments: map[string]any{"timezone": "Europe/Paris"}},
	}
	providertest.CheckArgumentsJSON(t, first.ToolCalls)
	if diff := cmp.Diff(wantCalls, first.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if !strings.Contains(turn.Text(), "22 degrees") {
		t.Errorf("final text = %q", turn.Text())
	}
	reqs := srv.requests()
	checkGolden(t, "request_tools_first.json", reqs[0].Body)
	checkGolden(t, "request_tools_second.json", reqs[1].Body)
}

// Tool calls in history: the tool name of a result is looked up from the
// assistant call; non-object arguments are sent as {}.
func TestBuildBody_ToolHistory(t *testing.T) {
	history := []llm.Message{
		llm.NewUserMessage(llm.Text("go")),
		llm.NewAssistantMessage(nil, []llm.ToolCall{
			{ToolCallID: "c1", ToolName: "lookup", Arguments: map[string]any{"q": "x"}},
			{ToolCallID: "c2", ToolName: "broken", RawArguments: `"not an object"`},
		}),
		llm.NewToolResultMessage([]llm.ToolResult{
			{ToolCallID: "c1", Result: map[string]any{"hits": 3}},
			{ToolCallID: "c2", Result: "Invalid arguments", IsError: true},
			{ToolCallID: "unknown", Result: nil},
		}),
	}
	body, err := buildBody(&llm.Request{ModelID: "m", Messages: history}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := body["messages"].([]wireMessage)
	want := []wireMessage{
		{Role: "user", Content: "go"},
		{Role: "assistant", ToolCalls: []wireToolCall{
			{ID: "c1", Function: wireFunction{Index: 0, Name: "lookup", Arguments: map[string]any{"q": "x"}}},
			{ID: "c2", Function: wireFunction{Index: 1, Name: "broken", Arguments: map[string]any{}}},
		}},
		{Role: "tool", Content: `{"hits":3}`, ToolName: "lookup", ToolCallID: "c1"},
		{Role: "tool", Content: "Invalid arguments", ToolName: "broken", ToolCallID: "c2"},
		{Role: "tool", Content: "null", ToolCallID: "unknown"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestGenerate_StructuredOutput(t *testing.T) {
	srv := newServer(t, reply{Fixture: "chat_structured.json"})
	schema := llm.MustSchema(`{"type":"object","properties":{"age":{"type":"integer"},"available":{"type":"boolean"}},"required":["age","available"]}`)
	m := newLLM(t, llm.LLMOptions{Model: Model("llama3.1", nil), Config: config(srv.URL), Structure: schema,
		Params: map[string]any{"options": map[string]any{"temperature": 0}}})
	turn, err := m.Generate(context.Background(), nil,
		llm.Text("Ollama is 22 years old and busy saving the world. Return a JSON object with the age and availability."))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"age": float64(22), "available": false}, turn.Data); diff != "" {
		t.Errorf("Data (-want +got):\n%s", diff)
	}
	checkGolden(t, "request_structured.json", srv.requests()[0].Body)
}

func TestStream_StructuredOutput(t *testing.T) {
	srv := newServer(t, ndjson("stream_structured.ndjson"))
	schema := llm.MustSchema(`{"type":"object","properties":{"age":{"type":"integer"},"available":{"type":"boolean"}}}`)
	m := newLLM(t, llm.LLMOptions{Config: config(srv.URL), Structure: schema})
	events, turn, err := collect(t, m.Stream(context.Background(), nil, llm.Text("JSON please")))
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.StreamEvent{
		{Type: llm.MessageStart},
		{Type: llm.ContentBlockStart},
		{Type: llm.ObjectDelta, Delta: llm.EventDelta{Text: `{"age": `}},
		{Type: llm.ObjectDelta, Delta: llm.EventDelta{Text: `22, "available"`}},
		{Type: llm.ObjectDelta, Delta: llm.EventDelta{Text: `: false}`}},
		{Type: llm.ContentBlockStop},
		{Type: llm.MessageStop},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"age": float64(22), "available": false}, turn.Data); diff != "" {
		t.Errorf("Data (-want +got):\n%s", diff)
	}
	if srv.requests()[0].Body["format"] == nil {
		t.Error("streamed request has no format")
	}
}

func TestGenerate_Reasoning(t *testing.T) {
	srv := newServer(t, reply{Fixture: "chat_thinking.json"}, reply{Fixture: "chat_plain.json"})
	m := newLLM(t, llm.LLMOptions{Model: Model("qwen3", nil), Config: config(srv.URL), Params: map[string]any{"think": true}})
	turn, err := m.Generate(context.Background(), nil, llm.Text("How many r's in strawberry?"))
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ContentBlock{
		llm.ReasoningBlock{Text: "Let me count the letters: s-t-r-a-w-b-e-r-r-y. The r's are at positions 3, 8 and 9."},
		llm.TextBlock{Text: `There are three r's in "strawberry".`},
	}
	if diff := cmp.Diff(want, turn.Response.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	// The reasoning goes back as thinking.
	if _, err := m.Generate(context.Background(), turn.Messages, llm.Text("And in raspberry?")); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "request_reasoning.json", srv.requests()[1].Body)
}

func TestGenerate_Images(t *testing.T) {
	srv := newServer(t, reply{Fixture: "chat_plain.json"})
	m := newLLM(t, llm.LLMOptions{Model: Model("llava", nil), Config: config(srv.URL)})
	png := []byte("\x89PNG\r\n\x1a\nfake")
	msg := llm.NewUserMessage(
		llm.Text("What is in these images?"),
		llm.ImageFromBytes(png, "image/png"),
		llm.Text("Be brief."),
		llm.ImageFromBase64(base64.StdEncoding.EncodeToString([]byte("jpegdata")), "image/jpeg"),
	)
	if _, err := m.Generate(context.Background(), nil, msg); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "request_images.json", srv.requests()[0].Body)
}

func TestGenerate_UnsupportedContent(t *testing.T) {
	srv := newServer(t) // no request may reach it
	m := newLLM(t, llm.LLMOptions{Config: config(srv.URL)})
	cases := map[string]llm.Input{
		"image url": llm.ImageFromURL("https://example.com/cat.png", "image/png"),
		"document":  llm.DocumentFromText("text", "notes"),
		"audio":     llm.AudioFromBytes([]byte("RIFF"), "audio/wav"),
		"video":     llm.VideoFromBytes([]byte("mp4"), "video/mp4"),
		"binary":    llm.BinaryBlock{Data: []byte{1}, MimeType: "application/octet-stream"},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := m.Generate(context.Background(), nil, in)
			e := asError(t, err)
			if e.Code != llm.InvalidRequest {
				t.Errorf("code = %s (%v), want INVALID_REQUEST", e.Code, err)
			}
		})
	}
	// The provider's own check, below the core's capability check.
	_, err := handler{}.Complete(context.Background(), &llm.Request{ModelID: "m", Messages: []llm.Message{
		llm.NewUserMessage(llm.DocumentFromText("text", "notes")),
	}})
	if e := asError(t, err); e.Code != llm.InvalidRequest || !strings.Contains(e.Message, "document") {
		t.Errorf("document: %v", err)
	}
	_, err = m.Generate(context.Background(), nil, llm.ImageFromURL("https://example.com/cat.png", ""))
	if e := asError(t, err); !strings.Contains(e.Message, "URL") {
		t.Errorf("image URL message = %q", e.Message)
	}
}

func TestStream_TextAndToolCalls(t *testing.T) {
	deterministicIDs(t)
	srv := newServer(t, ndjson("stream_tools.ndjson"))
	m := newLLM(t, llm.LLMOptions{Model: Model("qwen3", nil), Config: config(srv.URL)})
	events, turn, err := collect(t, m.Stream(context.Background(), nil, llm.Text("Weather in Paris and Tokyo?")))
	if err != nil {
		t.Fatal(err)
	}
	args := func(s string) string { return compactJSON(t, s) }
	want := []llm.StreamEvent{
		{Type: llm.MessageStart},
		{Type: llm.ContentBlockStart, Index: 0},
		{Type: llm.ReasoningDelta, Index: 0, Delta: llm.EventDelta{Text: "The user wants"}},
		{Type: llm.ReasoningDelta, Index: 0, Delta: llm.EventDelta{Text: " the weather in two cities."}},
		{Type: llm.ContentBlockStop, Index: 0},
		{Type: llm.ContentBlockStart, Index: 1},
		{Type: llm.TextDelta, Index: 1, Delta: llm.EventDelta{Text: "Checking both."}},
		{Type: llm.ContentBlockStop, Index: 1},
		{Type: llm.ContentBlockStart, Index: 2},
		{Type: llm.ToolCallDelta, Index: 2, Delta: llm.EventDelta{ToolCallID: "call_id-2", ToolName: "get_current_weather",
			ArgumentsJSON: args(`{"location":"Paris, FR","format":"celsius"}`)}},
		{Type: llm.ContentBlockStop, Index: 2},
		{Type: llm.ContentBlockStart, Index: 3},
		{Type: llm.ToolCallDelta, Index: 3, Delta: llm.EventDelta{ToolCallID: "call_tokyo", ToolName: "get_current_weather",
			ArgumentsJSON: args(`{"location":"Tokyo, JP","format":"celsius"}`)}},
		{Type: llm.ContentBlockStop, Index: 3},
		{Type: llm.MessageStop},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantContent := []llm.ContentBlock{
		llm.ReasoningBlock{Text: "The user wants the weather in two cities."},
		llm.TextBlock{Text: "Checking both."},
	}
	if diff := cmp.Diff(wantContent, turn.Response.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	wantCalls := []llm.ToolCall{
		{ToolCallID: "call_id-2", ToolName: "get_current_weather", Arguments: map[string]any{"location": "Paris, FR", "format": "celsius"}},
		{ToolCallID: "call_tokyo", ToolName: "get_current_weather", Arguments: map[string]any{"location": "Tokyo, JP", "format": "celsius"}},
	}
	providertest.CheckArgumentsJSON(t, turn.Response.ToolCalls)
	if diff := cmp.Diff(wantCalls, turn.Response.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if turn.Usage.InputTokens != 140 || turn.Usage.OutputTokens != 64 {
		t.Errorf("usage = %+v", turn.Usage)
	}
	r := srv.requests()[0]
	if r.Body["stream"] != true {
		t.Errorf("stream = %v, want true", r.Body["stream"])
	}
	if got := r.Header.Get("Accept"); got != "application/x-ndjson" {
		t.Errorf("Accept = %q", got)
	}
}

// Stream returns the same response Complete does for the same reply.
func TestStream_SameResponseAsComplete(t *testing.T) {
	deterministicIDs(t)
	streamed, err := decodeStream(strings.NewReader(string(fixture(t, "stream_text.ndjson"))), false, func(llm.StreamEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := decodeResponse([]byte(`{"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z",`+
		`"message":{"role":"assistant","content":"The sky is blue."},"done":true,"done_reason":"stop",`+
		`"total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":26,"prompt_eval_duration":342546000,`+
		`"eval_count":282,"eval_duration":4535599000}`), false)
	if err != nil {
		t.Fatal(err)
	}
	streamed.Message.ID, whole.Message.ID = "", ""
	if diff := cmp.Diff(whole, streamed); diff != "" {
		t.Errorf("stream vs complete (-complete +stream):\n%s", diff)
	}
}

func TestStream_Failures(t *testing.T) {
	cases := []struct {
		name    string
		reply   reply
		code    llm.ErrorCode
		message string
	}{
		{"truncated", ndjson("stream_truncated.ndjson"), llm.InvalidResponse, "truncated"},
		{"malformed", ndjson("stream_malformed.ndjson"), llm.InvalidResponse, "malformed"},
		{"empty", reply{Body: ""}, llm.InvalidResponse, "truncated"},
		{"error line", ndjson("stream_error.ndjson"), llm.ProviderError, "an error was encountered while running the model"},
		{"context error line", reply{Body: `{"error":"input length exceeds the context length"}` + "\n"}, llm.ContextLengthExceeded, "context length"},
		{"not an object", reply{Body: "[1,2]\n"}, llm.InvalidResponse, "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.reply)
			m := newLLM(t, llm.LLMOptions{Config: config(srv.URL)})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, err := collect(t, m.Stream(ctx, nil, llm.Text("hi")))
			e := asError(t, err)
			if e.Code != tc.code || !strings.Contains(e.Message, tc.message) {
				t.Errorf("err = %v, want %s containing %q", err, tc.code, tc.message)
			}
		})
	}
}

// A stream that stops sending fails with TIMEOUT after the idle timeout
// instead of hanging.
func TestStream_Idle(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(`{"model":"m","message":{"role":"assistant","content":"Hi"},"done":false}` + "\n"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := config(srv.URL)
	cfg.Timeout = 50 * time.Millisecond
	m := newLLM(t, llm.LLMOptions{Config: cfg})
	_, _, err := collect(t, m.Stream(context.Background(), nil, llm.Text("hi")))
	if e := asError(t, err); e.Code != llm.Timeout {
		t.Errorf("err = %v, want TIMEOUT", err)
	}
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		name    string
		reply   reply
		code    llm.ErrorCode
		message string
	}{
		{"401", reply{Status: 401, Body: `{"error":"unauthorized"}`}, llm.AuthenticationFailed, "unauthorized"},
		{"404 model", reply{Status: 404, Body: `{"error":"model \"nope\" not found, try pulling it first"}`}, llm.ModelNotFound, "try pulling it first"},
		{"400 model not found", reply{Status: 400, Body: `{"error":"model 'nope' not found"}`}, llm.ModelNotFound, "not found"},
		{"400 tools", reply{Status: 400, Body: `{"error":"registry.ollama.ai/library/gemma:latest does not support tools"}`}, llm.InvalidRequest, "does not support tools"},
		{"400 context", reply{Status: 400, Body: `{"error":"the input length exceeds the context length"}`}, llm.ContextLengthExceeded, "context length"},
		{"500", reply{Status: 500, Body: `{"error":"llama runner process has terminated: exit status 2"}`}, llm.ProviderError, "llama runner"},
		{"502 plain text", reply{Status: 502, Body: "bad gateway", Header: map[string]string{"Content-Type": "text/plain"}}, llm.ProviderError, "bad gateway"},
		{"503 busy", reply{Status: 503, Body: `{"error":"server busy, please try again.  maximum pending requests exceeded"}`}, llm.ProviderError, "server busy"},
		{"429 quota", reply{Status: 429, Body: `{"error":"you've reached your weekly usage limit"}`}, llm.QuotaExceeded, "usage limit"},
		{"200 error body", reply{Body: `{"error":"something broke"}`}, llm.ProviderError, "something broke"},
		{"200 malformed", reply{Body: `{"model":`}, llm.InvalidResponse, "malformed"},
		{"200 no message", reply{Body: `{"model":"m","done":true}`}, llm.InvalidResponse, "no message"},
		{"200 trailing", reply{Body: `{"model":"m","message":{"role":"assistant","content":"a"},"done":false}` + "\n" + `{"done":true}`}, llm.InvalidResponse, "trailing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.reply)
			m := newLLM(t, llm.LLMOptions{Config: config(srv.URL)})
			_, err := m.Generate(context.Background(), nil, llm.Text("hi"))
			e := asError(t, err)
			if e.Code != tc.code || !strings.Contains(e.Message, tc.message) {
				t.Errorf("err = %v, want %s containing %q", err, tc.code, tc.message)
			}
			if e.Provider != "ollama" || strings.Contains(err.Error(), "test-key") {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestRateLimit_RetryAfter(t *testing.T) {
	limited := reply{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: `{"error":"too many requests"}`}
	t.Run("reported", func(t *testing.T) {
		srv := newServer(t, limited)
		m := newLLM(t, llm.LLMOptions{Config: config(srv.URL)})
		_, err := m.Generate(context.Background(), nil, llm.Text("hi"))
		e := asError(t, err)
		if e.Code != llm.RateLimited || e.RetryAfter != 7*time.Second || e.StatusCode != 429 {
			t.Errorf("err = %+v, want RATE_LIMITED with RetryAfter 7s", e)
		}
	})
	t.Run("retried", func(t *testing.T) {
		srv := newServer(t, limited, limited, reply{Fixture: "chat_plain.json"})
		cfg := config(srv.URL)
		cfg.RetryStrategy = llm.ExponentialBackoff{BaseDelay: time.Millisecond, NoJitter: true}
		cfg.RetryAfterMax = 10 * time.Millisecond
		m := newLLM(t, llm.LLMOptions{Config: cfg})
		turn, err := m.Generate(context.Background(), nil, llm.Text("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if turn.Text() == "" || len(srv.requests()) != 3 {
			t.Errorf("text %q after %d requests", turn.Text(), len(srv.requests()))
		}
	})
	t.Run("streamed", func(t *testing.T) {
		srv := newServer(t, limited, ndjson("stream_text.ndjson"))
		cfg := config(srv.URL)
		cfg.RetryStrategy = llm.LinearBackoff{Delay: time.Millisecond}
		cfg.RetryAfterMax = 10 * time.Millisecond
		m := newLLM(t, llm.LLMOptions{Config: cfg})
		_, turn, err := collect(t, m.Stream(context.Background(), nil, llm.Text("hi")))
		if err != nil {
			t.Fatal(err)
		}
		if turn.Text() != "The sky is blue." {
			t.Errorf("text = %q", turn.Text())
		}
	})
}

// The key is optional: without one no Authorization header is sent, and a
// server that wants one answers 401, which is AUTHENTICATION_FAILED.
func TestKey(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		t.Setenv("OLLAMA_API_KEY", "")
		srv := newServer(t, reply{Status: 401, Body: `{"error":"unauthorized"}`})
		m := newLLM(t, llm.LLMOptions{Config: llm.ProviderConfig{BaseURL: srv.URL}})
		_, err := m.Generate(context.Background(), nil, llm.Text("hi"))
		if e := asError(t, err); e.Code != llm.AuthenticationFailed {
			t.Errorf("err = %v, want AUTHENTICATION_FAILED", err)
		}
		if h := srv.requests()[0].Header.Get("Authorization"); h != "" {
			t.Errorf("Authorization = %q, want none", h)
		}
	})
	t.Run("local server without key", func(t *testing.T) {
		t.Setenv("OLLAMA_API_KEY", "")
		srv := newServer(t, reply{Fixture: "chat_plain.json"})
		m := newLLM(t, llm.LLMOptions{Config: llm.ProviderConfig{BaseURL: srv.URL}})
		if _, err := m.Generate(context.Background(), nil, llm.Text("hi")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("OLLAMA_API_KEY", "env-secret")
		srv := newServer(t, reply{Fixture: "chat_plain.json"})
		m := newLLM(t, llm.LLMOptions{Config: llm.ProviderConfig{BaseURL: srv.URL}})
		if _, err := m.Generate(context.Background(), nil, llm.Text("hi")); err != nil {
			t.Fatal(err)
		}
		if h := srv.requests()[0].Header.Get("Authorization"); h != "Bearer env-secret" {
			t.Errorf("Authorization = %q", h)
		}
	})
	t.Run("failing strategy", func(t *testing.T) {
		srv := newServer(t) // never reached
		m := newLLM(t, llm.LLMOptions{Config: llm.ProviderConfig{BaseURL: srv.URL,
			APIKey: llm.KeyFunc(func(context.Context) (string, error) { return "", nil })}})
		_, err := m.Generate(context.Background(), nil, llm.Text("hi"))
		if e := asError(t, err); e.Code != llm.AuthenticationFailed {
			t.Errorf("err = %v, want AUTHENTICATION_FAILED", err)
		}
	})
}

func TestHeadersAndTransport(t *testing.T) {
	srv := newServer(t, reply{Fixture: "chat_plain.json"})
	var used bool
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	m := newLLM(t, llm.LLMOptions{Config: llm.ProviderConfig{
		BaseURL: srv.URL + "/", APIKey: llm.StaticKey("k"), HTTPClient: client,
		Headers: map[string]string{"X-Trace": "abc", "Authorization": "Bearer override"},
	}})
	if _, err := m.Generate(context.Background(), nil, llm.Text("hi")); err != nil {
		t.Fatal(err)
	}
	r := srv.requests()[0]
	if !used || r.Path != "/api/chat" || r.Header.Get("X-Trace") != "abc" || r.Header.Get("Authorization") != "Bearer override" {
		t.Errorf("transport used %v, path %q, headers %v", used, r.Path, r.Header)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// With Ollama not running, the error says where it was looked for and how
// to start it.
func TestNotRunning(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	m := newLLM(t, llm.LLMOptions{Config: llm.ProviderConfig{BaseURL: url}})
	_, err := m.Generate(context.Background(), nil, llm.Text("hi"))
	e := asError(t, err)
	if e.Code != llm.NetworkError || !strings.Contains(e.Message, url) || !strings.Contains(e.Message, "ollama serve") {
		t.Errorf("err = %v", err)
	}
	_, _, err = collect(t, m.Stream(context.Background(), nil, llm.Text("hi")))
	if e := asError(t, err); e.Code != llm.NetworkError || !strings.Contains(e.Message, "not reachable") {
		t.Errorf("stream err = %v", err)
	}
}

func TestCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the request context ends with the connection only once the body is read
		<-r.Context().Done()
	}))
	defer srv.Close()
	m := newLLM(t, llm.LLMOptions{Config: config(srv.URL)})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := m.Generate(ctx, nil, llm.Text("hi"))
	if e := asError(t, err); e.Code != llm.Cancelled {
		t.Errorf("err = %v, want CANCELLED", err)
	}
}

func TestOllamaHostEnv(t *testing.T) {
	srv := newServer(t, reply{Fixture: "chat_plain.json"})
	t.Setenv("OLLAMA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	m := newLLM(t, llm.LLMOptions{Config: llm.ProviderConfig{APIKey: llm.StaticKey("k")}})
	if _, err := m.Generate(context.Background(), nil, llm.Text("hi")); err != nil {
		t.Fatal(err)
	}
	if len(srv.requests()) != 1 {
		t.Error("request did not reach OLLAMA_HOST")
	}
}

func TestNormalizeHost(t *testing.T) {
	cases := map[string]string{
		"":                            "",
		"  ":                          "",
		"127.0.0.1":                   "http://127.0.0.1:11434",
		"example.com:8080":            "http://example.com:8080",
		":1234":                       "http://127.0.0.1:1234",
		"0.0.0.0":                     "http://127.0.0.1:11434",
		"0.0.0.0:11435":               "http://127.0.0.1:11435",
		"[::]:11434":                  "http://[::1]:11434",
		"[::1]":                       "http://[::1]:11434",
		"http://gpu-box":              "http://gpu-box:80",
		"https://gpu-box":             "https://gpu-box:443",
		"https://gpu-box:8443/ollama": "https://gpu-box:8443/ollama",
		"ollama.com":                  "https://ollama.com:443",
		"gpu-box:99999":               "http://gpu-box:11434",
		"ftp://gpu-box":               "",
	}
	for in, want := range cases {
		if got := normalizeHost(in); got != want {
			t.Errorf("normalizeHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestToolCallArguments(t *testing.T) {
	cases := []struct {
		name, args string
		want       llm.ToolCall
		wantJSON   string
	}{
		{"object", `{"a": 1}`, llm.ToolCall{Arguments: map[string]any{"a": float64(1)}}, `{"a":1}`},
		{"missing", ``, llm.ToolCall{Arguments: map[string]any{}}, `{}`},
		{"null", `null`, llm.ToolCall{Arguments: map[string]any{}}, `{}`},
		{"empty string", `""`, llm.ToolCall{Arguments: map[string]any{}}, `{}`},
		{"string holding an object", `"{\"a\": 1}"`, llm.ToolCall{Arguments: map[string]any{"a": float64(1)}}, `{"a":1}`},
		{"plain string", `"Paris"`, llm.ToolCall{RawArguments: "Paris"}, `Paris`},
		{"array", `[1, 2]`, llm.ToolCall{RawArguments: "[1, 2]"}, `[1, 2]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"message":{"role":"assistant","content":"","tool_calls":[{"id":"x","function":{"name":"f"`
			if tc.args != "" {
				body += `,"arguments":` + tc.args
			}
			body += `}}]},"done":true}`
			resp, err := decodeResponse([]byte(body), false)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.ToolCallID, want.ToolName = "x", "f"
			providertest.CheckArgumentsJSON(t, resp.Message.ToolCalls)
			if diff := cmp.Diff([]llm.ToolCall{want}, resp.Message.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var events []llm.StreamEvent
			if _, err := decodeStream(strings.NewReader(body+"\n"), false, func(ev llm.StreamEvent) { events = append(events, ev) }); err != nil {
				t.Fatal(err)
			}
			for _, ev := range events {
				if ev.Type == llm.ToolCallDelta && ev.Delta.ArgumentsJSON != tc.wantJSON {
					t.Errorf("ArgumentsJSON = %q, want %q", ev.Delta.ArgumentsJSON, tc.wantJSON)
				}
			}
		})
	}
}

func TestClassify(t *testing.T) {
	cases := map[string]llm.ErrorCode{
		"model \"llama9\" not found, try pulling it first": llm.ModelNotFound,
		"input length exceeds the context length":          llm.ContextLengthExceeded,
		"unauthorized":                                     llm.AuthenticationFailed,
		"you've reached your hourly usage limit":           llm.QuotaExceeded,
		"rate limit exceeded":                              llm.RateLimited,
		"an error was encountered while running the model": "",
	}
	for msg, want := range cases {
		if got := classify(msg); got != want {
			t.Errorf("classify(%q) = %q, want %q", msg, got, want)
		}
	}
}
