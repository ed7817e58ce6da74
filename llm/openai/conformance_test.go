package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/llmtest"
)

func TestConformance(t *testing.T) {
	forEachAPI(t, func(t *testing.T, api API, dir string) {
		llmtest.Run(t, func(t *testing.T) llmtest.Target { return newKitTarget(t, api) })
	})
}

// kitVendor speaks the API's wire format for llmtest.
type kitVendor struct{ api API }

func newKitTarget(t *testing.T, api API) llmtest.Target {
	tg := llmtest.NewServer(t, kitVendor{api})
	tg.Model = testModel(api)
	tg.Config.APIKey = llm.StaticKey("test-key")
	tg.Reasoning = true
	return tg
}

func (k kitVendor) Observe(r *http.Request, raw []byte) (llmtest.Observed, error) {
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return llmtest.Observed{}, fmt.Errorf("request body is not JSON: %v", err)
	}
	return observe(k.api, body), nil
}

func (k kitVendor) WriteReply(w http.ResponseWriter, obs llmtest.Observed, rep llmtest.Reply) {
	switch {
	case obs.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		if k.api == ChatCompletions {
			writeChatSSE(w, rep, obs.Structured)
		} else {
			writeResponsesSSE(w, rep, obs.Structured)
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		if k.api == ChatCompletions {
			json.NewEncoder(w).Encode(chatKitReply(rep, obs.Structured))
		} else {
			json.NewEncoder(w).Encode(responsesKitReply(rep, obs.Structured))
		}
	}
}

func (kitVendor) WriteError(w http.ResponseWriter, rep llmtest.Reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.Status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": rep.ErrorMessage, "type": "error", "param": nil, "code": nil}})
}

// observe decodes what the kit checks from a request body.
func observe(api API, body map[string]any) llmtest.Observed {
	obs := llmtest.Observed{Stream: body["stream"] == true, Params: map[string]any{}}
	own := map[string]bool{"model": true, "tools": true, "stream": true}
	if api == ChatCompletions {
		for _, k := range []string{"messages", "response_format", "stream_options"} {
			own[k] = true
		}
		_, obs.Structured = body["response_format"]
		for _, m := range list(body["messages"]) {
			msg, _ := m.(map[string]any)
			switch msg["role"] {
			case "system":
				obs.System, _ = msg["content"].(string)
			case "user":
				obs.UserTexts = append(obs.UserTexts, partsText(msg["content"], "text"))
			case "assistant":
				if s := partsText(msg["content"], "text"); s != "" {
					obs.AssistantTexts = append(obs.AssistantTexts, s)
				}
				for _, c := range list(msg["tool_calls"]) {
					id, _ := c.(map[string]any)["id"].(string)
					obs.ToolCallIDs = append(obs.ToolCallIDs, id)
				}
			case "tool":
				id, _ := msg["tool_call_id"].(string)
				obs.ToolResults = append(obs.ToolResults, llm.ToolResult{ToolCallID: id, Result: msg["content"]})
			}
		}
		for _, x := range list(body["tools"]) {
			fn, _ := x.(map[string]any)["function"].(map[string]any)
			name, _ := fn["name"].(string)
			obs.Tools = append(obs.Tools, name)
		}
	} else {
		for _, k := range []string{"input", "instructions", "text"} {
			own[k] = true
		}
		obs.System, _ = body["instructions"].(string)
		text, _ := body["text"].(map[string]any)
		format, _ := text["format"].(map[string]any)
		obs.Structured = format["type"] == "json_schema"
		for _, x := range list(body["input"]) {
			item, _ := x.(map[string]any)
			switch {
			case item["role"] == "user":
				obs.UserTexts = append(obs.UserTexts, partsText(item["content"], "input_text"))
			case item["role"] == "assistant":
				obs.AssistantTexts = append(obs.AssistantTexts, partsText(item["content"], "output_text"))
			case item["type"] == "function_call":
				id, _ := item["call_id"].(string)
				obs.ToolCallIDs = append(obs.ToolCallIDs, id)
			case item["type"] == "function_call_output":
				id, _ := item["call_id"].(string)
				obs.ToolResults = append(obs.ToolResults, llm.ToolResult{ToolCallID: id, Result: item["output"]})
			}
		}
		for _, x := range list(body["tools"]) {
			if tool, _ := x.(map[string]any); tool["type"] == "function" {
				name, _ := tool["name"].(string)
				obs.Tools = append(obs.Tools, name)
			}
		}
	}
	for k, v := range body {
		if !own[k] {
			obs.Params[k] = v
		}
	}
	return obs
}

func list(v any) []any { l, _ := v.([]any); return l }

// partsText returns string content, or the text of the parts of type typ.
func partsText(content any, typ string) string {
	if s, ok := content.(string); ok {
		return s
	}
	var b strings.Builder
	for _, p := range list(content) {
		if part, _ := p.(map[string]any); part["type"] == typ {
			s, _ := part["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

func replyText(rep llmtest.Reply, structured bool) string {
	if structured {
		return rep.Object
	}
	return rep.Text
}

func argsJSON(c llm.ToolCall) string {
	b, _ := json.Marshal(c.Arguments)
	return string(b)
}

// fragments splits s into up to three streamed pieces.
func fragments(s string) []string {
	if len(s) < 3 {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	a, b := len(s)/3, 2*len(s)/3
	return []string{s[:a], s[a:b], s[b:]}
}

func chatKitReply(rep llmtest.Reply, structured bool) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if text := replyText(rep, structured); text != "" {
		msg["content"] = text
	}
	if rep.Reasoning != "" {
		msg["reasoning_content"] = rep.Reasoning
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
		var calls []any
		for _, c := range rep.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ToolCallID, "type": "function",
				"function": map[string]any{"name": c.ToolName, "arguments": argsJSON(c)}})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{"id": "chatcmpl-kit", "object": "chat.completion", "model": "gpt-kit",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": rep.InputTokens, "completion_tokens": rep.OutputTokens, "total_tokens": rep.InputTokens + rep.OutputTokens}}
}

func writeSSE(w io.Writer, event string, v any) {
	data, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
}

func writeChatSSE(w io.Writer, rep llmtest.Reply, structured bool) {
	chunk := func(delta map[string]any, finish any, usage any) map[string]any {
		c := map[string]any{"id": "chatcmpl-kit", "object": "chat.completion.chunk", "model": "gpt-kit", "choices": []any{}}
		if delta != nil {
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		}
		if usage != nil {
			c["usage"] = usage
		}
		return c
	}
	writeSSE(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil))
	for _, f := range fragments(rep.Reasoning) {
		writeSSE(w, "", chunk(map[string]any{"reasoning_content": f}, nil, nil))
	}
	for _, f := range fragments(replyText(rep, structured)) {
		writeSSE(w, "", chunk(map[string]any{"content": f}, nil, nil))
	}
	finish := "stop"
	for i, c := range rep.ToolCalls {
		finish = "tool_calls"
		writeSSE(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ToolCallID, "type": "function",
			"function": map[string]any{"name": c.ToolName, "arguments": ""}}}}, nil, nil))
		for _, f := range fragments(argsJSON(c)) {
			writeSSE(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": f}}}}, nil, nil))
		}
	}
	writeSSE(w, "", chunk(map[string]any{}, finish, nil))
	writeSSE(w, "", chunk(nil, nil, map[string]any{"prompt_tokens": rep.InputTokens, "completion_tokens": rep.OutputTokens}))
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// responsesKitItems returns the reply's output items.
func responsesKitItems(rep llmtest.Reply, structured bool) []map[string]any {
	var items []map[string]any
	if rep.Reasoning != "" {
		items = append(items, map[string]any{"type": "reasoning", "id": "rs_kit", "encrypted_content": "enc",
			"summary": []any{map[string]any{"type": "summary_text", "text": rep.Reasoning}}})
	}
	if text := replyText(rep, structured); text != "" {
		items = append(items, map[string]any{"type": "message", "id": "msg_kit", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	for i, c := range rep.ToolCalls {
		items = append(items, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_kit_%d", i), "call_id": c.ToolCallID,
			"name": c.ToolName, "arguments": argsJSON(c), "status": "completed"})
	}
	return items
}

func responsesKitReply(rep llmtest.Reply, structured bool) map[string]any {
	return map[string]any{"id": "resp_kit", "object": "response", "status": "completed", "model": "gpt-kit",
		"output": responsesKitItems(rep, structured),
		"usage":  map[string]any{"input_tokens": rep.InputTokens, "output_tokens": rep.OutputTokens, "total_tokens": rep.InputTokens + rep.OutputTokens}}
}

func writeResponsesSSE(w io.Writer, rep llmtest.Reply, structured bool) {
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		writeSSE(w, typ, fields)
	}
	ev("response.created", map[string]any{"response": map[string]any{"id": "resp_kit", "status": "in_progress", "output": []any{}}})
	for i, item := range responsesKitItems(rep, structured) {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		id := item["id"]
		switch item["type"] {
		case "reasoning":
			added["summary"] = []any{}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, f := range fragments(rep.Reasoning) {
				ev("response.reasoning_summary_text.delta", map[string]any{"output_index": i, "item_id": id, "summary_index": 0, "delta": f})
			}
		case "message":
			added["content"] = []any{}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, f := range fragments(replyText(rep, structured)) {
				ev("response.output_text.delta", map[string]any{"output_index": i, "item_id": id, "content_index": 0, "delta": f})
			}
		case "function_call":
			added["arguments"] = ""
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, f := range fragments(item["arguments"].(string)) {
				ev("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": id, "delta": f})
			}
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": responsesKitReply(rep, structured)})
}
