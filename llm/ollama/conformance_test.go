package ollama

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/llmtest"
)

func TestConformance(t *testing.T) {
	llmtest.Run(t, newConformanceTarget)
}

// conformanceVendor speaks Ollama's /api/chat for llmtest: it renders
// scripted replies as a JSON reply or an NDJSON stream and decodes each
// request into an llmtest.Observed.
type conformanceVendor struct{}

func newConformanceTarget(t *testing.T) llmtest.Target {
	tg := llmtest.NewServer(t, conformanceVendor{})
	tg.Model = Model("llama3.2", nil)
	tg.Config.APIKey = llm.StaticKey("test-key")
	tg.Reasoning = true
	return tg
}

// conformanceRequest is the part of a chat request the kit observes.
type conformanceRequest struct {
	Stream   *bool `json:"stream"`
	Messages []struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Format json.RawMessage `json:"format"`
}

func (conformanceVendor) Observe(r *http.Request, data []byte) (llmtest.Observed, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/chat" {
		return llmtest.Observed{}, fmt.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	var req conformanceRequest
	var top map[string]any
	if err := json.Unmarshal(data, &req); err != nil {
		return llmtest.Observed{}, fmt.Errorf("request body: %v", err)
	}
	json.Unmarshal(data, &top)
	obs := llmtest.Observed{Stream: req.Stream != nil && *req.Stream, Structured: len(req.Format) > 0, Params: map[string]any{}}
	for k, v := range top {
		switch k {
		case "model", "messages", "tools", "stream", "format":
		default:
			obs.Params[k] = v
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			obs.System = m.Content
		case "user":
			obs.UserTexts = append(obs.UserTexts, m.Content)
		case "assistant":
			if m.Content != "" {
				obs.AssistantTexts = append(obs.AssistantTexts, m.Content)
			}
			for _, c := range m.ToolCalls {
				obs.ToolCallIDs = append(obs.ToolCallIDs, c.ID)
			}
		case "tool":
			obs.ToolResults = append(obs.ToolResults, llm.ToolResult{ToolCallID: m.ToolCallID, Result: m.Content})
		}
	}
	for _, tool := range req.Tools {
		obs.Tools = append(obs.Tools, tool.Function.Name)
	}
	return obs, nil
}

func (conformanceVendor) WriteReply(w http.ResponseWriter, obs llmtest.Observed, rep llmtest.Reply) {
	if !obs.Stream {
		msg := map[string]any{"role": "assistant", "content": rep.Text + rep.Object}
		if rep.Reasoning != "" {
			msg["thinking"] = rep.Reasoning
		}
		if len(rep.ToolCalls) > 0 {
			msg["tool_calls"] = toolCalls(rep.ToolCalls)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(final(rep, msg))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w) // one object per line
	chunk := func(msg map[string]any) {
		enc.Encode(map[string]any{"model": "llama3.2", "created_at": "2025-01-01T00:00:00Z", "message": msg, "done": false})
	}
	for _, part := range split(rep.Reasoning) {
		chunk(map[string]any{"role": "assistant", "content": "", "thinking": part})
	}
	for _, part := range split(rep.Text + rep.Object) {
		chunk(map[string]any{"role": "assistant", "content": part})
	}
	if len(rep.ToolCalls) > 0 {
		chunk(map[string]any{"role": "assistant", "content": "", "tool_calls": toolCalls(rep.ToolCalls)})
	}
	enc.Encode(final(rep, map[string]any{"role": "assistant", "content": ""}))
}

func (conformanceVendor) WriteError(w http.ResponseWriter, rep llmtest.Reply) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(rep.Status)
	json.NewEncoder(w).Encode(map[string]string{"error": rep.ErrorMessage})
}

func final(rep llmtest.Reply, msg map[string]any) map[string]any {
	return map[string]any{
		"model": "llama3.2", "created_at": "2025-01-01T00:00:01Z", "message": msg,
		"done": true, "done_reason": "stop", "total_duration": 1000, "load_duration": 10,
		"prompt_eval_count": rep.InputTokens, "eval_count": rep.OutputTokens,
	}
}

// toolCalls renders calls as Ollama does: arguments as an object, the
// call's position as function.index.
func toolCalls(calls []llm.ToolCall) []map[string]any {
	out := make([]map[string]any, len(calls))
	for i, c := range calls {
		args := c.Arguments
		if args == nil {
			args = map[string]any{}
		}
		out[i] = map[string]any{"id": c.ToolCallID, "function": map[string]any{"index": i, "name": c.ToolName, "arguments": args}}
	}
	return out
}

// split cuts s into a few pieces, as a model streams tokens.
func split(s string) []string {
	if s == "" {
		return nil
	}
	r := []rune(s)
	var parts []string
	step := max(1, len(r)/3)
	for len(r) > step {
		parts = append(parts, string(r[:step]))
		r = r[step:]
	}
	return append(parts, string(r))
}
