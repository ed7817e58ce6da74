package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/llmtest"
)

// TestConformance runs the UPP conformance kit against a fake Messages API
// server, once per structured-output method.
func TestConformance(t *testing.T) {
	for _, method := range []StructuredOutput{StructuredOutputTool, StructuredOutputNative} {
		t.Run(string(method), func(t *testing.T) {
			llmtest.Run(t, func(t *testing.T) llmtest.Target { return newConformanceTarget(t, method) })
		})
	}
}

// conformanceVendor speaks the Messages API wire format for llmtest.
type conformanceVendor struct{ method StructuredOutput }

func newConformanceTarget(t *testing.T, method StructuredOutput) llmtest.Target {
	tg := llmtest.NewServer(t, conformanceVendor{method})
	tg.Model = Model("claude-conformance", &Options{StructuredOutput: method})
	tg.Config.APIKey = llm.StaticKey("conformance-key")
	tg.Params = map[string]any{"max_tokens": 1024} // the Messages API requires it
	tg.Reasoning = true
	return tg
}

func (conformanceVendor) Observe(r *http.Request, raw []byte) (llmtest.Observed, error) {
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return llmtest.Observed{}, fmt.Errorf("request body is not JSON: %v", err)
	}
	return observe(body), nil
}

func (v conformanceVendor) WriteReply(w http.ResponseWriter, obs llmtest.Observed, rep llmtest.Reply) {
	// With the tool method a structured request carries the json_response
	// tool (observe counts it as Structured), so the object comes back as
	// its input.
	msg := renderMessage(rep, v.method == StructuredOutputTool && obs.Structured)
	if obs.Stream {
		writeStream(w, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(msg)
}

func (conformanceVendor) WriteError(w http.ResponseWriter, rep llmtest.Reply) {
	writeAPIError(w, rep.Status, rep.ErrorMessage)
}

func writeAPIError(w http.ResponseWriter, status int, message string) {
	typ := "invalid_request_error"
	switch {
	case status == 401:
		typ = "authentication_error"
	case status == 403:
		typ = "permission_error"
	case status == 404:
		typ = "not_found_error"
	case status == 413:
		typ = "request_too_large"
	case status == 429:
		typ = "rate_limit_error"
	case status == 529:
		typ = "overloaded_error"
	case status >= 500:
		typ = "api_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type": "error", "error": map[string]any{"type": typ, "message": message}, "request_id": "req_conformance",
	})
}

func hasJSONResponseTool(body map[string]any) bool {
	tools, _ := body["tools"].([]any)
	for _, t := range tools {
		if m, _ := t.(map[string]any); m["name"] == jsonResponseTool {
			return true
		}
	}
	return false
}

// observe decodes what the kit checks from a request body.
func observe(body map[string]any) llmtest.Observed {
	obs := llmtest.Observed{Params: map[string]any{}}
	obs.Stream, _ = body["stream"].(bool)
	switch sys := body["system"].(type) {
	case string:
		obs.System = sys
	case []any:
		obs.System = strings.Join(texts(sys), "\n\n")
	}
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		m, _ := m.(map[string]any)
		content, _ := m["content"].([]any)
		if s, ok := m["content"].(string); ok {
			content = []any{map[string]any{"type": "text", "text": s}}
		}
		for _, b := range content {
			b, _ := b.(map[string]any)
			switch b["type"] {
			case "text":
				text, _ := b["text"].(string)
				if m["role"] == "user" {
					obs.UserTexts = append(obs.UserTexts, text)
				} else {
					obs.AssistantTexts = append(obs.AssistantTexts, text)
				}
			case "tool_use":
				id, _ := b["id"].(string)
				obs.ToolCallIDs = append(obs.ToolCallIDs, id)
			case "tool_result":
				id, _ := b["tool_use_id"].(string)
				isErr, _ := b["is_error"].(bool)
				var result string
				switch c := b["content"].(type) {
				case string:
					result = c
				case []any:
					result = strings.Join(texts(c), "")
				}
				obs.ToolResults = append(obs.ToolResults, llm.ToolResult{ToolCallID: id, Result: result, IsError: isErr})
			}
		}
	}
	tools, _ := body["tools"].([]any)
	for _, t := range tools {
		t, _ := t.(map[string]any)
		name, _ := t["name"].(string)
		if _, fn := t["input_schema"]; fn && name != jsonResponseTool {
			obs.Tools = append(obs.Tools, name)
		}
	}
	cfg, _ := body["output_config"].(map[string]any)
	obs.Structured = cfg["format"] != nil || body["output_format"] != nil || hasJSONResponseTool(body)
	for k, v := range body {
		switch k {
		case "model", "messages", "system", "stream", "tools", "tool_choice", "output_format":
		default:
			obs.Params[k] = v
		}
	}
	return obs
}

func texts(blocks []any) []string {
	var out []string
	for _, b := range blocks {
		if m, _ := b.(map[string]any); m["type"] == "text" {
			s, _ := m["text"].(string)
			out = append(out, s)
		}
	}
	return out
}

// renderMessage builds the Messages API message for a reply.
func renderMessage(rep llmtest.Reply, toolMethod bool) map[string]any {
	var content []any
	if rep.Reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": rep.Reasoning, "signature": "sig-" + strconv.Itoa(len(rep.Reasoning))})
	}
	switch {
	case rep.Object != "" && !toolMethod:
		content = append(content, map[string]any{"type": "text", "text": rep.Object})
	case rep.Text != "":
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	stop := "end_turn"
	for i, c := range rep.ToolCalls {
		id := c.ToolCallID
		if id == "" {
			id = fmt.Sprintf("toolu_conformance_%d", i)
		}
		args := c.Arguments
		if args == nil {
			args = map[string]any{}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": id, "name": c.ToolName, "input": args})
		stop = "tool_use"
	}
	if rep.Object != "" && toolMethod {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_conformance_json", "name": jsonResponseTool, "input": json.RawMessage(rep.Object)})
		stop = "tool_use"
	}
	if content == nil {
		content = []any{}
	}
	return map[string]any{
		"id": "msg_conformance", "type": "message", "role": "assistant", "model": "claude-conformance",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": rep.OutputTokens},
	}
}

// halves splits s in two at a rune boundary, so that every text streams in
// more than one delta.
func halves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	i := len(s) / 2
	for i < len(s) && !utf8Start(s[i]) {
		i++
	}
	return []string{s[:i], s[i:]}
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// writeStream sends msg as a Messages API event stream.
func writeStream(w http.ResponseWriter, msg map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	send := func(v map[string]any) {
		data, _ := json.Marshal(v)
		sse.Write(w, sse.Event{Type: v["type"].(string), Data: data})
		if flusher != nil {
			flusher.Flush()
		}
	}
	usage := msg["usage"].(map[string]any)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]any{"input_tokens": usage["input_tokens"], "output_tokens": 1}
	send(map[string]any{"type": "message_start", "message": start})
	send(map[string]any{"type": "ping"})
	for i, b := range msg["content"].([]any) {
		b := b.(map[string]any)
		delta := func(d map[string]any) { send(map[string]any{"type": "content_block_delta", "index": i, "delta": d}) }
		switch b["type"] {
		case "text":
			send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range halves(b["text"].(string)) {
				delta(map[string]any{"type": "text_delta", "text": part})
			}
		case "thinking":
			send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, part := range halves(b["thinking"].(string)) {
				delta(map[string]any{"type": "thinking_delta", "thinking": part})
			}
			delta(map[string]any{"type": "signature_delta", "signature": b["signature"]})
		case "tool_use":
			send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{
				"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			input, _ := json.Marshal(b["input"])
			for _, part := range halves(string(input)) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": part})
			}
		}
		send(map[string]any{"type": "content_block_stop", "index": i})
	}
	send(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": usage["output_tokens"]}})
	send(map[string]any{"type": "message_stop"})
}
