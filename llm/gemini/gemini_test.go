package gemini

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/llm/internal/providertest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
)

func TestGenerate_PlainReply(t *testing.T) {
	f := newFakeServer(t, jsonReply(t, "text_response.json"))
	inst := newLLM(t, llm.LLMOptions{Config: f.config(), System: "Be brief."})
	turn, err := inst.Generate(testCtx(t), nil, llm.Text("Hi there"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got, want := turn.Text(), "Hello! How can I help you today?"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	wantUsage := llm.TokenUsage{
		InputTokens: 8, OutputTokens: 29, TotalTokens: 37, CacheReadTokens: 4,
		Cycles: []llm.CycleUsage{{InputTokens: 8, OutputTokens: 29, CacheReadTokens: 4}},
	}
	if diff := cmp.Diff(wantUsage, turn.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if !ids.Valid(turn.Response.ID) {
		t.Errorf("response id %q is not a UUIDv4", turn.Response.ID)
	}
	wantMeta := llm.Metadata{name: map[string]any{
		"responseId": "mT1ZaOv7Ne2rnvgP1pTCyAo", "modelVersion": "gemini-2.5-flash", "finishReason": "STOP",
	}}
	if diff := cmp.Diff(wantMeta, turn.Response.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}

	req := f.request(0)
	if req.method != http.MethodPost || req.path != "/models/gemini-2.5-flash:generateContent" || req.query != "" {
		t.Errorf("request = %s %s?%s", req.method, req.path, req.query)
	}
	if got := req.header.Get("x-goog-api-key"); got != testKey {
		t.Errorf("x-goog-api-key = %q", got)
	}
	if got := req.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	checkGolden(t, "plain", req.body)
}

func TestComplete_StopReason(t *testing.T) {
	f := newFakeServer(t, jsonReply(t, "text_response.json"))
	resp, err := handler{}.Complete(testCtx(t), &llm.Request{
		ModelID: "models/gemini-2.5-flash", Config: f.config(),
		Messages: []llm.Message{llm.NewUserMessage(llm.Text("Hi"))},
	})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.StopReason != "STOP" {
		t.Errorf("StopReason = %q, want STOP", resp.StopReason)
	}
	if p := f.request(0).path; p != "/models/gemini-2.5-flash:generateContent" {
		t.Errorf("path = %q", p)
	}
}

func weatherTools(results map[string]any) []llm.Tool {
	return []llm.Tool{
		{
			Name: "get_weather", Description: "Current weather for a city.",
			Parameters: llm.MustSchema(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`),
			Run:        func(context.Context, map[string]any) (any, error) { return results["get_weather"], nil },
		},
		{
			Name: "get_time", Description: "Local time in a city.",
			Parameters: llm.MustSchema(`{"type":"object","properties":{"city":{"type":"string"},"format":{"enum":["12h","24h"]}}}`),
			Run:        func(context.Context, map[string]any) (any, error) { return results["get_time"], nil },
		},
	}
}

func TestGenerate_ParallelToolRoundTrip(t *testing.T) {
	f := newFakeServer(t, jsonReply(t, "tools_response.json"), jsonReply(t, "final_response.json"))
	inst := newLLM(t, llm.LLMOptions{
		Model:  Model("gemini-3-flash-preview", nil),
		Config: f.config(),
		Tools:  weatherTools(map[string]any{"get_weather": map[string]any{"tempC": 18, "sky": "sunny"}, "get_time": "14:05"}),
	})
	turn, err := inst.Generate(testCtx(t), nil, llm.Text("Weather and time in Paris?"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got, want := turn.Text(), "It is 18°C and sunny in Paris, where it is 14:05."; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if turn.Cycles != 2 || len(turn.ToolExecutions) != 2 {
		t.Errorf("cycles = %d, executions = %d, want 2 and 2", turn.Cycles, len(turn.ToolExecutions))
	}
	asked := turn.Messages[1].(*llm.AssistantMessage)
	wantCalls := []llm.ToolCall{
		{ToolName: "get_weather", Arguments: map[string]any{"city": "Paris"}},
		{ToolName: "get_time", Arguments: map[string]any{"city": "Paris", "format": "24h"}},
	}
	providertest.CheckArgumentsJSON(t, asked.ToolCalls)
	if diff := cmp.Diff(wantCalls, asked.ToolCalls, cmpopts.IgnoreFields(llm.ToolCall{}, "ToolCallID"), providertest.IgnoreArgumentsJSON); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	for _, c := range asked.ToolCalls {
		if !ids.Valid(c.ToolCallID) {
			t.Errorf("generated call id %q is not a UUIDv4", c.ToolCallID)
		}
	}
	wantMeta := map[string]any{
		"responseId": "Zn5ZaK2bB8qQ1dkP-tools", "modelVersion": "gemini-3-flash-preview", "finishReason": "STOP",
		"thoughtSignatures": map[string]any{"t0": "CiQBVKhc7mPZ0Zx0A1B2C3D4E5F6"},
	}
	if diff := cmp.Diff(wantMeta, asked.Metadata.Provider(name)); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	wantUsage := llm.TokenUsage{InputTokens: 310, OutputTokens: 110, TotalTokens: 420,
		Cycles: []llm.CycleUsage{{InputTokens: 120, OutputTokens: 92}, {InputTokens: 190, OutputTokens: 18}}}
	if diff := cmp.Diff(wantUsage, turn.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	checkGolden(t, "tools_request", f.request(0).body)
	// The second request sends both calls back (signature on the first,
	// no generated ids) and the results under the calls' names.
	checkGolden(t, "tool_roundtrip", f.request(1).body)
}

// withoutTimes zeroes the timestamps of tool execution events.
func withoutTimes(evs []llm.StreamEvent) []llm.StreamEvent {
	out := make([]llm.StreamEvent, len(evs))
	for i, ev := range evs {
		ev.Delta.Timestamp = time.Time{}
		out[i] = ev
	}
	return out
}

func ev(typ llm.StreamEventType, index int, d llm.EventDelta) llm.StreamEvent {
	return llm.StreamEvent{Type: typ, Index: index, Delta: d}
}

func TestStream_ToolCallDeltas(t *testing.T) {
	f := newFakeServer(t, sseReply(t, "stream_tools.sse"), sseReply(t, "stream_text.sse"))
	inst := newLLM(t, llm.LLMOptions{
		Model:  Model("gemini-3-flash-preview", nil),
		Config: f.config(),
		Tools:  weatherTools(map[string]any{"get_weather": "18°C, sunny", "get_time": "14:05"}),
	})
	evs, turn, err := collect(inst.Stream(testCtx(t), nil, llm.Text("Weather and time in Paris?")))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var content, execs []llm.StreamEvent
	for _, e := range withoutTimes(evs) {
		if e.Type == llm.ToolExecutionStart || e.Type == llm.ToolExecutionEnd {
			execs = append(execs, e)
		} else {
			content = append(content, e)
		}
	}
	weather := llm.EventDelta{ToolCallID: "fc-weather-1", ToolName: "get_weather"}
	clock := llm.EventDelta{ToolCallID: "fc-time-2", ToolName: "get_time"}
	weatherArgs, clockArgs := weather, clock
	weatherArgs.ArgumentsJSON = `{"city": "Paris"}`
	clockArgs.ArgumentsJSON = `{"city": "Paris","format": "24h"}`
	want := []llm.StreamEvent{
		ev(llm.MessageStart, 0, llm.EventDelta{}),
		ev(llm.ContentBlockStart, 0, llm.EventDelta{}),
		ev(llm.TextDelta, 0, llm.EventDelta{Text: "Let me check"}),
		ev(llm.TextDelta, 0, llm.EventDelta{Text: " both."}),
		ev(llm.ContentBlockStop, 0, llm.EventDelta{}),
		ev(llm.ContentBlockStart, 1, weather),
		ev(llm.ToolCallDelta, 1, weatherArgs),
		ev(llm.ContentBlockStop, 1, llm.EventDelta{}),
		ev(llm.ContentBlockStart, 2, clock),
		ev(llm.ToolCallDelta, 2, clockArgs),
		ev(llm.ContentBlockStop, 2, llm.EventDelta{}),
		ev(llm.MessageStop, 0, llm.EventDelta{}),
		ev(llm.MessageStart, 0, llm.EventDelta{}),
		ev(llm.ContentBlockStart, 0, llm.EventDelta{}),
		ev(llm.TextDelta, 0, llm.EventDelta{Text: "Hello"}),
		ev(llm.TextDelta, 0, llm.EventDelta{Text: ", world!"}),
		ev(llm.ContentBlockStop, 0, llm.EventDelta{}),
		ev(llm.MessageStop, 0, llm.EventDelta{}),
	}
	if diff := cmp.Diff(want, content); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(execs) != 4 {
		t.Errorf("%d tool execution events, want 4", len(execs))
	}
	if turn.Text() != "Hello, world!" {
		t.Errorf("text = %q", turn.Text())
	}
	asked := turn.Messages[1].(*llm.AssistantMessage)
	if asked.Text() != "Let me check both." || len(asked.ToolCalls) != 2 || asked.ToolCalls[1].ToolCallID != "fc-time-2" {
		t.Errorf("assistant message = %q with calls %+v", asked.Text(), asked.ToolCalls)
	}
	wantMeta := map[string]any{
		"responseId": "stream-tools-1", "modelVersion": "gemini-3-flash-preview", "finishReason": "STOP",
		"thoughtSignatures": map[string]any{"t0": "CiQBVKhc7sig"},
		"functionCallIds":   map[string]any{"t0": "fc-weather-1", "t1": "fc-time-2"},
	}
	if diff := cmp.Diff(wantMeta, asked.Metadata.Provider(name)); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	req := f.request(0)
	if req.path != "/models/gemini-3-flash-preview:streamGenerateContent" || req.query != "alt=sse" {
		t.Errorf("request = %s?%s", req.path, req.query)
	}
	if got := req.header.Get("Accept"); got != "text/event-stream" {
		t.Errorf("Accept = %q", got)
	}
	checkGolden(t, "stream_tool_roundtrip", f.request(1).body)
}

var personSchema = llm.MustSchema(`{
	"type": "object",
	"properties": {"name": {"type": "string"}, "born": {"type": "integer"}},
	"required": ["name", "born"]
}`)

func TestStructuredOutput(t *testing.T) {
	wantData := map[string]any{"name": "Ada Lovelace", "born": float64(1815)}

	t.Run("Generate", func(t *testing.T) {
		f := newFakeServer(t, jsonReply(t, "structured_response.json"))
		gc := map[string]any{"temperature": 0.1, "responseSchema": map[string]any{"type": "STRING"}}
		params := map[string]any{"generationConfig": gc}
		inst := newLLM(t, llm.LLMOptions{Config: f.config(), Structure: personSchema, Params: params})
		turn, err := inst.Generate(testCtx(t), nil, llm.Text("Who wrote the first program?"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if diff := cmp.Diff(wantData, turn.Data); diff != "" {
			t.Errorf("Data (-want +got):\n%s", diff)
		}
		if turn.Text() != `{"name": "Ada Lovelace", "born": 1815}` {
			t.Errorf("text = %q", turn.Text())
		}
		wantGC := map[string]any{"temperature": 0.1, "responseSchema": map[string]any{"type": "STRING"}}
		if diff := cmp.Diff(wantGC, gc); diff != "" {
			t.Errorf("the caller's generationConfig was modified (-want +got):\n%s", diff)
		}
		checkGolden(t, "structured", f.request(0).body)
	})

	t.Run("Stream", func(t *testing.T) {
		f := newFakeServer(t, sseReply(t, "stream_structured.sse"))
		inst := newLLM(t, llm.LLMOptions{Config: f.config(), Structure: personSchema})
		evs, turn, err := collect(inst.Stream(testCtx(t), nil, llm.Text("Who wrote the first program?")))
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		want := []llm.StreamEvent{
			ev(llm.MessageStart, 0, llm.EventDelta{}),
			ev(llm.ContentBlockStart, 0, llm.EventDelta{}),
			ev(llm.ObjectDelta, 0, llm.EventDelta{Text: `{"name": "Ada`}),
			ev(llm.ObjectDelta, 0, llm.EventDelta{Text: ` Lovelace", "born": 1815}`}),
			ev(llm.ContentBlockStop, 0, llm.EventDelta{}),
			ev(llm.MessageStop, 0, llm.EventDelta{}),
		}
		if diff := cmp.Diff(want, evs); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantData, turn.Data); diff != "" {
			t.Errorf("Data (-want +got):\n%s", diff)
		}
	})
}

func TestReasoning(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		f := newFakeServer(t, jsonReply(t, "reasoning_response.json"), jsonReply(t, "text_response.json"))
		inst := newLLM(t, llm.LLMOptions{Model: Model("gemini-2.5-pro", nil), Config: f.config(),
			Params: map[string]any{"generationConfig": map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true}}}})
		turn, err := inst.Generate(testCtx(t), nil, llm.Text("What is 6 × 7?"))
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		wantContent := []llm.ContentBlock{
			llm.ReasoningBlock{Text: "**Working out the answer**\n\nSix times seven is forty-two."},
			llm.TextBlock{Text: "6 × 7 = 42."},
		}
		if diff := cmp.Diff(wantContent, turn.Response.Content); diff != "" {
			t.Errorf("content (-want +got):\n%s", diff)
		}
		if got := turn.Response.Metadata.Provider(name)["thoughtSignatures"]; !cmp.Equal(got, map[string]any{"c1": "Cs8BAdHtim9fX2Yh2x0Q"}) {
			t.Errorf("thoughtSignatures = %v", got)
		}
		if u := turn.Usage; u.OutputTokens != 143 {
			t.Errorf("output tokens = %d, want candidates + thoughts = 143", u.OutputTokens)
		}
		if _, err := inst.Generate(testCtx(t), turn.Messages, llm.Text("And 6 × 8?")); err != nil {
			t.Fatalf("Generate with history: %v", err)
		}
		checkGolden(t, "reasoning_roundtrip", f.request(1).body)
	})

	t.Run("Stream", func(t *testing.T) {
		f := newFakeServer(t, sseReply(t, "stream_reasoning.sse"))
		inst := newLLM(t, llm.LLMOptions{Model: Model("gemini-2.5-pro", nil), Config: f.config()})
		evs, turn, err := collect(inst.Stream(testCtx(t), nil, llm.Text("What is 6 × 7?")))
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		want := []llm.StreamEvent{
			ev(llm.MessageStart, 0, llm.EventDelta{}),
			ev(llm.ContentBlockStart, 0, llm.EventDelta{}),
			ev(llm.ReasoningDelta, 0, llm.EventDelta{Text: "**Working it out**\n"}),
			ev(llm.ReasoningDelta, 0, llm.EventDelta{Text: "Six times seven is forty-two."}),
			ev(llm.ContentBlockStop, 0, llm.EventDelta{}),
			ev(llm.ContentBlockStart, 1, llm.EventDelta{}),
			ev(llm.TextDelta, 1, llm.EventDelta{Text: "6 × 7"}),
			ev(llm.TextDelta, 1, llm.EventDelta{Text: " = 42."}),
			ev(llm.ContentBlockStop, 1, llm.EventDelta{}),
			ev(llm.MessageStop, 0, llm.EventDelta{}),
		}
		if diff := cmp.Diff(want, evs); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if turn.Response.Reasoning() != "**Working it out**\nSix times seven is forty-two." || turn.Text() != "6 × 7 = 42." {
			t.Errorf("reasoning %q, text %q", turn.Response.Reasoning(), turn.Text())
		}
		// The signature of the final empty part belongs to the text block.
		if got := turn.Response.Metadata.Provider(name)["thoughtSignatures"]; !cmp.Equal(got, map[string]any{"c1": "Cs8BAdHtim9fX2Yh2x0Q"}) {
			t.Errorf("thoughtSignatures = %v", got)
		}
	})
}

func TestMediaRequestMapping(t *testing.T) {
	f := newFakeServer(t, jsonReply(t, "text_response.json"))
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	msg := llm.NewUserMessage(
		llm.Text("Describe these."),
		llm.ImageFromBytes(png, "image/png"),
		llm.ImageFromBytes(png, ""), // MIME type sniffed
		llm.ImageFromBase64("/9j/4AAQSkZJRg==", "image/jpeg"),
		llm.ImageFromURL("https://generativelanguage.googleapis.com/v1beta/files/abc123", "image/webp"),
		llm.DocumentFromBase64("JVBERi0xLjQK", "application/pdf", "Report"),
		llm.DocumentFromText("plain notes", "Notes"),
		llm.DocumentFromURL("https://example.com/paper.pdf", "Paper"),
		llm.AudioFromBytes([]byte("ID3\x03audio"), "audio/mpeg"),
		llm.VideoFromBytes([]byte("\x00\x00\x00\x18ftypmp42"), "video/mp4"),
	)
	inst := newLLM(t, llm.LLMOptions{Config: f.config()})
	if _, err := inst.Generate(testCtx(t), nil, msg); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	checkGolden(t, "media", f.request(0).body)
}

func TestRequestErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		history []llm.Message
		input   llm.Input
		want    string
	}{
		{"BadBase64", nil, llm.ImageFromBase64("not base64!", "image/png"), "invalid base64"},
		{"ImageWithoutMIME", nil, llm.ImageFromBytes([]byte{1, 2, 3}, ""), "no MIME type"},
		{"BinaryWithoutMIME", nil, llm.BinaryBlock{Data: []byte("x")}, "no MIME type"},
		{"ReasoningFromUser", nil, llm.NewUserMessage(llm.ReasoningBlock{Text: "hmm"}), "reasoning"},
		{"OrphanToolResult", []llm.Message{llm.NewUserMessage(llm.Text("hi"))},
			llm.NewToolResultMessage([]llm.ToolResult{{ToolCallID: "nope", Result: "x"}}), "no matching tool call"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t)
			_, err := newLLM(t, llm.LLMOptions{Config: f.config()}).Generate(testCtx(t), c.history, c.input)
			e := errorCode(t, err)
			if e.Code != llm.InvalidRequest || !strings.Contains(e.Message, c.want) {
				t.Errorf("error = %v, want INVALID_REQUEST mentioning %q", err, c.want)
			}
			if f.count() != 0 {
				t.Errorf("%d requests sent", f.count())
			}
		})
	}
}

func TestParamsPassthrough(t *testing.T) {
	f := newFakeServer(t, jsonReply(t, "text_response.json"))
	params := map[string]any{
		"generationConfig": map[string]any{"temperature": 0.7, "maxOutputTokens": 256, "thinkingConfig": map[string]any{"thinkingBudget": 0}},
		"safetySettings":   []any{map[string]any{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}},
		"tools":            []any{map[string]any{"googleSearch": map[string]any{}}},
		"toolConfig":       map[string]any{"functionCallingConfig": map[string]any{"mode": "AUTO"}},
		"cachedContent":    "cachedContents/abc123",
		"contents":         "replaced by the provider",
	}
	before := cloneJSON(t, params)
	inst := newLLM(t, llm.LLMOptions{Config: f.config(), Params: params, Tools: weatherTools(nil)[:1]})
	if _, err := inst.Generate(testCtx(t), nil, llm.Text("Hi")); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if diff := cmp.Diff(before, cloneJSON(t, params)); diff != "" {
		t.Errorf("params were modified (-before +after):\n%s", diff)
	}
	checkGolden(t, "params", f.request(0).body)
}

func TestErrorStatus(t *testing.T) {
	for _, c := range []struct {
		fixture    string
		status     int
		retryAfter string
		code       llm.ErrorCode
		wantAfter  time.Duration
		message    string
	}{
		{"error_unauthenticated.json", 401, "", llm.AuthenticationFailed, 0, "invalid authentication credentials"},
		{"error_api_key.json", 400, "", llm.AuthenticationFailed, 0, "API key not valid"},
		{"error_not_found.json", 404, "", llm.ModelNotFound, 0, "is not found"},
		{"error_context_length.json", 400, "", llm.ContextLengthExceeded, 0, "exceeds the maximum number of tokens"},
		{"error_rate_limit.json", 429, "7", llm.RateLimited, 7 * time.Second, "exceeded your current quota"},
		{"error_internal.json", 500, "", llm.ProviderError, 0, "internal error"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			rep := errorReply(t, c.status, c.fixture)
			if c.retryAfter != "" {
				rep.header["Retry-After"] = c.retryAfter
			}
			f := newFakeServer(t, rep)
			_, err := newLLM(t, llm.LLMOptions{Config: f.config()}).Generate(testCtx(t), nil, llm.Text("Hi"))
			e := errorCode(t, err)
			if e.Code != c.code || e.StatusCode != c.status || e.RetryAfter != c.wantAfter || e.Provider != name {
				t.Errorf("error = %+v, want %s, HTTP %d, RetryAfter %v", e, c.code, c.status, c.wantAfter)
			}
			if !strings.Contains(e.Error(), c.message) {
				t.Errorf("error %q lacks %q", e.Error(), c.message)
			}
			if strings.Contains(e.Error(), testKey) {
				t.Errorf("error %q contains the API key", e.Error())
			}
		})
	}
}

func TestRateLimitRetried(t *testing.T) {
	limited := errorReply(t, 429, "error_rate_limit.json")
	limited.header["Retry-After"] = "30"
	f := newFakeServer(t, limited, jsonReply(t, "text_response.json"))
	cfg := f.config()
	cfg.RetryStrategy = llm.RetryAfter{MaxRetries: 2}
	cfg.RetryAfterMax = 10 * time.Millisecond
	// testCtx ends long before the 30 s asked for, were they not capped.
	turn, err := newLLM(t, llm.LLMOptions{Config: cfg}).Generate(testCtx(t), nil, llm.Text("Hi"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if turn.Text() == "" || f.count() != 2 {
		t.Errorf("text %q after %d requests, want the reply after 2", turn.Text(), f.count())
	}
}

func TestStreamFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		rep  reply
		code llm.ErrorCode
		msg  string
	}{
		{"Malformed", sseReply(t, "stream_malformed.sse"), llm.InvalidResponse, "malformed"},
		{"NoFinishReason", sseReply(t, "stream_truncated.sse"), llm.InvalidResponse, "truncated"},
		{"CutMidEvent", sseReply(t, "stream_cut.sse"), llm.InvalidResponse, "truncated"},
		{"Empty", reply{header: map[string]string{"Content-Type": "text/event-stream"}}, llm.InvalidResponse, "truncated"},
		{"ErrorEvent", sseReply(t, "stream_error.sse"), llm.RateLimited, "Resource has been exhausted"},
		{"PromptBlocked", sseReply(t, "stream_blocked.sse"), llm.ContentFiltered, "prompt blocked: SAFETY"},
		{"HTTP500", errorReply(t, 500, "error_internal.json"), llm.ProviderError, "internal error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t, c.rep)
			_, _, err := collect(newLLM(t, llm.LLMOptions{Config: f.config()}).Stream(testCtx(t), nil, llm.Text("Hi")))
			e := errorCode(t, err)
			if e.Code != c.code || !strings.Contains(e.Message, c.msg) {
				t.Errorf("error = %v, want %s mentioning %q", err, c.code, c.msg)
			}
		})
	}
}

func TestCompleteFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		rep  reply
		code llm.ErrorCode
		msg  string
	}{
		{"PromptBlocked", jsonReply(t, "blocked_prompt.json"), llm.ContentFiltered, "PROHIBITED_CONTENT"},
		{"SafetyFinish", jsonReply(t, "safety_finish.json"), llm.ContentFiltered, "response blocked: SAFETY"},
		{"Malformed", reply{body: `{"candidates": [`}, llm.InvalidResponse, "malformed"},
		{"NoCandidates", reply{body: `{}`}, llm.InvalidResponse, "no candidates"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t, c.rep)
			_, err := newLLM(t, llm.LLMOptions{Config: f.config()}).Generate(testCtx(t), nil, llm.Text("Hi"))
			e := errorCode(t, err)
			if e.Code != c.code || !strings.Contains(e.Message, c.msg) {
				t.Errorf("error = %v, want %s mentioning %q", err, c.code, c.msg)
			}
		})
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}]}}]}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stall) })
	cfg := llm.ProviderConfig{BaseURL: srv.URL, APIKey: llm.StaticKey(testKey), Timeout: 30 * time.Millisecond}
	_, _, err := collect(newLLM(t, llm.LLMOptions{Config: cfg}).Stream(testCtx(t), nil, llm.Text("Hi")))
	if e := errorCode(t, err); e.Code != llm.Timeout {
		t.Errorf("error = %v, want TIMEOUT", err)
	}
}

func TestAPIKey(t *testing.T) {
	t.Run("Missing", func(t *testing.T) {
		t.Setenv("GEMINI_API_KEY", "")
		t.Setenv("GOOGLE_API_KEY", "")
		f := newFakeServer(t)
		cfg := f.config()
		cfg.APIKey = nil
		_, err := newLLM(t, llm.LLMOptions{Config: cfg}).Generate(testCtx(t), nil, llm.Text("Hi"))
		if e := errorCode(t, err); e.Code != llm.AuthenticationFailed || !strings.Contains(e.Message, "GEMINI_API_KEY") {
			t.Errorf("error = %v, want AUTHENTICATION_FAILED naming GEMINI_API_KEY", err)
		}
		if f.count() != 0 {
			t.Errorf("%d requests sent without a key", f.count())
		}
	})
	for _, c := range []struct{ gemini, google, want string }{
		{"gemini-env-key", "google-env-key", "gemini-env-key"},
		{"", "google-env-key", "google-env-key"},
	} {
		t.Run("Env"+c.want, func(t *testing.T) {
			t.Setenv("GEMINI_API_KEY", c.gemini)
			t.Setenv("GOOGLE_API_KEY", c.google)
			f := newFakeServer(t, jsonReply(t, "text_response.json"))
			cfg := f.config()
			cfg.APIKey = nil
			if _, err := newLLM(t, llm.LLMOptions{Config: cfg}).Generate(testCtx(t), nil, llm.Text("Hi")); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got := f.request(0).header.Get("x-goog-api-key"); got != c.want {
				t.Errorf("x-goog-api-key = %q, want %q", got, c.want)
			}
		})
	}
}

type countingTransport struct{ n int }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	return http.DefaultTransport.RoundTrip(r)
}

func TestProviderConfig(t *testing.T) {
	f := newFakeServer(t, jsonReply(t, "text_response.json"))
	transport := &countingTransport{}
	bound := f.config()
	bound.Headers = map[string]string{"X-Bound": "model", "X-Both": "model"}
	ref := Model("gemini-2.5-flash", &Options{Config: &bound})
	explicit := llm.ProviderConfig{
		HTTPClient: &http.Client{Transport: transport},
		Headers:    map[string]string{"X-Both": "explicit", "X-Goog-Api-Client": "agentry-test"},
	}
	inst := newLLM(t, llm.LLMOptions{Model: ref, Config: explicit})
	if _, err := inst.Generate(testCtx(t), nil, llm.Text("Hi")); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	h := f.request(0).header
	for k, want := range map[string]string{"X-Bound": "model", "X-Both": "explicit", "X-Goog-Api-Client": "agentry-test", "X-Goog-Api-Key": testKey} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if transport.n != 1 {
		t.Errorf("custom transport used %d times, want 1", transport.n)
	}
	if got := ref.String(); got != "gemini:gemini-2.5-flash" {
		t.Errorf("ref = %q", got)
	}
}
