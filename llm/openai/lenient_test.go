package openai

import (
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm/internal/providertest"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/llm"
)

// Compatible servers take liberties with the wire format; these streams
// and bodies are decoded all the same.

func TestLenientResponsesStream(t *testing.T) {
	// No event names, no output_item.added, a call announced only when
	// done, and a final response without output.
	const stream = `data: {"type":"response.created","response":{"id":"r1","status":"in_progress"}}

data: {"type":"response.reasoning_text.delta","output_index":0,"item_id":"rs_1","delta":"think"}

data: {"type":"response.output_text.delta","output_index":1,"item_id":"m1","delta":"Hi"}

data: {"type":"response.output_text.delta","output_index":1,"item_id":"m1","delta":" there"}

data: {"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{\"a\":1}"}}

data: {"type":"response.completed","response":{"id":"r1","status":"completed","model":"m","output":[],"usage":{"input_tokens":3,"output_tokens":4}}}

`
	var log eventLog
	resp, err := decodeResponsesStream(strings.NewReader(stream), decodeOptions{provider: "openai"}, log.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"message_start", "content_block_start 0", "reasoning_delta 0 think", "content_block_stop 0",
		"content_block_start 1", "text_delta 1 Hi", "text_delta 1  there", "content_block_stop 1",
		"content_block_start 2 call_1 f", `tool_call_delta 2 call_1 f {"a":1}`, "content_block_stop 2", "message_stop"}
	if diff := cmp.Diff(want, simplified(log.evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantContent := []llm.ContentBlock{llm.ReasoningBlock{Text: "think"}, llm.TextBlock{Text: "Hi there"}}
	if diff := cmp.Diff(wantContent, resp.Message.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	wantCalls := []llm.ToolCall{{ToolCallID: "call_1", ToolName: "f", Arguments: map[string]any{"a": float64(1)}}}
	providertest.CheckArgumentsJSON(t, resp.Message.ToolCalls)
	if diff := cmp.Diff(wantCalls, resp.Message.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	wantItems := []any{
		map[string]any{"type": "reasoning", "id": "rs_1", "content": []any{map[string]any{"type": "reasoning_text", "text": "think"}}},
		map[string]any{"type": "message", "id": "m1"},
		map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1"},
	}
	if diff := cmp.Diff(wantItems, resp.Message.Metadata.Provider("openai")["items"]); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if resp.Usage.TotalTokens != 7 || resp.StopReason != "completed" {
		t.Errorf("usage %+v, stop %q", resp.Usage, resp.StopReason)
	}
}

func TestLenientChatStream(t *testing.T) {
	// vLLM's "reasoning" field, tool calls without index, no usage chunk.
	const stream = `data: {"id":"c1","model":"m","choices":[{"delta":{"role":"assistant","reasoning":"hmm"}}]}

data: {"id":"c1","choices":[{"delta":{"tool_calls":[{"id":"call_a","function":{"name":"f","arguments":"{\"x\""}}]}}]}

data: {"id":"c1","choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}

data: {"id":"c1","choices":[{"delta":{"tool_calls":[{"id":"call_b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	var log eventLog
	resp, err := decodeChatStream(strings.NewReader(stream), decodeOptions{provider: "vllm"}, log.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"message_start", "content_block_start 0", "reasoning_delta 0 hmm", "content_block_stop 0",
		"content_block_start 1 call_a f", `tool_call_delta 1 call_a f {"x"`, "tool_call_delta 1 call_a f :1}", "content_block_stop 1",
		"content_block_start 2 call_b g", "tool_call_delta 2 call_b g {}", "content_block_stop 2", "message_stop"}
	if diff := cmp.Diff(want, simplified(log.evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantCalls := []llm.ToolCall{
		{ToolCallID: "call_a", ToolName: "f", Arguments: map[string]any{"x": float64(1)}},
		{ToolCallID: "call_b", ToolName: "g", Arguments: map[string]any{}},
	}
	providertest.CheckArgumentsJSON(t, resp.Message.ToolCalls)
	if diff := cmp.Diff(wantCalls, resp.Message.ToolCalls, providertest.IgnoreArgumentsJSON); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	meta := resp.Message.Metadata.Provider("vllm")
	if resp.Message.Reasoning() != "hmm" || meta["reasoning_field"] != "reasoning" || resp.StopReason != "tool_calls" {
		t.Errorf("reasoning %q, metadata %v, stop %q", resp.Message.Reasoning(), meta, resp.StopReason)
	}
}

func TestChatContentForms(t *testing.T) {
	o := decodeOptions{provider: "openai"}
	for _, c := range []struct {
		body, text, refusal string
	}{
		{`{"choices":[{"index":0,"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`, "ab", ""},
		{`{"choices":[{"index":0,"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`, "I can't help with that.", "I can't help with that."},
		{`{"choices":[{"message":{"content":"x"}}]}`, "x", ""},
	} {
		resp, err := decodeChatResponse([]byte(c.body), o)
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if resp.Message.Text() != c.text {
			t.Errorf("%s: text %q, want %q", c.body, resp.Message.Text(), c.text)
		}
		if got, _ := resp.Message.Metadata.Provider("openai")["refusal"].(string); got != c.refusal {
			t.Errorf("%s: refusal %q, want %q", c.body, got, c.refusal)
		}
	}
	if _, err := decodeChatResponse([]byte(`{"choices":[{"message":{"content":7}}]}`), o); err == nil {
		t.Error("numeric content decoded")
	}
}

func TestErrorCodes(t *testing.T) {
	for _, c := range []struct {
		body string
		msg  string
		code llm.ErrorCode
	}{
		{`{"error":{"message":"m","type":"insufficient_quota","code":"project_spend_limit_exceeded"}}`, "m", llm.QuotaExceeded},
		{`{"error":{"message":"m","type":"insufficient_quota","code":null}}`, "m", llm.QuotaExceeded},
		{`{"error":{"message":"m","type":"image_generation_user_error","code":"content_policy_violation"}}`, "m", llm.ContentFiltered},
		{`{"error":{"message":"m","type":"invalid_request_error","code":"rate_limit_exceeded"}}`, "m", llm.RateLimited},
		{`{"error":{"message":"m","type":"invalid_request_error","code":"invalid_value"}}`, "m", ""},
		{`{"error":"plain string error"}`, "plain string error", ""},
		{`{"object":"error","message":"top level","type":"BadRequestError","code":400}`, "top level", ""},
		{`not json`, "", ""},
	} {
		msg, code := parseError(400, []byte(c.body))
		if msg != c.msg || code != c.code {
			t.Errorf("%s: (%q, %q), want (%q, %q)", c.body, msg, code, c.msg, c.code)
		}
	}
	for _, c := range []struct {
		ve   vendorError
		code llm.ErrorCode
	}{
		{vendorError{Message: "m", Code: []byte(`"server_error"`)}, llm.ProviderError},
		{vendorError{Message: "m", Code: []byte(`"invalid_prompt"`)}, llm.InvalidRequest},
		{vendorError{Message: "m", Type: "invalid_request_error"}, llm.InvalidRequest},
		{vendorError{Message: "m", Code: []byte(`502`)}, llm.ProviderError},
		{vendorError{Code: []byte(`"vector_store_timeout"`)}, llm.Timeout},
	} {
		e := streamError("openai", &c.ve)
		if e.Code != c.code || e.Message == "" {
			t.Errorf("%+v: %v, want %s", c.ve, e, c.code)
		}
	}
}
