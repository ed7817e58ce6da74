package ollama

import (
	"fmt"
	"maps"
	"strings"

	"github.com/agentry-dev/agentry/llm"
)

// wireMessage is a message of the chat request.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Thinking   string         `json:"thinking,omitempty"`
	Images     []string       `json:"images,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolName   string         `json:"tool_name,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Index     int            `json:"index"`
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

type wireTool struct {
	Type     string      `json:"type"`
	Function wireToolDef `json:"function"`
}

type wireToolDef struct {
	Name        string     `json:"name"`
	Description string     `json:"description,omitempty"`
	Parameters  llm.Schema `json:"parameters"`
}

// buildBody returns the chat request body: Params copied verbatim, then
// the fields the provider manages (see the package doc).
func buildBody(req *llm.Request, stream bool) (map[string]any, error) {
	msgs, err := convertMessages(req.System, req.Messages)
	if err != nil {
		return nil, err
	}
	body := make(map[string]any, len(req.Params)+5)
	maps.Copy(body, req.Params)
	body["model"] = req.ModelID
	body["messages"] = msgs
	if len(req.Tools) > 0 {
		body["tools"] = convertTools(req.Tools)
	}
	body["stream"] = stream
	if req.Structure != nil {
		body["format"] = req.Structure
	}
	return body, nil
}

func convertTools(tools []llm.Tool) []wireTool {
	out := make([]wireTool, len(tools))
	for i, t := range tools {
		params := t.Parameters
		if params == nil { // Ollama expects an object schema
			params = llm.Schema{"type": "object", "properties": map[string]any{}}
		}
		out[i] = wireTool{Type: "function", Function: wireToolDef{Name: t.Name, Description: t.Description, Parameters: params}}
	}
	return out
}

func invalid(format string, args ...any) *llm.Error {
	return llm.NewError(llm.InvalidRequest, name, fmt.Sprintf(format, args...), nil)
}

// convertMessages maps the conversation to Ollama messages.
func convertMessages(system string, msgs []llm.Message) ([]wireMessage, error) {
	out := make([]wireMessage, 0, len(msgs)+1)
	if system != "" {
		out = append(out, wireMessage{Role: "system", Content: system})
	}
	toolNames := map[string]string{} // call ID → tool name, from earlier assistant messages
	for i, m := range msgs {
		switch m := m.(type) {
		case *llm.UserMessage:
			w, err := convertContent("user", i, m.Content)
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		case *llm.AssistantMessage:
			w, err := convertContent("assistant", i, m.Content)
			if err != nil {
				return nil, err
			}
			for j, c := range m.ToolCalls {
				args := c.Arguments
				if args == nil { // not a JSON object (RawArguments): Ollama only takes objects
					args = map[string]any{}
				}
				w.ToolCalls = append(w.ToolCalls, wireToolCall{
					ID:       c.ToolCallID,
					Function: wireFunction{Index: j, Name: c.ToolName, Arguments: args},
				})
				toolNames[c.ToolCallID] = c.ToolName
			}
			out = append(out, w)
		case *llm.ToolResultMessage:
			for _, r := range m.Results {
				out = append(out, wireMessage{
					Role:       "tool",
					Content:    llm.ResultText(r.Result),
					ToolName:   toolNames[r.ToolCallID],
					ToolCallID: r.ToolCallID,
				})
			}
		default:
			return nil, invalid("message %d: unsupported message type %T", i, m)
		}
	}
	return out, nil
}

// convertContent maps one message's blocks: texts joined by a blank line,
// reasoning to thinking (assistant only), images to base64.
func convertContent(role string, index int, blocks []llm.ContentBlock) (wireMessage, error) {
	w := wireMessage{Role: role}
	var texts, thinking []string
	for j, b := range blocks {
		switch b := b.(type) {
		case llm.TextBlock:
			texts = append(texts, b.Text)
		case llm.ReasoningBlock:
			if role != "assistant" {
				return w, invalid("message %d, block %d: a reasoning block is only allowed in an assistant message", index, j)
			}
			thinking = append(thinking, b.Text)
		case llm.ImageBlock:
			data, ok := b.Source.Base64()
			if !ok {
				if b.Source.Type == llm.SourceURL {
					return w, invalid("message %d, block %d: Ollama needs image data, not a URL: fetch the image and pass its bytes (llm.ImageFromBytes)", index, j)
				}
				return w, invalid("message %d, block %d: unsupported image source %q", index, j, b.Source.Type)
			}
			w.Images = append(w.Images, data)
		default:
			return w, invalid("message %d, block %d: Ollama does not accept %s content", index, j, b.BlockType())
		}
	}
	w.Content = strings.Join(texts, "\n\n")
	w.Thinking = strings.Join(thinking, "\n\n")
	return w, nil
}
