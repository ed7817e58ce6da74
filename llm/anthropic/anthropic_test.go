package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/llm/internal/providertest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentry-dev/agentry/llm"
)

func TestPlainReply(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_text.json"))
	m := newLLM(t, f, llm.LLMOptions{
		System: "You are terse.",
		Params: map[string]any{"max_tokens": 256, "temperature": 0.2},
	}, nil)
	turn, err := m.Generate(context.Background(), nil, llm.Text("Hello"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := turn.Text(), "Hello! How can I help you today?"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	wantUsage := llm.TokenUsage{
		InputTokens: 12, OutputTokens: 10, TotalTokens: 22, CacheReadTokens: 2048, CacheWriteTokens: 100,
		Cycles: []llm.CycleUsage{{InputTokens: 12, OutputTokens: 10, CacheReadTokens: 2048, CacheWriteTokens: 100}},
	}
	if diff := cmp.Diff(wantUsage, turn.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	wantMD := map[string]any{
		"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "model": "claude-sonnet-4-5-20250929",
		"stop_reason": "end_turn", "stop_sequence": nil,
	}
	if diff := cmp.Diff(wantMD, turn.Response.Metadata.Provider(name)); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}

	reqs := f.reqs()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", r.method, r.path)
	}
	for k, want := range map[string]string{
		"X-Api-Key": "test-key", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json",
		"Anthropic-Beta": "",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	checkGolden(t, "plain", r.raw)
}

func TestToolRoundTrip(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_tool_calls.json"), jsonReply(t, "response_final.json"))
	var calls atomic.Int32
	weather := llm.Tool{
		Name:        "get_weather",
		Description: "Current weather for a location.",
		Parameters:  llm.MustSchema(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`),
		Metadata:    map[string]any{name: map[string]any{"cache_control": map[string]any{"type": "ephemeral"}, "name": "ignored"}},
		Run: func(_ context.Context, args map[string]any) (any, error) {
			calls.Add(1)
			if args["location"] != "Paris, France" {
				t.Errorf("get_weather args = %v", args)
			}
			return map[string]any{"temp_c": 18, "sky": "sunny"}, nil
		},
	}
	clock := llm.Tool{
		Name:       "get_time",
		Parameters: llm.MustSchema(`{"type":"object","properties":{"timezone":{"type":"string"}}}`),
		Run: func(_ context.Context, args map[string]any) (any, error) {
			calls.Add(1)
			return "14:05", nil
		},
	}
	m := newLLM(t, f, llm.LLMOptions{Tools: []llm.Tool{weather, clock}}, nil)
	turn, err := m.Generate(context.Background(), nil, llm.Text("Weather and time in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || len(turn.ToolExecutions) != 2 || turn.Cycles != 2 {
		t.Errorf("calls = %d, executions = %d, cycles = %d; want 2, 2, 2", calls.Load(), len(turn.ToolExecutions), turn.Cycles)
	}
	if !strings.Contains(turn.Text(), "14:05") {
		t.Errorf("final text = %q", turn.Text())
	}
	first := turn.Messages[1].(*llm.AssistantMessage)
	wantCalls := []llm.ToolCall{
		{ToolCallID: "toolu_01A09q90qw90lq917835lq9", ToolName: "get_weather", Arguments: map[string]any{"location": "Paris, France", "unit": "celsius"}},
		{ToolCallID: "toolu_01B8j3mZ8c4Qf3rVJq1y2K7x", ToolName: "get_time", Arguments: map[string]any{"timezone": "Europe/Paris"}},
	}
	providertest.CheckArgumentsJSON(t, first.ToolCalls)
	if diff := cmp.Diff(wantCalls, first.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	reqs := f.reqs()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	checkGolden(t, "tools_first", reqs[0].raw)
	checkGolden(t, "tools_results", reqs[1].raw)
}

func TestStreamText(t *testing.T) {
	f := newFake(t, sseReply(t, "stream_text.sse"))
	m := newLLM(t, f, llm.LLMOptions{}, nil)
	s := m.Stream(context.Background(), nil, llm.Text("Hello"))
	evs := collect(t, s)
	want := []llm.StreamEvent{
		{Type: llm.MessageStart},
		{Type: llm.ContentBlockStart},
		{Type: llm.TextDelta, Delta: llm.EventDelta{Text: "Hello!"}},
		{Type: llm.TextDelta, Delta: llm.EventDelta{Text: " How can I help you today?"}},
		{Type: llm.ContentBlockStop},
		{Type: llm.MessageStop},
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	turn, err := s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() != "Hello! How can I help you today?" || turn.Usage.OutputTokens != 10 || turn.Usage.CacheReadTokens != 2048 {
		t.Errorf("turn text %q, usage %+v", turn.Text(), turn.Usage)
	}
	r := f.reqs()[0]
	if r.body["stream"] != true || r.header.Get("Accept") != "text/event-stream" {
		t.Errorf("stream = %v, Accept = %q", r.body["stream"], r.header.Get("Accept"))
	}
}

func TestStreamToolCalls(t *testing.T) {
	f := newFake(t, sseReply(t, "stream_tool_calls.sse"), sseReply(t, "stream_final.sse"))
	run := func(context.Context, map[string]any) (any, error) { return "ok", nil }
	m := newLLM(t, f, llm.LLMOptions{Tools: []llm.Tool{
		{Name: "get_weather", Parameters: llm.Schema{"type": "object"}, Run: run},
		{Name: "get_time", Parameters: llm.Schema{"type": "object"}, Run: run},
	}}, nil)
	s := m.Stream(context.Background(), nil, llm.Text("Weather and time in Paris?"))
	evs := providerEvents(collect(t, s))
	const w, c = "toolu_01A09q90qw90lq917835lq9", "toolu_01B8j3mZ8c4Qf3rVJq1y2K7x"
	want := []llm.StreamEvent{
		{Type: llm.MessageStart},
		{Type: llm.ContentBlockStart},
		{Type: llm.TextDelta, Delta: llm.EventDelta{Text: "I'll look up the weather"}},
		{Type: llm.TextDelta, Delta: llm.EventDelta{Text: " and the local time."}},
		{Type: llm.ContentBlockStop},
		{Type: llm.ContentBlockStart, Index: 1, Delta: llm.EventDelta{ToolCallID: w, ToolName: "get_weather"}},
		{Type: llm.ToolCallDelta, Index: 1, Delta: llm.EventDelta{ToolCallID: w, ToolName: "get_weather", ArgumentsJSON: `{"location": "Paris, France"`}},
		{Type: llm.ToolCallDelta, Index: 1, Delta: llm.EventDelta{ToolCallID: w, ToolName: "get_weather", ArgumentsJSON: `, "unit": "celsius"}`}},
		{Type: llm.ContentBlockStop, Index: 1},
		{Type: llm.ContentBlockStart, Index: 2, Delta: llm.EventDelta{ToolCallID: c, ToolName: "get_time"}},
		{Type: llm.ToolCallDelta, Index: 2, Delta: llm.EventDelta{ToolCallID: c, ToolName: "get_time", ArgumentsJSON: `{"timezone": "Europe/Paris"}`}},
		{Type: llm.ContentBlockStop, Index: 2},
		{Type: llm.MessageStop},
		// second cycle
		{Type: llm.MessageStart},
		{Type: llm.ContentBlockStart},
		{Type: llm.TextDelta, Delta: llm.EventDelta{Text: "It is 18°C and sunny in Paris, "}},
		{Type: llm.TextDelta, Delta: llm.EventDelta{Text: "and the local time is 14:05."}},
		{Type: llm.ContentBlockStop},
		{Type: llm.MessageStop},
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	turn, err := s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	if len(turn.ToolExecutions) != 2 || turn.Cycles != 2 {
		t.Errorf("executions = %d, cycles = %d", len(turn.ToolExecutions), turn.Cycles)
	}
	// The streamed history goes back exactly as the non-streamed one does.
	if len(f.reqs()) != 2 {
		t.Fatalf("%d requests", len(f.reqs()))
	}
	checkGolden(t, "stream_tools_results", f.reqs()[1].raw)
}

// TestStreamMatchesComplete checks that a stream assembles the same
// response as the equivalent non-streamed reply.
func TestStreamMatchesComplete(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode outputMode
	}{
		{"text", outputNone},
		{"tool_calls", outputNone},
		{"final", outputNone},
		{"thinking", outputNone},
		{"structured_tool", outputTool},
		{"structured_native", outputNative},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := decodeResponse([]byte(readFixture(t, "response_"+tc.name+".json")))
			if err != nil {
				t.Fatal(err)
			}
			want, err := toResponse(m, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			sm, err := decodeStream(strings.NewReader(readFixture(t, "stream_"+tc.name+".sse")), tc.mode, func(llm.StreamEvent) {})
			if err != nil {
				t.Fatal(err)
			}
			got, err := toResponse(sm, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			ignore := cmpopts.IgnoreFields(llm.MessageInfo{}, "ID", "Timestamp")
			if diff := cmp.Diff(want, got, ignore); diff != "" {
				t.Errorf("streamed response differs (-complete +stream):\n%s", diff)
			}
		})
	}
}

var personSchema = llm.MustSchema(`{"type":"object","properties":{"name":{"type":"string"},"born":{"type":"integer"}},"required":["name","born"],"additionalProperties":false}`)

func TestStructuredOutputTool(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_structured_tool.json"))
	m := newLLM(t, f, llm.LLMOptions{Structure: personSchema}, nil)
	turn, err := m.Generate(context.Background(), nil, llm.Text("Who wrote the first program?"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "Ada Lovelace", "born": float64(1815)}
	if diff := cmp.Diff(any(want), turn.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if turn.Response.HasToolCalls() {
		t.Errorf("json_response returned as a tool call: %+v", turn.Response.ToolCalls)
	}
	if got := turn.Text(); got != `{"name":"Ada Lovelace","born":1815}` {
		t.Errorf("text = %q", got)
	}
	checkGolden(t, "structured_tool", f.reqs()[0].raw)
}

func TestStructuredOutputToolWithTools(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_structured_tool.json"))
	m := newLLM(t, f, llm.LLMOptions{
		Structure: personSchema,
		Tools:     []llm.Tool{{Name: "lookup", Parameters: llm.Schema{"type": "object"}, Run: func(context.Context, map[string]any) (any, error) { return "", nil }}},
	}, nil)
	if _, err := m.Generate(context.Background(), nil, llm.Text("Who?")); err != nil {
		t.Fatal(err)
	}
	body := f.reqs()[0].body
	if diff := cmp.Diff(map[string]any{"type": "any"}, body["tool_choice"]); diff != "" {
		t.Errorf("tool_choice (-want +got):\n%s", diff)
	}
	if n := len(body["tools"].([]any)); n != 2 {
		t.Errorf("%d tools, want 2", n)
	}
}

func TestStructuredOutputToolStream(t *testing.T) {
	f := newFake(t, sseReply(t, "stream_structured_tool.sse"))
	m := newLLM(t, f, llm.LLMOptions{Structure: personSchema}, nil)
	s := m.Stream(context.Background(), nil, llm.Text("Who wrote the first program?"))
	want := []llm.StreamEvent{
		{Type: llm.MessageStart},
		{Type: llm.ContentBlockStart},
		{Type: llm.ObjectDelta, Delta: llm.EventDelta{Text: `{"name": "Ada Lovelace"`}},
		{Type: llm.ObjectDelta, Delta: llm.EventDelta{Text: `, "born": 1815}`}},
		{Type: llm.ContentBlockStop},
		{Type: llm.MessageStop},
	}
	if diff := cmp.Diff(want, collect(t, s)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	turn, err := s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(any(map[string]any{"name": "Ada Lovelace", "born": float64(1815)}), turn.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}

func TestStructuredOutputNative(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_structured_native.json"), sseReply(t, "stream_structured_native.sse"))
	m := newLLM(t, f, llm.LLMOptions{
		Structure: personSchema,
		Params:    map[string]any{"max_tokens": 512, "output_config": map[string]any{"effort": "low"}},
	}, &Options{StructuredOutput: StructuredOutputNative})
	turn, err := m.Generate(context.Background(), nil, llm.Text("Who wrote the first program?"))
	if err != nil {
		t.Fatal(err)
	}
	want := any(map[string]any{"name": "Ada Lovelace", "born": float64(1815)})
	if diff := cmp.Diff(want, turn.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	r := f.reqs()[0]
	if got := r.header.Get("Anthropic-Beta"); got != "" {
		t.Errorf("anthropic-beta = %q, want none", got)
	}
	checkGolden(t, "structured_native", r.raw)

	s := m.Stream(context.Background(), nil, llm.Text("Who wrote the first program?"))
	var objects []string
	for _, ev := range collect(t, s) {
		if ev.Type == llm.TextDelta {
			t.Errorf("native structured output streamed a text_delta: %+v", ev)
		}
		if ev.Type == llm.ObjectDelta {
			objects = append(objects, ev.Delta.Text)
		}
	}
	if got := strings.Join(objects, ""); got != `{"name":"Ada Lovelace","born":1815}` {
		t.Errorf("object deltas = %q", got)
	}
	turn, err = s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, turn.Data); diff != "" {
		t.Errorf("streamed data (-want +got):\n%s", diff)
	}
}

func TestStructuredOutputNativeBeta(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_structured_native.json"))
	m := newLLM(t, f, llm.LLMOptions{Structure: personSchema},
		&Options{StructuredOutput: StructuredOutputNativeBeta, Betas: []string{"interleaved-thinking-2025-05-14"}})
	turn, err := m.Generate(context.Background(), nil, llm.Text("Who?"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Data == nil {
		t.Error("no data")
	}
	r := f.reqs()[0]
	if got, want := r.header.Get("Anthropic-Beta"), "interleaved-thinking-2025-05-14,structured-outputs-2025-11-13"; got != want {
		t.Errorf("anthropic-beta = %q, want %q", got, want)
	}
	checkGolden(t, "structured_native_beta", r.raw)
}

func TestStructuredOutputErrors(t *testing.T) {
	f := newFake(t)
	m := newLLM(t, f, llm.LLMOptions{Structure: llm.Schema{"type": "array"}}, nil)
	_, err := m.Generate(context.Background(), nil, llm.Text("x"))
	if e := asError(t, err); e.Code != llm.InvalidRequest {
		t.Errorf("array schema with the tool method: %v", e)
	}
	m = newLLM(t, f, llm.LLMOptions{Structure: personSchema, Tools: []llm.Tool{
		{Name: "json_response", Run: func(context.Context, map[string]any) (any, error) { return nil, nil }},
	}}, nil)
	_, err = m.Generate(context.Background(), nil, llm.Text("x"))
	if e := asError(t, err); e.Code != llm.InvalidRequest {
		t.Errorf("reserved tool name: %v", e)
	}
	if _, err := Provider.LLMHandler(Model("m", &Options{StructuredOutput: "json"})); asError(t, err).Code != llm.InvalidRequest {
		t.Errorf("unknown method: %v", err)
	}
	if len(f.reqs()) != 0 {
		t.Errorf("%d requests sent", len(f.reqs()))
	}
}

func TestReasoningRoundTrip(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_thinking.json"), jsonReply(t, "response_final.json"))
	params := map[string]any{"max_tokens": 16000, "thinking": map[string]any{"type": "enabled", "budget_tokens": 10000}}
	m := newLLM(t, f, llm.LLMOptions{
		Params: params,
		Tools: []llm.Tool{{Name: "get_weather", Parameters: llm.Schema{"type": "object"},
			Run: func(context.Context, map[string]any) (any, error) { return "18°C, sunny", nil }}},
	}, nil)
	turn, err := m.Generate(context.Background(), nil, llm.Text("Weather in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	first := turn.Messages[1].(*llm.AssistantMessage)
	wantContent := []llm.ContentBlock{
		llm.ReasoningBlock{Text: "The user wants the weather in Paris. I should call get_weather."},
		llm.ReasoningBlock{},
		llm.TextBlock{Text: "Let me check the weather."},
	}
	if diff := cmp.Diff(wantContent, first.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	wantMD := map[string]any{
		"id": "msg_01Th1nk1ngW1thT00ls", "model": "claude-sonnet-4-5-20250929", "stop_reason": "tool_use", "stop_sequence": nil,
		"reasoning": []any{
			map[string]any{"type": "thinking", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
			map[string]any{"type": "redacted_thinking", "redacted": true, "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
		},
	}
	if diff := cmp.Diff(wantMD, first.Metadata.Provider(name)); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	// The second request carries the thinking blocks back, signed, in order.
	checkGolden(t, "reasoning_round_trip", f.reqs()[1].raw)
}

func TestReasoningStream(t *testing.T) {
	f := newFake(t, sseReply(t, "stream_thinking.sse"))
	m := newLLM(t, f, llm.LLMOptions{}, nil)
	s := m.Stream(context.Background(), nil, llm.Text("Weather in Paris?"))
	var reasoning []string
	for _, ev := range collect(t, s) {
		if ev.Type == llm.ReasoningDelta {
			reasoning = append(reasoning, ev.Delta.Text)
		}
	}
	if diff := cmp.Diff([]string{"The user wants the weather in Paris.", " I should call get_weather."}, reasoning); diff != "" {
		t.Errorf("reasoning deltas (-want +got):\n%s", diff)
	}
	turn, err := s.Turn()
	if err != nil {
		t.Fatal(err)
	}
	if got := turn.Response.Reasoning(); !strings.HasPrefix(got, "The user wants the weather in Paris. I should call get_weather.") {
		t.Errorf("reasoning = %q", got)
	}
}

// TestReasoningFromElsewhere checks that reasoning blocks without Anthropic
// data are left out while metadata of other providers is kept aside.
func TestReasoningFromElsewhere(t *testing.T) {
	a := llm.NewAssistantMessage([]llm.ContentBlock{llm.ReasoningBlock{Text: "foreign"}, llm.TextBlock{Text: "Hi."}}, nil)
	a.Metadata = llm.Metadata{"openai": map[string]any{"id": "resp_1"}}
	msgs, err := convertMessages([]llm.Message{llm.NewUserMessage(llm.Text("a")), a, llm.NewUserMessage(llm.Text("b"))})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "a"}}},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Hi."}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "b"}}},
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestMessagesMapping(t *testing.T) {
	pdf := []byte("%PDF-1.7\n1 0 obj\n")
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	history := []llm.Message{
		llm.NewUserMessage(
			llm.Text("Describe these."),
			llm.ImageFromBase64("iVBORw0KGgo=", "image/png"),
			llm.ImageFromBytes(png, ""), // sniffed
			llm.ImageFromURL("https://example.com/cat.jpg", "image/jpeg"),
			llm.DocumentBlock{Source: llm.Source{Type: llm.SourceBytes, Bytes: pdf}, MimeType: "application/pdf", Title: "Spec"},
			llm.DocumentFromURL("https://example.com/paper.pdf", ""),
			llm.DocumentFromText("Plain notes.", "Notes"),
			llm.DocumentFromBase64("aGVsbG8=", "text/plain; charset=utf-8", ""),
		),
		llm.NewUserMessage(llm.Text("Second user message, merged.")),
		llm.NewAssistantMessage([]llm.ContentBlock{llm.TextBlock{Text: ""}, llm.TextBlock{Text: "Calling."}}, []llm.ToolCall{
			{ToolCallID: "toolu_1", ToolName: "a", Arguments: map[string]any{"x": 1.0}},
			{ToolCallID: "toolu_2", ToolName: "b", RawArguments: "not json"},
		}),
		llm.NewToolResultMessage([]llm.ToolResult{
			{ToolCallID: "toolu_1", Result: map[string]any{"ok": true}},
			{ToolCallID: "toolu_2", Result: "boom", IsError: true},
		}),
		llm.NewUserMessage(llm.Text("And now?")),
	}
	f := newFake(t, jsonReply(t, "response_text.json"))
	m := newLLM(t, f, llm.LLMOptions{}, nil)
	if _, err := m.Generate(context.Background(), history); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "messages_mapping", f.reqs()[0].raw)
}

func TestUnsupportedContent(t *testing.T) {
	f := newFake(t)
	m := newLLM(t, f, llm.LLMOptions{}, nil)
	for name, msgs := range map[string][]llm.Message{
		"binary":          {llm.NewUserMessage(llm.BinaryBlock{Data: []byte{1}, MimeType: "application/octet-stream"})},
		"reasoning input": {llm.NewUserMessage(llm.ReasoningBlock{Text: "x"})},
		"docx": {llm.NewUserMessage(llm.DocumentFromBase64("UEsDBA==",
			"application/vnd.openxmlformats-officedocument.wordprocessingml.document", ""))},
		"image without type":     {llm.NewUserMessage(llm.ImageFromBase64("AAAA", ""))},
		"assistant image":        {llm.NewUserMessage(llm.Text("x")), llm.NewAssistantMessage([]llm.ContentBlock{llm.ImageFromURL("https://x/y.png", "")}, nil)},
		"image with text source": {llm.NewUserMessage(llm.ImageBlock{Source: llm.Source{Type: llm.SourceText, Data: "x"}})},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := m.Generate(context.Background(), msgs)
			if e := asError(t, err); e.Code != llm.InvalidRequest {
				t.Errorf("code = %s: %v", e.Code, e)
			}
		})
	}
	// The core rejects audio and video itself, from the capabilities.
	for _, b := range []llm.ContentBlock{llm.AudioFromBytes([]byte{1}, "audio/wav"), llm.VideoFromBytes([]byte{1}, "video/mp4")} {
		if _, err := m.Generate(context.Background(), nil, b); asError(t, err).Code != llm.InvalidRequest {
			t.Errorf("%T: %v", b, err)
		}
		// And the provider does too, when called directly.
		h, _ := Provider.LLMHandler(Model("m", nil))
		_, err := h.Complete(context.Background(), &llm.Request{ModelID: "m", Messages: []llm.Message{llm.NewUserMessage(b)}, Params: map[string]any{"max_tokens": 1}})
		if e := asError(t, err); e.Code != llm.InvalidRequest || !strings.Contains(e.Message, string(b.BlockType())) {
			t.Errorf("direct %T: %v", b, e)
		}
	}
	if len(f.reqs()) != 0 {
		t.Errorf("%d requests sent", len(f.reqs()))
	}
}

func TestParamsPassthrough(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_text.json"))
	params := map[string]any{
		"max_tokens":     100,
		"temperature":    0.7,
		"top_k":          5,
		"stop_sequences": []any{"\n\nHuman:"},
		"metadata":       map[string]any{"user_id": "u-42"},
		"system":         []any{map[string]any{"type": "text", "text": "Native system.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"tools":          []any{map[string]any{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}},
		"tool_choice":    map[string]any{"type": "auto", "disable_parallel_tool_use": true},
		"stream":         true, // UPP owns the stream flag
		"x_future_field": map[string]any{"nested": []any{1.0, "two"}},
	}
	m := newLLM(t, f, llm.LLMOptions{
		Params: params,
		Tools:  []llm.Tool{{Name: "calc", Description: "Adds.", Run: func(context.Context, map[string]any) (any, error) { return 0, nil }}},
	}, &Options{Betas: []string{"token-efficient-tools-2025-02-19"}})
	if _, err := m.Generate(context.Background(), nil, llm.Text("Hi")); err != nil {
		t.Fatal(err)
	}
	r := f.reqs()[0]
	if got := r.header.Get("Anthropic-Beta"); got != "token-efficient-tools-2025-02-19" {
		t.Errorf("anthropic-beta = %q", got)
	}
	checkGolden(t, "params_passthrough", r.raw)
	if len(params["tools"].([]any)) != 1 {
		t.Error("params tools were modified")
	}
}

func TestMaxTokensRequired(t *testing.T) {
	f := newFake(t)
	m := newLLM(t, f, llm.LLMOptions{Params: map[string]any{"temperature": 1}}, nil)
	_, err := m.Generate(context.Background(), nil, llm.Text("Hi"))
	e := asError(t, err)
	if e.Code != llm.InvalidRequest || !strings.Contains(e.Message, "anthropic requires params max_tokens") {
		t.Errorf("error = %v", e)
	}
	if len(f.reqs()) != 0 {
		t.Fatalf("%d requests sent", len(f.reqs()))
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		status  int
		fixture string
		code    llm.ErrorCode
	}{
		{401, "authentication_error", llm.AuthenticationFailed},
		{403, "permission_error", llm.AuthenticationFailed},
		{404, "not_found_error", llm.ModelNotFound},
		{429, "rate_limit_error", llm.RateLimited},
		{429, "spend_limit_error", llm.QuotaExceeded},
		{402, "billing_error", llm.QuotaExceeded},
		{413, "request_too_large", llm.ContextLengthExceeded},
		{400, "prompt_too_long", llm.ContextLengthExceeded},
		{400, "invalid_request_error", llm.InvalidRequest},
		{500, "api_error", llm.ProviderError},
		{529, "overloaded_error", llm.ProviderError},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			f := newFake(t, errorReply(t, tc.status, tc.fixture))
			m := newLLM(t, f, llm.LLMOptions{Config: llm.ProviderConfig{APIKey: llm.StaticKey("sk-ant-secret-key")}}, nil)
			_, err := m.Generate(context.Background(), nil, llm.Text("Hi"))
			e := asError(t, err)
			if e.Code != tc.code || e.StatusCode != tc.status || e.Provider != name {
				t.Errorf("got %s (HTTP %d, provider %q), want %s (HTTP %d)", e.Code, e.StatusCode, e.Provider, tc.code, tc.status)
			}
			if !strings.Contains(e.Message, "_error: ") && !strings.Contains(e.Message, "request_too_large: ") ||
				!strings.Contains(e.Message, "(request req_011CSHoEeqs5C35K2UUqR7") {
				t.Errorf("message %q lacks the vendor's error", e.Message)
			}
			if strings.Contains(e.Error(), "sk-ant-secret-key") {
				t.Errorf("error leaks the key: %v", e)
			}
		})
	}
	// A body that is not Anthropic's error form keeps the status mapping.
	f := newFake(t, reply{status: 502, body: "<html>bad gateway</html>"})
	_, err := newLLM(t, f, llm.LLMOptions{}, nil).Generate(context.Background(), nil, llm.Text("Hi"))
	if e := asError(t, err); e.Code != llm.ProviderError || !strings.Contains(e.Message, "bad gateway") {
		t.Errorf("502: %v", e)
	}
}

func TestRateLimitRetryAfter(t *testing.T) {
	limited := errorReply(t, 429, "rate_limit_error")
	limited.headers = map[string]string{"Retry-After": "7"}

	f := newFake(t, limited)
	_, err := newLLM(t, f, llm.LLMOptions{}, nil).Generate(context.Background(), nil, llm.Text("Hi"))
	e := asError(t, err)
	if e.Code != llm.RateLimited || e.RetryAfter != 7*time.Second {
		t.Errorf("got %s, RetryAfter %v; want RATE_LIMITED, 7s", e.Code, e.RetryAfter)
	}

	// With a strategy the request is retried (waits capped to stay fast).
	f = newFake(t, limited, jsonReply(t, "response_text.json"))
	m := newLLM(t, f, llm.LLMOptions{Config: llm.ProviderConfig{
		RetryStrategy: llm.RetryAfter{}, RetryAfterMax: 5 * time.Millisecond,
	}}, nil)
	turn, err := m.Generate(context.Background(), nil, llm.Text("Hi"))
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text() == "" || len(f.reqs()) != 2 {
		t.Errorf("text %q after %d requests", turn.Text(), len(f.reqs()))
	}
}

func TestStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply reply
		code  llm.ErrorCode
	}{
		{"malformed", sseReply(t, "stream_malformed.sse"), llm.InvalidResponse},
		{"truncated", sseReply(t, "stream_truncated.sse"), llm.InvalidResponse},
		{"empty", reply{status: 200, sse: true}, llm.InvalidResponse},
		{"overloaded event", sseReply(t, "stream_error.sse"), llm.ProviderError},
		{"rate limit event", reply{status: 200, sse: true, body: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n"}, llm.RateLimited},
		{"http error", errorReply(t, 529, "overloaded_error"), llm.ProviderError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := newLLM(t, f, llm.LLMOptions{}, nil).Stream(ctx, nil, llm.Text("Hi"))
			var last error
			for _, err := range s.Events() {
				last = err
			}
			e := asError(t, last)
			if e.Code != tc.code {
				t.Errorf("code = %s, want %s: %v", e.Code, tc.code, e)
			}
			if _, err := s.Turn(); err == nil {
				t.Error("Turn succeeded")
			}
		})
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	first := strings.SplitAfter(readFixture(t, "stream_text.sse"), "\n\n")[0]
	f := newFake(t, reply{status: 200, sse: true, body: first, partial: true})
	m := newLLM(t, f, llm.LLMOptions{Config: llm.ProviderConfig{Timeout: 50 * time.Millisecond}}, nil)
	_, err := m.Stream(context.Background(), nil, llm.Text("Hi")).Turn()
	if e := asError(t, err); e.Code != llm.Timeout {
		t.Errorf("code = %s: %v", e.Code, e)
	}
}

func TestCancel(t *testing.T) {
	f := newFake(t, reply{hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := newLLM(t, f, llm.LLMOptions{}, nil).Generate(ctx, nil, llm.Text("Hi"))
	if e := asError(t, err); e.Code != llm.Cancelled {
		t.Errorf("code = %s: %v", e.Code, e)
	}
}

func TestMalformedResponse(t *testing.T) {
	for name, body := range map[string]string{
		"not json":     "{",
		"not message":  `{"type":"completion"}`,
		"no content":   `{"type":"message","id":"msg_1"}`,
		"unnamed tool": `{"type":"message","content":[{"type":"tool_use","id":"t","input":{}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, reply{status: 200, body: body})
			_, err := newLLM(t, f, llm.LLMOptions{}, nil).Generate(context.Background(), nil, llm.Text("Hi"))
			if e := asError(t, err); e.Code != llm.InvalidResponse {
				t.Errorf("code = %s: %v", e.Code, e)
			}
		})
	}
}

func TestMissingKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	f := newFake(t)
	inst, err := llm.LLM(&llm.LLMOptions{Model: Model("claude-haiku-4-5", nil), Config: llm.ProviderConfig{BaseURL: f.srv.URL}, Params: map[string]any{"max_tokens": 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = inst.Generate(context.Background(), nil, llm.Text("Hi"))
	if e := asError(t, err); e.Code != llm.AuthenticationFailed || !strings.Contains(e.Message, "ANTHROPIC_API_KEY") {
		t.Errorf("error = %v", e)
	}
	if len(f.reqs()) != 0 {
		t.Errorf("%d requests sent", len(f.reqs()))
	}

	// From the environment.
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	f = newFake(t, jsonReply(t, "response_text.json"))
	inst, _ = llm.LLM(&llm.LLMOptions{Model: Model("claude-haiku-4-5", nil), Config: llm.ProviderConfig{BaseURL: f.srv.URL}, Params: map[string]any{"max_tokens": 1}})
	if _, err := inst.Generate(context.Background(), nil, llm.Text("Hi")); err != nil {
		t.Fatal(err)
	}
	if got := f.reqs()[0].header.Get("X-Api-Key"); got != "env-key" {
		t.Errorf("x-api-key = %q", got)
	}
}

type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestConfig(t *testing.T) {
	f := newFake(t, jsonReply(t, "response_text.json"), jsonReply(t, "response_text.json"))
	tr := &countingTransport{}
	m := newLLM(t, f, llm.LLMOptions{Config: llm.ProviderConfig{
		BaseURL:    f.srv.URL + "/",
		APIVersion: "2099-01-01",
		HTTPClient: &http.Client{Transport: tr},
		Headers:    map[string]string{"X-Trace": "t-1"},
	}}, &Options{Betas: []string{"a", "b"}})
	if _, err := m.Generate(context.Background(), nil, llm.Text("Hi")); err != nil {
		t.Fatal(err)
	}
	r := f.reqs()[0]
	if r.path != "/v1/messages" || r.header.Get("Anthropic-Version") != "2099-01-01" ||
		r.header.Get("X-Trace") != "t-1" || r.header.Get("Anthropic-Beta") != "a,b" || tr.n.Load() != 1 {
		t.Errorf("path %q, headers %v, transport calls %d", r.path, r.header, tr.n.Load())
	}
	// Configured headers win over the provider's.
	m = newLLM(t, f, llm.LLMOptions{Config: llm.ProviderConfig{Headers: map[string]string{"anthropic-version": "custom"}}}, nil)
	if _, err := m.Generate(context.Background(), nil, llm.Text("Hi")); err != nil {
		t.Fatal(err)
	}
	if got := f.reqs()[1].header.Get("Anthropic-Version"); got != "custom" {
		t.Errorf("anthropic-version = %q", got)
	}
}

func TestModelOptions(t *testing.T) {
	opts := &Options{Betas: []string{"x"}}
	ref := Model("claude-opus-4-1", opts)
	opts.Betas[0] = "changed"
	if got := ref.Options.(Options).Betas[0]; got != "x" {
		t.Errorf("Model kept a reference to the caller's options: %q", got)
	}
	if ref.Provider.Name() != "anthropic" || ref.Provider.Version() == "" || ref.String() != "anthropic:claude-opus-4-1" {
		t.Errorf("ref = %v", ref)
	}
	for _, o := range []any{nil, Options{}, &Options{}, (*Options)(nil)} {
		if _, err := Provider.LLMHandler(llm.ModelReference{ModelID: "m", Provider: Provider, Options: o}); err != nil {
			t.Errorf("options %#v: %v", o, err)
		}
	}
	if _, err := Provider.LLMHandler(llm.ModelReference{ModelID: "m", Provider: Provider, Options: 3}); !errors.Is(err, llm.InvalidRequest) {
		t.Errorf("bad options: %v", err)
	}
	h, _ := Provider.LLMHandler(ref)
	want := llm.LLMCapabilities{Streaming: true, Tools: true, StructuredOutput: true, ImageInput: true, DocumentInput: true}
	if diff := cmp.Diff(want, h.Capabilities()); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
}
