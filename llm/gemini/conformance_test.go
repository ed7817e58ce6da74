package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/llmtest"
)

func TestConformance(t *testing.T) {
	llmtest.Run(t, newConformanceTarget)
}

// conformanceVendor speaks the Gemini wire format for llmtest: it renders
// scripted replies as generateContent answers or SSE streams and decodes
// each request into an llmtest.Observed.
type conformanceVendor struct {
	n atomic.Int64 // replies written, for their responseId
}

func newConformanceTarget(t *testing.T) llmtest.Target {
	tg := llmtest.NewServer(t, &conformanceVendor{})
	tg.Model = Model("gemini-conformance", nil)
	tg.Config.APIKey = llm.StaticKey(testKey)
	tg.Reasoning = true
	return tg
}

var grpcStatus = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

func (*conformanceVendor) Observe(r *http.Request, data []byte) (llmtest.Observed, error) {
	var errs []error
	stream := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
	if !stream && !strings.HasSuffix(r.URL.Path, ":generateContent") {
		errs = append(errs, fmt.Errorf("unexpected path %s", r.URL.Path))
	}
	if stream && r.URL.Query().Get("alt") != "sse" {
		errs = append(errs, fmt.Errorf("streaming request without alt=sse: %s", r.URL))
	}
	if r.Header.Get("x-goog-api-key") != testKey {
		errs = append(errs, fmt.Errorf("x-goog-api-key = %q", r.Header.Get("x-goog-api-key")))
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		errs = append(errs, fmt.Errorf("request body is not a JSON object: %v", err))
	}
	return observe(body, stream), errors.Join(errs...)
}

func (*conformanceVendor) WriteError(w http.ResponseWriter, rep llmtest.Reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.Status)
	e := map[string]any{"code": rep.Status, "message": rep.ErrorMessage, "status": grpcStatus[rep.Status]}
	if rep.RetryAfter > 0 {
		e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%ds", int(rep.RetryAfter.Seconds()))}}
	}
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (v *conformanceVendor) WriteReply(w http.ResponseWriter, obs llmtest.Observed, rep llmtest.Reply) {
	n := int(v.n.Add(1))
	usage := map[string]any{"promptTokenCount": rep.InputTokens, "candidatesTokenCount": rep.OutputTokens, "totalTokenCount": rep.InputTokens + rep.OutputTokens}
	chunks := replyChunks(rep)
	if !obs.Stream {
		var parts []any
		for _, c := range chunks {
			parts = append(parts, c...)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(responseJSON(parts, "STOP", usage, n))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, c := range chunks {
		finish := ""
		var u map[string]any
		if i == len(chunks)-1 {
			finish, u = "STOP", usage
		}
		b, _ := json.Marshal(responseJSON(c, finish, u, n))
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		w.(http.Flusher).Flush()
	}
}

// replyChunks splits a reply into the parts of successive stream chunks.
func replyChunks(rep llmtest.Reply) [][]any {
	var chunks [][]any
	text := func(s string, thought bool) {
		for _, piece := range splitText(s) {
			p := map[string]any{"text": piece}
			if thought {
				p["thought"] = true
			}
			chunks = append(chunks, []any{p})
		}
	}
	text(rep.Reasoning, true)
	text(rep.Text, false)
	text(rep.Object, false)
	if len(rep.ToolCalls) > 0 {
		var calls []any
		for i, c := range rep.ToolCalls {
			fc := map[string]any{"name": c.ToolName, "args": c.Arguments}
			if c.ToolCallID != "" {
				fc["id"] = c.ToolCallID
			}
			p := map[string]any{"functionCall": fc}
			if i == 0 {
				p["thoughtSignature"] = "c2lnbmF0dXJl"
			}
			calls = append(calls, p)
		}
		chunks = append(chunks, calls)
	}
	if len(chunks) == 0 {
		chunks = append(chunks, []any{map[string]any{"text": ""}})
	}
	return chunks
}

// splitText cuts s into two pieces (one when it is short).
func splitText(s string) []string {
	if s == "" {
		return nil
	}
	r := []rune(s)
	if len(r) < 4 {
		return []string{s}
	}
	return []string{string(r[:len(r)/2]), string(r[len(r)/2:])}
}

func responseJSON(parts []any, finish string, usage map[string]any, n int) map[string]any {
	c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		c["finishReason"] = finish
	}
	out := map[string]any{"candidates": []any{c}, "modelVersion": "gemini-conformance", "responseId": fmt.Sprintf("resp-%d", n)}
	if usage != nil {
		out["usageMetadata"] = usage
	}
	return out
}

// observe decodes a generateContent request body.
func observe(body map[string]any, stream bool) llmtest.Observed {
	obs := llmtest.Observed{Stream: stream, Params: map[string]any{}}
	for k, v := range body {
		switch k {
		case "contents", "systemInstruction", "tools":
		default:
			obs.Params[k] = v
		}
	}
	if si, ok := body["systemInstruction"].(map[string]any); ok {
		obs.System = strings.Join(texts(si["parts"], false), "")
	}
	contents, _ := body["contents"].([]any)
	for _, c := range contents {
		c, _ := c.(map[string]any)
		role, _ := c["role"].(string)
		parts, _ := c["parts"].([]any)
		if t := texts(parts, false); len(t) > 0 {
			if role == "model" {
				obs.AssistantTexts = append(obs.AssistantTexts, strings.Join(t, ""))
			} else {
				obs.UserTexts = append(obs.UserTexts, strings.Join(t, ""))
			}
		}
		for _, p := range parts {
			p, _ := p.(map[string]any)
			if fc, ok := p["functionCall"].(map[string]any); ok {
				id, _ := fc["id"].(string)
				obs.ToolCallIDs = append(obs.ToolCallIDs, id)
			}
			if fr, ok := p["functionResponse"].(map[string]any); ok {
				id, _ := fr["id"].(string)
				resp, _ := fr["response"].(map[string]any)
				r := llm.ToolResult{ToolCallID: id, Result: llm.ResultText(resp)}
				if v, ok := resp["output"]; ok && len(resp) == 1 {
					r.Result = llm.ResultText(v)
				}
				if v, ok := resp["error"]; ok && len(resp) == 1 {
					r.Result, r.IsError = llm.ResultText(v), true
				}
				obs.ToolResults = append(obs.ToolResults, r)
			}
		}
	}
	tools, _ := body["tools"].([]any)
	for _, tool := range tools {
		tool, _ := tool.(map[string]any)
		decls, _ := tool["functionDeclarations"].([]any)
		for _, d := range decls {
			d, _ := d.(map[string]any)
			name, _ := d["name"].(string)
			obs.Tools = append(obs.Tools, name)
		}
	}
	if gc, ok := body["generationConfig"].(map[string]any); ok {
		_, obs.Structured = gc["responseJsonSchema"]
	}
	return obs
}

// texts returns the text of the text parts, thought parts only when
// thought is set.
func texts(parts any, thought bool) []string {
	list, _ := parts.([]any)
	var out []string
	for _, p := range list {
		p, _ := p.(map[string]any)
		s, ok := p["text"].(string)
		isThought, _ := p["thought"].(bool)
		if ok && isThought == thought {
			out = append(out, s)
		}
	}
	return out
}
