package anthropic

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/llm"
)

// sseOf writes events in the Messages API stream format.
func sseOf(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: ")
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.String()
}

const (
	evStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`
	evStop  = `{"type":"message_stop"}`
)

func decodeAll(t *testing.T, stream string, mode outputMode) ([]llm.StreamEvent, *llm.Response, error) {
	t.Helper()
	var evs []llm.StreamEvent
	m, err := decodeStream(strings.NewReader(stream), mode, func(ev llm.StreamEvent) { evs = append(evs, ev) })
	if err != nil {
		return evs, nil, err
	}
	resp, err := toResponse(m, mode)
	return evs, resp, err
}

func TestStreamThinkingEvents(t *testing.T) {
	evs, resp, err := decodeAll(t, readFixture(t, "stream_thinking.sse"), outputNone)
	if err != nil {
		t.Fatal(err)
	}
	const id = "toolu_01CswdEQBMshySk6Y9DFKrfq"
	want := []llm.StreamEvent{
		{Type: llm.MessageStart},
		{Type: llm.ContentBlockStart},
		{Type: llm.ReasoningDelta, Delta: llm.EventDelta{Text: "The user wants the weather in Paris."}},
		{Type: llm.ReasoningDelta, Delta: llm.EventDelta{Text: " I should call get_weather."}},
		{Type: llm.ContentBlockStop},
		{Type: llm.ContentBlockStart, Index: 1},
		{Type: llm.ContentBlockStop, Index: 1},
		{Type: llm.ContentBlockStart, Index: 2},
		{Type: llm.TextDelta, Index: 2, Delta: llm.EventDelta{Text: "Let me check the weather."}},
		{Type: llm.ContentBlockStop, Index: 2},
		{Type: llm.ContentBlockStart, Index: 3, Delta: llm.EventDelta{ToolCallID: id, ToolName: "get_weather"}},
		{Type: llm.ToolCallDelta, Index: 3, Delta: llm.EventDelta{ToolCallID: id, ToolName: "get_weather", ArgumentsJSON: `{"location": "Paris, France"}`}},
		{Type: llm.ContentBlockStop, Index: 3},
		{Type: llm.MessageStop},
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	md := resp.Message.Metadata.Provider(name)
	sig := md["reasoning"].([]any)[0].(map[string]any)["signature"]
	if sig != "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" {
		t.Errorf("accumulated signature = %v", sig)
	}
}

func TestStreamProtocolErrors(t *testing.T) {
	text := `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	tool := `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`
	for name, stream := range map[string]string{
		"delta before start":     sseOf(evStart, `{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}`, evStop),
		"stop before start":      sseOf(evStart, `{"type":"content_block_stop","index":0}`, evStop),
		"text delta on tool":     sseOf(evStart, tool, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`, evStop),
		"json delta on text":     sseOf(evStart, text, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`, evStop),
		"signature on text":      sseOf(evStart, text, `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`, evStop),
		"block twice":            sseOf(evStart, text, text, evStop),
		"negative index":         sseOf(evStart, `{"type":"content_block_start","index":-1,"content_block":{"type":"text","text":""}}`, evStop),
		"no index":               sseOf(evStart, `{"type":"content_block_start","content_block":{"type":"text","text":""}}`, evStop),
		"delta without delta":    sseOf(evStart, text, `{"type":"content_block_delta","index":0}`, evStop),
		"content before start":   sseOf(text, evStop),
		"stop without start":     sseOf(evStop),
		"two message starts":     sseOf(evStart, evStart, evStop),
		"start without message":  sseOf(`{"type":"message_start"}`, evStop),
		"not json":               "data: [1,2\n\n",
		"json but not an object": "data: 42\n\n",
		"no message_stop":        sseOf(evStart, text, `{"type":"content_block_stop","index":0}`),
		"cut mid-event":          sseOf(evStart) + "data: {\"type\":\"message_stop\"}",
		"unnamed tool":           sseOf(evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","input":{}}}`, evStop),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := decodeAll(t, stream, outputNone)
			var e *llm.Error
			if !errors.As(err, &e) || e.Code != llm.InvalidResponse {
				t.Errorf("error = %v, want INVALID_RESPONSE", err)
			}
		})
	}
}

func TestStreamErrorEvents(t *testing.T) {
	for _, tc := range []struct {
		event string
		code  llm.ErrorCode
	}{
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.ProviderError},
		{`{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`, llm.RateLimited},
		{`{"type":"error","error":{"type":"api_error","message":"Internal"}}`, llm.ProviderError},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 1 tokens > 0 maximum"}}`, llm.ContextLengthExceeded},
		{`{"type":"error","error":{"type":"something_new","message":"?"}}`, llm.ProviderError},
		{`{"type":"error"}`, llm.ProviderError},
	} {
		_, _, err := decodeAll(t, sseOf(evStart, tc.event), outputNone)
		var e *llm.Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%s: error = %v, want %s", tc.event, err, tc.code)
		}
	}
}

func TestStreamLenience(t *testing.T) {
	stream := "event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		sseOf(
			evStart,
			`{"type":"some_future_event","payload":1}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}}`,
			`{"type":"content_block_stop","index":1}`,
			// A tool whose whole input comes with its start, and no id.
			`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","name":"f","input":{"a": 1}}}`,
			`{"type":"content_block_stop","index":2}`,
			// A tool whose arguments are not an object.
			`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_g","name":"g","input":{}}}`,
			`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"[1,"}}`,
			`{"type":"content_block_delta","index":3,"delta":{"type":"future_delta","x":1}}`,
			`{"type":"content_block_stop","index":3}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":7,"cache_read_input_tokens":4}}`,
		) + "event: message_stop\ndata: {}\n\n" // type from the SSE event name
	evs, resp, err := decodeAll(t, stream, outputNone)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	if calls[0].ToolName != "f" || !strings.HasPrefix(calls[0].ToolCallID, "toolu_") || len(calls[0].ToolCallID) < 20 ||
		cmp.Diff(map[string]any{"a": float64(1)}, calls[0].Arguments) != "" {
		t.Errorf("call 0 = %+v", calls[0])
	}
	if calls[1].Arguments != nil || calls[1].RawArguments != "[1," {
		t.Errorf("call 1 = %+v", calls[1])
	}
	var args []string
	for _, ev := range evs {
		if ev.Type == llm.ToolCallDelta {
			args = append(args, ev.Delta.ArgumentsJSON)
		}
	}
	if diff := cmp.Diff([]string{`{"a":1}`, "[1,"}, args); diff != "" {
		t.Errorf("argument deltas (-want +got):\n%s", diff)
	}
	want := llm.TokenUsage{InputTokens: 9, OutputTokens: 7, TotalTokens: 16, CacheReadTokens: 4}
	if diff := cmp.Diff(want, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if resp.StopReason != "tool_use" {
		t.Errorf("stop reason = %q", resp.StopReason)
	}
}

func TestStreamReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := iotest.ErrReader(boom)
	_, err := decodeStream(r, outputNone, func(llm.StreamEvent) {})
	if !errors.Is(err, boom) {
		t.Errorf("error = %v, want the read error unchanged", err)
	}
}

func TestResponseToolArguments(t *testing.T) {
	m, err := decodeResponse([]byte(`{"type":"message","id":"msg_1","content":[
		{"type":"tool_use","name":"a","input":{"x":1}},
		{"type":"tool_use","id":"toolu_b","name":"b","input":null},
		{"type":"tool_use","id":"toolu_c","name":"c","input":"text"},
		{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}},
		{"type":"text","text":""}
	],"stop_reason":"tool_use"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := toResponse(m, outputNone)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Message.ToolCalls
	if len(c) != 3 || c[0].ToolCallID == "" || c[1].Arguments == nil || len(c[1].Arguments) != 0 ||
		c[2].Arguments != nil || c[2].RawArguments != `"text"` || len(resp.Message.Content) != 0 {
		t.Errorf("calls = %+v, content = %+v", c, resp.Message.Content)
	}
	// An error body delivered with a 2xx status is still an error.
	_, err = decodeResponse([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	var e *llm.Error
	if !errors.As(err, &e) || e.Code != llm.ProviderError {
		t.Errorf("error body: %v", err)
	}
}

// TestReasoningSurvivesJSON checks that reasoning data still goes back
// after the message has been through its JSON form (a stored thread).
func TestReasoningSurvivesJSON(t *testing.T) {
	m, err := decodeResponse([]byte(readFixture(t, "response_thinking.json")))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := toResponse(m, outputNone)
	if err != nil {
		t.Fatal(err)
	}
	data, err := resp.Message.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := llm.UnmarshalMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := convertMessages([]llm.Message{resp.Message})
	if err != nil {
		t.Fatal(err)
	}
	got, err := convertMessages([]llm.Message{back})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after JSON (-want +got):\n%s", diff)
	}
	blocks := got[0].(map[string]any)["content"].([]any)
	if len(blocks) != 4 || blocks[0].(map[string]any)["type"] != "thinking" || blocks[1].(map[string]any)["type"] != "redacted_thinking" {
		t.Errorf("blocks = %v", blocks)
	}
}
