package openai

import (
	"context"
	"encoding/base64"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/llm/internal/providertest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentry-dev/agentry/llm"
)

func weatherTools() []llm.Tool {
	return []llm.Tool{
		{Name: "get_weather", Description: "Current weather for a city.",
			Parameters: llm.Schema{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}},
			Run: func(_ context.Context, args map[string]any) (any, error) {
				return "sunny in " + args["city"].(string), nil
			}},
		{Name: "get_time", Description: "Current time in a zone.",
			Parameters: llm.Schema{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}},
			Run: func(context.Context, map[string]any) (any, error) {
				return map[string]any{"time": "12:00"}, nil
			}},
	}
}

var personSchema = llm.Schema{"type": "object", "properties": map[string]any{
	"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"},
}, "required": []any{"name", "age"}}

func endpoint(api API) string {
	if api == ChatCompletions {
		return "/chat/completions"
	}
	return "/responses"
}

func TestPlainReply(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t, jsonReply(fixture(t, dir+"/plain.json")))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api), System: "Be brief."})
		turn, err := inst.Generate(testCtx(t), nil, llm.Text("Hello"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if got, want := turn.Text(), "Hello! How can I help you today?"; got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
		wantUsage := llm.TokenUsage{InputTokens: 19, OutputTokens: 10, TotalTokens: 29, CacheReadTokens: 4,
			Cycles: []llm.CycleUsage{{InputTokens: 19, OutputTokens: 10, CacheReadTokens: 4}}}
		if diff := cmp.Diff(wantUsage, turn.Usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
		meta := turn.Response.Metadata.Provider("openai")
		if meta["api"] != string(api) || meta["model"] != "gpt-4.1-2025-04-14" || meta["id"] == "" {
			t.Errorf("metadata = %v", meta)
		}
		reqs := f.got()
		if len(reqs) != 1 {
			t.Fatalf("%d requests, want 1", len(reqs))
		}
		r := reqs[0]
		if r.method != "POST" || r.path != endpoint(api) {
			t.Errorf("request %s %s, want POST %s", r.method, r.path, endpoint(api))
		}
		if got := r.header.Get("Authorization"); got != "Bearer test-key" {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		checkGolden(t, dir+"_plain", r.body)
	})
}

func TestStopReasonAndMetadata(t *testing.T) {
	for _, c := range []struct {
		api        API
		file, stop string
		meta       map[string]any
	}{
		{ChatCompletions, "chat/plain.json", "stop", map[string]any{"api": "chat_completions", "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
			"model": "gpt-4.1-2025-04-14", "finish_reason": "stop", "system_fingerprint": "fp_44709d6fcb", "service_tier": "default"}},
		{ChatCompletions, "chat/tools.json", "tool_calls", nil},
		{Responses, "responses/plain.json", "completed", map[string]any{"api": "responses", "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
			"model": "gpt-4.1-2025-04-14", "status": "completed",
			"items": []any{map[string]any{"type": "message", "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b", "status": "completed"}}}},
		{Responses, "responses/incomplete.json", "max_output_tokens", nil},
	} {
		t.Run(c.file, func(t *testing.T) {
			resp := decodeFixture(t, c.api, c.file, false)
			if resp.StopReason != c.stop {
				t.Errorf("StopReason = %q, want %q", resp.StopReason, c.stop)
			}
			if c.meta != nil {
				if diff := cmp.Diff(c.meta, resp.Message.Metadata.Provider("openai")); diff != "" {
					t.Errorf("metadata (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func decodeFixture(t *testing.T, api API, file string, structured bool) *llm.Response {
	t.Helper()
	o := decodeOptions{provider: "openai", structured: structured}
	var resp *llm.Response
	var err error
	if api == ChatCompletions {
		resp, err = decodeChatResponse(fixture(t, file), o)
	} else {
		resp, err = decodeResponsesResponse(fixture(t, file), o)
	}
	if err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	return resp
}

func TestToolRoundTrip(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t, jsonReply(fixture(t, dir+"/tools.json")), jsonReply(fixture(t, dir+"/final.json")))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api), Tools: weatherTools()})
		turn, err := inst.Generate(testCtx(t), nil, llm.Text("Weather in Paris and the time in UTC?"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if got := turn.Text(); got != "It is sunny in Paris and 12:00 UTC." {
			t.Errorf("text = %q", got)
		}
		asked := turn.Messages[1].(*llm.AssistantMessage)
		wantCalls := []llm.ToolCall{
			{ToolCallID: "call_weather_1", ToolName: "get_weather", Arguments: map[string]any{"city": "Paris"}},
			{ToolCallID: "call_time_2", ToolName: "get_time", Arguments: map[string]any{"zone": "UTC"}},
		}
		providertest.CheckArgumentsJSON(t, asked.ToolCalls)
		if diff := cmp.Diff(wantCalls, asked.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
			t.Errorf("tool calls (-want +got):\n%s", diff)
		}
		if len(turn.ToolExecutions) != 2 {
			t.Errorf("%d tool executions, want 2", len(turn.ToolExecutions))
		}
		reqs := f.got()
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want 2", len(reqs))
		}
		checkGolden(t, dir+"_tools_first", reqs[0].body)
		checkGolden(t, dir+"_tools_second", reqs[1].body)
	})
}

// handlerFor binds the handler directly, to test one provider call.
func handlerFor(t *testing.T, ref llm.ModelReference) llm.Handler {
	t.Helper()
	h, err := ref.Provider.(llm.LLMProvider).LLMHandler(ref)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func userRequest(f *fakeServer, text string) *llm.Request {
	return &llm.Request{ModelID: "gpt-4.1", Messages: []llm.Message{llm.NewUserMessage(llm.Text(text))}, Config: f.config()}
}

func TestStreamToolCallEvents(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t, sseReply(fixture(t, dir+"/tools.sse")))
		req := userRequest(f, "Weather and time?")
		req.Tools = weatherTools()
		var log eventLog
		resp, err := handlerFor(t, testModel(api)).Stream(testCtx(t), req, log.emit)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		want := []string{
			"message_start",
			"content_block_start 0 call_weather_1 get_weather",
			`tool_call_delta 0 call_weather_1 get_weather {"ci`,
			`tool_call_delta 0 call_weather_1 get_weather ty": "Par`,
			`tool_call_delta 0 call_weather_1 get_weather is"}`,
			"content_block_stop 0",
			"content_block_start 1 call_time_2 get_time",
			`tool_call_delta 1 call_time_2 get_time {"zone"`,
			`tool_call_delta 1 call_time_2 get_time : "UTC"}`,
			"content_block_stop 1",
			"message_stop",
		}
		if diff := cmp.Diff(want, simplified(log.evs)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		wantCalls := []llm.ToolCall{
			{ToolCallID: "call_weather_1", ToolName: "get_weather", Arguments: map[string]any{"city": "Paris"}},
			{ToolCallID: "call_time_2", ToolName: "get_time", Arguments: map[string]any{"zone": "UTC"}},
		}
		providertest.CheckArgumentsJSON(t, resp.Message.ToolCalls)
		if diff := cmp.Diff(wantCalls, resp.Message.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
			t.Errorf("tool calls (-want +got):\n%s", diff)
		}
		if resp.Usage.InputTokens != 82 || resp.Usage.OutputTokens != 40 {
			t.Errorf("usage = %+v", resp.Usage)
		}
		r := f.got()[0]
		if r.body["stream"] != true || r.header.Get("Accept") != "text/event-stream" {
			t.Errorf("stream flag %v, Accept %q", r.body["stream"], r.header.Get("Accept"))
		}
	})
}

// TestStreamMatchesComplete checks that a stream assembles the response
// Complete decodes from the same reply.
func TestStreamMatchesComplete(t *testing.T) {
	for _, c := range []struct {
		api        API
		name       string
		structured bool
	}{
		{ChatCompletions, "chat/plain", false},
		{ChatCompletions, "chat/tools", false},
		{ChatCompletions, "chat/structured", true},
		{Responses, "responses/plain", false},
		{Responses, "responses/tools", false},
		{Responses, "responses/structured", true},
		{Responses, "responses/reasoning", false},
		{Responses, "responses/incomplete", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := decodeFixture(t, c.api, c.name+".json", c.structured)
			o := decodeOptions{provider: "openai", structured: c.structured}
			var got *llm.Response
			var err error
			r := strings.NewReader(string(fixture(t, c.name+".sse")))
			if c.api == ChatCompletions {
				got, err = decodeChatStream(r, o, func(llm.StreamEvent) {})
			} else {
				got, err = decodeResponsesStream(r, o, func(llm.StreamEvent) {})
			}
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			ignore := cmpopts.IgnoreFields(llm.MessageInfo{}, "ID", "Timestamp")
			// The recorded replies space the argument text differently.
			if diff := cmp.Diff(want, got, ignore, providertest.IgnoreArgumentsJSON); diff != "" {
				t.Errorf("streamed response differs from Complete's (-complete +stream):\n%s", diff)
			}
		})
	}
}

func TestStructuredOutput(t *testing.T) {
	want := map[string]any{"name": "Ada", "age": float64(36)}
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t, jsonReply(fixture(t, dir+"/structured.json")), sseReply(fixture(t, dir+"/structured.sse")))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api), Structure: personSchema})
		turn, err := inst.Generate(testCtx(t), nil, llm.Text("Ada Lovelace, 36"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if diff := cmp.Diff(want, turn.Data); diff != "" {
			t.Errorf("Data (-want +got):\n%s", diff)
		}
		checkGolden(t, dir+"_structured", f.got()[0].body)

		var evs []llm.StreamEvent
		s := inst.Stream(testCtx(t), nil, llm.Text("Ada Lovelace, 36"))
		for ev, err := range s.Events() {
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			evs = append(evs, ev)
		}
		turn, err = s.Turn()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, turn.Data); diff != "" {
			t.Errorf("streamed Data (-want +got):\n%s", diff)
		}
		wantEvents := []string{"message_start", "content_block_start 0",
			`object_delta 0 {"name":`, `object_delta 0 "Ada",`, `object_delta 0 "age":36}`,
			"content_block_stop 0", "message_stop"}
		if diff := cmp.Diff(wantEvents, simplified(evs)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

func TestStrictOption(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		b := builder{provider: "openai", strict: true}
		req := &llm.Request{ModelID: "m", Messages: []llm.Message{llm.NewUserMessage(llm.Text("x"))},
			Tools: weatherTools()[:1], Structure: personSchema}
		var body map[string]any
		var err error
		if api == ChatCompletions {
			body, err = b.chatBody(req, false)
		} else {
			body, err = b.responsesBody(req, false)
		}
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, dir+"_strict", body)
	})
}

func TestChatReasoning(t *testing.T) {
	f := newFake(t, jsonReply(fixture(t, "chat/reasoning.json")), jsonReply(fixture(t, "chat/final.json")),
		sseReply(fixture(t, "chat/reasoning.sse")))
	inst := newInstance(t, f, llm.LLMOptions{Model: testModel(ChatCompletions), Tools: weatherTools()[:1]})
	turn, err := inst.Generate(testCtx(t), nil, llm.Text("Weather in Paris?"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	asked := turn.Messages[1].(*llm.AssistantMessage)
	if got := asked.Reasoning(); got != "The user wants the weather, so I call the tool." {
		t.Errorf("reasoning = %q", got)
	}
	if got := asked.Metadata.Provider("openai")["reasoning_field"]; got != "reasoning_content" {
		t.Errorf("reasoning_field = %v", got)
	}
	if turn.Usage.Cycles[0].CacheReadTokens != 64 {
		t.Errorf("cache read = %d, want 64", turn.Usage.Cycles[0].CacheReadTokens)
	}
	// DeepSeek wants reasoning_content back on the tool-calling turn.
	checkGolden(t, "chat_reasoning_second", f.got()[1].body)

	var evs []llm.StreamEvent
	s := inst.Stream(testCtx(t), nil, llm.Text("6*7?"))
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		evs = append(evs, ev)
	}
	turn, err = s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"message_start", "content_block_start 0", "reasoning_delta 0 Six times", "reasoning_delta 0  seven.",
		"content_block_stop 0", "content_block_start 1", "text_delta 1 It is", "text_delta 1  42.", "content_block_stop 1", "message_stop"}
	if diff := cmp.Diff(want, simplified(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantContent := []llm.ContentBlock{llm.ReasoningBlock{Text: "Six times seven."}, llm.TextBlock{Text: "It is 42."}}
	if diff := cmp.Diff(wantContent, turn.Response.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
}

func TestResponsesReasoning(t *testing.T) {
	f := newFake(t, jsonReply(fixture(t, "responses/reasoning.json")), jsonReply(fixture(t, "responses/final.json")),
		sseReply(fixture(t, "responses/reasoning.sse")))
	inst := newInstance(t, f, llm.LLMOptions{Model: Model("o4-mini", nil), Tools: weatherTools()[:1],
		Params: map[string]any{"reasoning": map[string]any{"effort": "low", "summary": "auto"}}})
	turn, err := inst.Generate(testCtx(t), nil, llm.Text("Weather in Paris?"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	asked := turn.Messages[1].(*llm.AssistantMessage)
	const summary = "**Checking the weather**\n\nThe user wants Paris weather.\n\nI will call get_weather."
	wantContent := []llm.ContentBlock{llm.ReasoningBlock{Text: summary}, llm.TextBlock{Text: "Let me check."}}
	if diff := cmp.Diff(wantContent, asked.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	items := asked.Metadata.Provider("openai")["items"].([]any)
	if len(items) != 4 || items[0].(map[string]any)["encrypted_content"] == nil {
		t.Errorf("items = %v, want the reasoning item kept verbatim first", items)
	}
	// The reasoning item, message and call go back in order with their
	// ids; the web_search_call item verbatim.
	checkGolden(t, "responses_reasoning_second", f.got()[1].body)

	// Without tools the loop stops after one cycle.
	inst = newInstance(t, f, llm.LLMOptions{Model: Model("o4-mini", nil)})
	var evs []llm.StreamEvent
	for ev, err := range inst.Stream(testCtx(t), nil, llm.Text("Weather in Paris?")).Events() {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		evs = append(evs, ev)
	}
	want := []string{"message_start",
		"content_block_start 0", "reasoning_delta 0 **Checking the weather**", "reasoning_delta 0 \n\nThe user wants Paris weather.",
		"reasoning_delta 0 \n\nI will call get_weather.", "content_block_stop 0",
		"content_block_start 1", "text_delta 1 Let me", "text_delta 1  check.", "content_block_stop 1",
		`content_block_start 2 call_weather_1 get_weather`, `tool_call_delta 2 call_weather_1 get_weather {"city":"Paris"}`, "content_block_stop 2",
		"message_stop"}
	if diff := cmp.Diff(want, simplified(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// pngBytes is the start of a PNG file: enough to sniff its type.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestMediaMapping(t *testing.T) {
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.7 test"))
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		blocks := []llm.ContentBlock{
			llm.Text("Describe these."),
			llm.ImageFromURL("https://example.com/cat.jpg", "image/jpeg"),
			llm.ImageFromBytes(pngBytes, ""),
			llm.ImageFromBase64("R0lGODlhAQABAAAAACw=", "image/gif"),
			llm.DocumentFromBase64(pdf, "application/pdf", "report"),
			llm.DocumentFromText("Plain notes.", "notes.txt"),
		}
		if api == ChatCompletions {
			blocks = append(blocks, llm.AudioFromBytes([]byte("RIFF....WAVE"), "audio/wav"))
		} else {
			blocks = append(blocks, llm.DocumentFromURL("https://example.com/paper.pdf", "paper"))
		}
		f := newFake(t, jsonReply(fixture(t, dir+"/plain.json")))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api)})
		if _, err := inst.Generate(testCtx(t), nil, llm.NewUserMessage(blocks...)); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		checkGolden(t, dir+"_media", f.got()[0].body)
	})
}

func TestUnsupportedContent(t *testing.T) {
	video := llm.VideoFromBytes([]byte("v"), "video/mp4")
	for _, c := range []struct {
		name  string
		api   API
		block llm.ContentBlock
	}{
		{"chat video", ChatCompletions, video},
		{"chat binary", ChatCompletions, llm.BinaryBlock{Data: []byte("x"), MimeType: "application/zip"}},
		{"chat document url", ChatCompletions, llm.DocumentFromURL("https://example.com/a.pdf", "a")},
		{"chat ogg audio", ChatCompletions, llm.AudioFromBytes([]byte("x"), "audio/ogg")},
		{"responses video", Responses, video},
		{"responses audio", Responses, llm.AudioFromBytes([]byte("x"), "audio/wav")},
		{"responses binary", Responses, llm.BinaryBlock{Data: []byte("x"), MimeType: "application/zip"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			req := &llm.Request{ModelID: "gpt-4.1", Config: f.config(),
				Messages: []llm.Message{llm.NewUserMessage(llm.Text("look"), c.block)}}
			_, err := handlerFor(t, testModel(c.api)).Complete(testCtx(t), req)
			if e := llmError(t, err); e.Code != llm.InvalidRequest {
				t.Errorf("code %s, want INVALID_REQUEST", e.Code)
			}
			if len(f.got()) != 0 {
				t.Error("a request was sent")
			}
		})
	}
	// Assistant messages carry only text, reasoning and tool calls.
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t)
		req := &llm.Request{ModelID: "gpt-4.1", Config: f.config(), Messages: []llm.Message{
			llm.NewUserMessage(llm.Text("draw")),
			llm.NewAssistantMessage([]llm.ContentBlock{llm.ImageFromBytes(pngBytes, "image/png")}, nil),
			llm.NewUserMessage(llm.Text("again")),
		}}
		_, err := handlerFor(t, testModel(api)).Complete(testCtx(t), req)
		if e := llmError(t, err); e.Code != llm.InvalidRequest {
			t.Errorf("code %s, want INVALID_REQUEST", e.Code)
		}
	})
}

func TestParamsPassthrough(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		params := map[string]any{"temperature": 0.2, "user": "u-1", "metadata": map[string]any{"k": "v"}, "store": false}
		if api == ChatCompletions {
			params["max_completion_tokens"] = 256
			params["stream_options"] = map[string]any{"include_obfuscation": false}
			params["messages"] = []any{"replaced by UPP"}
		} else {
			params["max_output_tokens"] = 256
			params["text"] = map[string]any{"verbosity": "low"}
			params["tools"] = []any{map[string]any{"type": "web_search"}}
			params["include"] = []any{"reasoning.encrypted_content"}
		}
		orig := maps.Clone(params)
		f := newFake(t, sseReply(fixture(t, dir+"/structured.sse")))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api), Params: params, Tools: weatherTools()[:1], Structure: personSchema})
		if _, err := inst.Stream(testCtx(t), nil, llm.Text("hi")).Turn(); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		checkGolden(t, dir+"_params", f.got()[0].body)
		if diff := cmp.Diff(orig, params); diff != "" {
			t.Errorf("params were modified (-before +after):\n%s", diff)
		}
	})
}

func TestHTTPErrors(t *testing.T) {
	for _, c := range []struct {
		file   string
		status int
		header map[string]string
		code   llm.ErrorCode
		retry  time.Duration
		msg    string
	}{
		{"unauthorized", 401, nil, llm.AuthenticationFailed, 0, "Incorrect API key"},
		{"rate_limit", 429, map[string]string{"Retry-After": "2"}, llm.RateLimited, 2 * time.Second, "Rate limit reached"},
		{"quota", 429, nil, llm.QuotaExceeded, 0, "exceeded your current quota"},
		{"context", 400, nil, llm.ContextLengthExceeded, 0, "maximum context length"},
		{"content_filter", 400, nil, llm.ContentFiltered, 0, "content management policy"},
		{"model_not_found", 404, nil, llm.ModelNotFound, 0, "does not exist"},
		{"server", 500, nil, llm.ProviderError, 0, "server had an error"},
		{"vllm", 404, nil, llm.ModelNotFound, 0, "`qwen` does not exist"},
	} {
		forEachAPI(t, func(t *testing.T, api API, dir string) {
			t.Run(c.file, func(t *testing.T) {
				f := newFake(t, errorReply(c.status, fixture(t, "errors/"+c.file+".json"), c.header))
				inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api)})
				_, err := inst.Generate(testCtx(t), nil, llm.Text("hi"))
				e := llmError(t, err)
				if e.Code != c.code || e.StatusCode != c.status || e.RetryAfter != c.retry || e.Provider != "openai" {
					t.Errorf("error = %s (status %d, retry %v, provider %q), want %s (status %d, retry %v)",
						e.Code, e.StatusCode, e.RetryAfter, e.Provider, c.code, c.status, c.retry)
				}
				if !strings.Contains(e.Message, c.msg) {
					t.Errorf("message %q lacks %q", e.Message, c.msg)
				}
				if strings.Contains(err.Error(), "test-key") {
					t.Errorf("error %q contains the API key", err)
				}
			})
		})
	}
}

func TestRetry(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t,
			errorReply(429, fixture(t, "errors/rate_limit.json"), map[string]string{"Retry-After": "1"}),
			jsonReply(fixture(t, dir+"/plain.json")))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api), Config: llm.ProviderConfig{
			RetryStrategy: llm.LinearBackoff{MaxRetries: 2, Delay: time.Millisecond},
			RetryAfterMax: 5 * time.Millisecond,
		}})
		turn, err := inst.Generate(testCtx(t), nil, llm.Text("hi"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if turn.Text() == "" || len(f.got()) != 2 {
			t.Errorf("text %q after %d requests, want a reply after 2", turn.Text(), len(f.got()))
		}
	})
	// insufficient_quota comes with 429 but is final: never retried.
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t, errorReply(429, fixture(t, "errors/quota.json"), map[string]string{"Retry-After": "1"}))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api), Config: llm.ProviderConfig{
			RetryStrategy: llm.LinearBackoff{MaxRetries: 2, Delay: time.Millisecond},
			RetryAfterMax: 5 * time.Millisecond,
		}})
		_, err := inst.Generate(testCtx(t), nil, llm.Text("hi"))
		if e := llmError(t, err); e.Code != llm.QuotaExceeded || len(f.got()) != 1 {
			t.Errorf("code %s after %d requests, want QUOTA_EXCEEDED after 1", e.Code, len(f.got()))
		}
	})
}

func TestStreamFailures(t *testing.T) {
	for _, c := range []struct {
		api  API
		file string
		code llm.ErrorCode
		msg  string
	}{
		{ChatCompletions, "chat/malformed.sse", llm.InvalidResponse, "malformed"},
		{ChatCompletions, "chat/truncated.sse", llm.InvalidResponse, "truncated"},
		{ChatCompletions, "chat/error_event.sse", llm.RateLimited, "Rate limit reached"},
		{Responses, "responses/malformed.sse", llm.InvalidResponse, "malformed"},
		{Responses, "responses/truncated.sse", llm.InvalidResponse, "truncated"},
		{Responses, "responses/error_event.sse", llm.RateLimited, "Rate limit reached"},
		{Responses, "responses/failed.sse", llm.ProviderError, "server had an error"},
	} {
		t.Run(c.file, func(t *testing.T) {
			f := newFake(t, sseReply(fixture(t, c.file)))
			inst := newInstance(t, f, llm.LLMOptions{Model: testModel(c.api)})
			_, err := inst.Stream(testCtx(t), nil, llm.Text("hi")).Turn()
			e := llmError(t, err)
			if e.Code != c.code || !strings.Contains(e.Message, c.msg) {
				t.Errorf("error %v, want %s containing %q", err, c.code, c.msg)
			}
		})
	}
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		f := newFake(t, sseReply(nil))
		inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api)})
		_, err := inst.Stream(testCtx(t), nil, llm.Text("hi")).Turn()
		if e := llmError(t, err); e.Code != llm.InvalidResponse {
			t.Errorf("empty stream: code %s, want INVALID_RESPONSE", e.Code)
		}
	})
}

func TestMalformedResponse(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		for _, body := range []string{`{"choices":`, `[]`, `{"id":"x","choices":[],"output":[{"id":"x"}]}`} {
			f := newFake(t, jsonReply([]byte(body)))
			inst := newInstance(t, f, llm.LLMOptions{Model: testModel(api)})
			_, err := inst.Generate(testCtx(t), nil, llm.Text("hi"))
			if e := llmError(t, err); e.Code != llm.InvalidResponse {
				t.Errorf("body %s: code %s, want INVALID_RESPONSE", body, e.Code)
			}
		}
	})
}

func TestMissingKey(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		t.Setenv("OPENAI_API_KEY", "")
		f := newFake(t)
		inst, err := llm.LLM(&llm.LLMOptions{Model: testModel(api), Config: llm.ProviderConfig{BaseURL: f.srv.URL}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = inst.Generate(testCtx(t), nil, llm.Text("hi"))
		e := llmError(t, err)
		if e.Code != llm.AuthenticationFailed || !strings.Contains(e.Message, "OPENAI_API_KEY") {
			t.Errorf("error %v, want AUTHENTICATION_FAILED naming OPENAI_API_KEY", err)
		}
		if len(f.got()) != 0 {
			t.Error("a request was sent without a key")
		}
	})
	t.Run("from environment", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "env-key")
		f := newFake(t, jsonReply(fixture(t, "responses/plain.json")))
		inst, _ := llm.LLM(&llm.LLMOptions{Model: Model("gpt-4.1", nil), Config: llm.ProviderConfig{BaseURL: f.srv.URL}})
		if _, err := inst.Generate(testCtx(t), nil, llm.Text("hi")); err != nil {
			t.Fatal(err)
		}
		r := f.got()[0]
		if got := r.header.Get("Authorization"); got != "Bearer env-key" || r.path != "/responses" {
			t.Errorf("Authorization %q on %s, want the env key on /responses (the default API)", got, r.path)
		}
	})
}

func TestCompatible(t *testing.T) {
	t.Run("local server without key", func(t *testing.T) {
		t.Setenv("LOCAL_API_KEY", "")
		f := newFake(t, jsonReply(fixture(t, "chat/plain.json")), errorReply(500, []byte(`{"error":{"message":"boom"}}`), nil))
		ref := Compatible("local", f.srv.URL, "qwen3", nil)
		inst, err := llm.LLM(&llm.LLMOptions{Model: ref})
		if err != nil {
			t.Fatal(err)
		}
		turn, err := inst.Generate(testCtx(t), nil, llm.Text("hi"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		r := f.got()[0]
		if r.path != "/chat/completions" || r.header.Get("Authorization") != "" || r.body["model"] != "qwen3" {
			t.Errorf("request %s, Authorization %q, model %v", r.path, r.header.Get("Authorization"), r.body["model"])
		}
		if turn.Response.Metadata.Provider("local") == nil || turn.Response.Metadata.Provider("openai") != nil {
			t.Errorf("metadata = %v, want it under \"local\"", turn.Response.Metadata)
		}
		if !inst.Capabilities().AudioInput {
			t.Error("compatible servers default to Chat Completions, which takes audio")
		}
		_, err = inst.Generate(testCtx(t), nil, llm.Text("hi"))
		if e := llmError(t, err); e.Provider != "local" || e.Code != llm.ProviderError {
			t.Errorf("error provider %q code %s", e.Provider, e.Code)
		}
	})
	t.Run("key from NAME_API_KEY", func(t *testing.T) {
		t.Setenv("GROQ_API_KEY", "groq-key")
		f := newFake(t, jsonReply(fixture(t, "chat/plain.json")))
		inst, _ := llm.LLM(&llm.LLMOptions{Model: Compatible("groq", f.srv.URL+"/openai/v1", "llama-3.3-70b-versatile", nil)})
		if _, err := inst.Generate(testCtx(t), nil, llm.Text("hi")); err != nil {
			t.Fatal(err)
		}
		r := f.got()[0]
		if r.header.Get("Authorization") != "Bearer groq-key" || r.path != "/openai/v1/chat/completions" {
			t.Errorf("Authorization %q on %s", r.header.Get("Authorization"), r.path)
		}
	})
	t.Run("responses API and base URL override", func(t *testing.T) {
		f := newFake(t, jsonReply(fixture(t, "responses/plain.json")))
		ref := Compatible("vllm", "http://unused.invalid/v1", "gpt-oss-20b", &Options{API: Responses})
		inst, _ := llm.LLM(&llm.LLMOptions{Model: ref, Config: llm.ProviderConfig{BaseURL: f.srv.URL}})
		if _, err := inst.Generate(testCtx(t), nil, llm.Text("hi")); err != nil {
			t.Fatal(err)
		}
		if r := f.got()[0]; r.path != "/responses" {
			t.Errorf("path %s", r.path)
		}
	})
}

func TestOrganizationHeaders(t *testing.T) {
	f := newFake(t, jsonReply(fixture(t, "responses/plain.json")))
	inst := newInstance(t, f, llm.LLMOptions{Model: Model("gpt-4.1", &Options{Organization: "org-1", Project: "proj-1"})})
	if _, err := inst.Generate(testCtx(t), nil, llm.Text("hi")); err != nil {
		t.Fatal(err)
	}
	h := f.got()[0].header
	if h.Get("OpenAI-Organization") != "org-1" || h.Get("OpenAI-Project") != "proj-1" {
		t.Errorf("headers %v", h)
	}
}

func TestCapabilities(t *testing.T) {
	for api, audio := range map[API]bool{ChatCompletions: true, Responses: false} {
		caps := handlerFor(t, testModel(api)).Capabilities()
		want := llm.LLMCapabilities{Streaming: true, Tools: true, StructuredOutput: true, ImageInput: true, DocumentInput: true, AudioInput: audio}
		if caps != want {
			t.Errorf("%s: capabilities %+v, want %+v", api, caps, want)
		}
	}
}

func TestLLMHandlerOptions(t *testing.T) {
	for _, opts := range []any{nil, Options{}, &Options{API: ChatCompletions}, (*Options)(nil)} {
		if _, err := Provider.LLMHandler(llm.ModelReference{ModelID: "m", Provider: Provider, Options: opts}); err != nil {
			t.Errorf("options %#v: %v", opts, err)
		}
	}
	for _, opts := range []any{"responses", &Options{API: "assistants"}} {
		_, err := Provider.LLMHandler(llm.ModelReference{ModelID: "m", Provider: Provider, Options: opts})
		if e := llmError(t, err); e.Code != llm.InvalidRequest {
			t.Errorf("options %#v: code %s, want INVALID_REQUEST", opts, e.Code)
		}
	}
	if ref := Model("gpt-4.1", nil); ref.String() != "openai:gpt-4.1" || ref.Options != nil {
		t.Errorf("Model = %+v", ref)
	}
}

func TestToolCallDecoding(t *testing.T) {
	o := decodeOptions{provider: "openai"}
	chat := `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
		{"id":"","type":"function","function":{"name":"a","arguments":"not json"}},
		{"id":"call_2","type":"function","function":{"name":"b","arguments":{"x":1}}},
		{"id":"call_3","type":"function","function":{"name":"c","arguments":""}},
		{"id":"call_4","type":"function","function":{"name":"d","arguments":"[1]"}}]}}]}`
	resp, err := decodeChatResponse([]byte(chat), o)
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, resp.Message.ToolCalls)
	responses := `{"id":"r","status":"completed","output":[
		{"type":"function_call","id":"fc_1","call_id":"","name":"a","arguments":"not json"},
		{"type":"function_call","id":"fc_2","call_id":"call_2","name":"b","arguments":"{\"x\":1}"},
		{"type":"function_call","id":"fc_3","call_id":"call_3","name":"c","arguments":""},
		{"type":"function_call","id":"fc_4","call_id":"call_4","name":"d","arguments":"[1]"}]}`
	resp, err = decodeResponsesResponse([]byte(responses), o)
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, resp.Message.ToolCalls)
}

func checkCalls(t *testing.T, calls []llm.ToolCall) {
	t.Helper()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4", len(calls))
	}
	if !strings.HasPrefix(calls[0].ToolCallID, "call_") || calls[0].Arguments != nil || calls[0].RawArguments != "not json" {
		t.Errorf("call 0 = %+v, want a generated id and the raw text", calls[0])
	}
	if diff := cmp.Diff(map[string]any{"x": float64(1)}, calls[1].Arguments); diff != "" {
		t.Errorf("call 1 arguments (-want +got):\n%s", diff)
	}
	if calls[2].Arguments == nil || len(calls[2].Arguments) != 0 {
		t.Errorf("call 2 = %+v, want empty arguments", calls[2])
	}
	if calls[3].Arguments != nil || calls[3].RawArguments != "[1]" {
		t.Errorf("call 3 = %+v, want raw [1]", calls[3])
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	// A call whose arguments were not an object goes back as the model
	// wrote it; unknown metadata is left alone.
	meta := llm.Metadata{"openai": map[string]any{"items": []any{
		map[string]any{"type": "function_call", "id": "fc_9", "call_id": "call_9"},
	}}, "other": map[string]any{"keep": "me"}}
	asked := llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("Calling."), llm.ReasoningBlock{Text: "foreign"}},
		[]llm.ToolCall{{ToolCallID: "call_9", ToolName: "a", RawArguments: "not json"}})
	asked.Metadata = meta
	before := llm.Metadata{"openai": map[string]any{"items": []any{
		map[string]any{"type": "function_call", "id": "fc_9", "call_id": "call_9"},
	}}, "other": map[string]any{"keep": "me"}}
	msgs := []llm.Message{
		llm.NewUserMessage(llm.Text("go")), asked,
		llm.NewToolResultMessage([]llm.ToolResult{{ToolCallID: "call_9", Result: "bad arguments", IsError: true}}),
	}
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		b := builder{provider: "openai"}
		req := &llm.Request{ModelID: "m", Messages: msgs}
		var body map[string]any
		var err error
		if api == ChatCompletions {
			body, err = b.chatBody(req, false)
		} else {
			body, err = b.responsesBody(req, false)
		}
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, dir+"_history", body)
		if diff := cmp.Diff(before, asked.Metadata); diff != "" {
			t.Errorf("metadata changed (-before +after):\n%s", diff)
		}
	})
}

func TestToolMetadataOverrides(t *testing.T) {
	tool := weatherTools()[0]
	tool.Metadata = map[string]any{"openai": map[string]any{"strict": true}}
	for _, api := range []API{ChatCompletions, Responses} {
		b := builder{provider: "openai"}
		req := &llm.Request{ModelID: "m", Messages: []llm.Message{llm.NewUserMessage(llm.Text("x"))}, Tools: []llm.Tool{tool}}
		var def map[string]any
		if api == ChatCompletions {
			body, _ := b.chatBody(req, false)
			def = body["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)
		} else {
			body, _ := b.responsesBody(req, false)
			def = body["tools"].([]any)[0].(map[string]any)
		}
		if def["strict"] != true {
			t.Errorf("%s: strict = %v, want the metadata's true", api, def["strict"])
		}
	}
}
