package anthropic

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/agentry-dev/agentry/llm"
)

// jsonResponseTool is the tool the tool method of structured output forces.
const jsonResponseTool = "json_response"

const jsonResponseDescription = "Respond with a JSON object that conforms to this tool's input schema. " +
	"Use this tool to give your final answer."

// outputMode is how a request asked for structured output, which decides
// how the reply is read.
type outputMode int

const (
	outputNone   outputMode = iota // no Structure
	outputTool                     // forced json_response tool
	outputNative                   // output_config.format or output_format: the text is the JSON
)

// builtRequest is a request body with what sending and reading it needs.
type builtRequest struct {
	body  map[string]any
	betas []string
	mode  outputMode
}

func invalid(format string, args ...any) *llm.Error {
	return llm.NewError(llm.InvalidRequest, name, fmt.Sprintf(format, args...), nil)
}

// buildRequest turns req into a Messages API body: a shallow copy of the
// params with the fields UPP manages set over it (see the package doc).
func buildRequest(model string, req *llm.Request, opts Options, stream bool) (*builtRequest, error) {
	body := make(map[string]any, len(req.Params)+6)
	for k, v := range req.Params {
		body[k] = v
	}
	if v, ok := body["max_tokens"]; !ok || v == nil {
		return nil, invalid("anthropic requires params max_tokens (UPP adds no defaults): set LLMOptions.Params[\"max_tokens\"]")
	}
	body["model"] = model
	msgs, err := convertMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	body["messages"] = msgs
	if req.System != "" {
		body["system"] = req.System
	}
	if stream {
		body["stream"] = true
	} else {
		delete(body, "stream")
	}

	out := &builtRequest{body: body, betas: slices.Clone(opts.Betas)}
	var tools []any
	for _, t := range req.Tools {
		if req.Structure != nil && opts.StructuredOutput == StructuredOutputTool && t.Name == jsonResponseTool {
			return nil, invalid("tool name %q is reserved for structured output with the tool method", jsonResponseTool)
		}
		tools = append(tools, convertTool(t))
	}
	if req.Structure != nil {
		switch opts.StructuredOutput {
		case StructuredOutputNative:
			out.mode = outputNative
			cfg := map[string]any{}
			switch v := body["output_config"].(type) {
			case nil:
			case map[string]any:
				for k, x := range v {
					cfg[k] = x
				}
			default:
				return nil, invalid("params output_config is %T, not an object", v)
			}
			cfg["format"] = map[string]any{"type": "json_schema", "schema": map[string]any(req.Structure)}
			body["output_config"] = cfg
		case StructuredOutputNativeBeta:
			out.mode = outputNative
			body["output_format"] = map[string]any{"type": "json_schema", "schema": map[string]any(req.Structure)}
			if !slices.Contains(out.betas, structuredOutputBeta) {
				out.betas = append(out.betas, structuredOutputBeta)
			}
		default:
			out.mode = outputTool
			if t, ok := req.Structure["type"]; ok && t != "object" {
				return nil, invalid("structured output with the tool method needs an object schema, got type %v; use StructuredOutputNative", t)
			}
			choice := map[string]any{"type": "tool", "name": jsonResponseTool}
			if len(tools) > 0 {
				choice = map[string]any{"type": "any"}
			}
			tools = append(tools, map[string]any{
				"name":         jsonResponseTool,
				"description":  jsonResponseDescription,
				"input_schema": map[string]any(req.Structure),
			})
			body["tool_choice"] = choice
		}
	}
	if len(tools) > 0 {
		var native []any
		switch v := body["tools"].(type) {
		case nil:
		case []any:
			native = v
		case []map[string]any:
			for _, t := range v {
				native = append(native, t)
			}
		default:
			return nil, invalid("params tools is %T, not a list", v)
		}
		body["tools"] = append(slices.Clip(native), tools...)
	}
	return out, nil
}

func convertTool(t llm.Tool) map[string]any {
	obj := map[string]any{}
	if md, ok := t.Metadata[name].(map[string]any); ok {
		for k, v := range md {
			obj[k] = v
		}
	}
	obj["name"] = t.Name
	if t.Description != "" {
		obj["description"] = t.Description
	}
	schema := map[string]any(t.Parameters)
	if schema == nil {
		schema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	obj["input_schema"] = schema
	return obj
}

type apiTurn struct {
	role    string
	content []any
}

// convertMessages maps UPP messages to alternating Messages API turns.
func convertMessages(msgs []llm.Message) ([]any, error) {
	var turns []apiTurn
	add := func(role string, blocks []any) {
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].content = append(turns[n-1].content, blocks...)
			return
		}
		turns = append(turns, apiTurn{role: role, content: blocks})
	}
	for i, m := range msgs {
		switch m := m.(type) {
		case *llm.UserMessage:
			blocks, err := userBlocks(m.Content)
			if err != nil {
				return nil, prefix(err, i)
			}
			add("user", blocks)
		case *llm.AssistantMessage:
			blocks, err := assistantBlocks(m)
			if err != nil {
				return nil, prefix(err, i)
			}
			add("assistant", blocks)
		case *llm.ToolResultMessage:
			blocks := make([]any, 0, len(m.Results))
			for _, r := range m.Results {
				b := map[string]any{
					"type":        "tool_result",
					"tool_use_id": r.ToolCallID,
					"content":     llm.ResultText(r.Result),
				}
				if r.IsError {
					b["is_error"] = true
				}
				blocks = append(blocks, b)
			}
			add("user", blocks)
		default:
			return nil, invalid("message %d: unsupported message type %T", i, m)
		}
	}
	out := make([]any, len(turns))
	for i, t := range turns {
		content := t.content
		if content == nil {
			content = []any{}
		}
		out[i] = map[string]any{"role": t.role, "content": content}
	}
	return out, nil
}

func prefix(err *llm.Error, i int) *llm.Error {
	err.Message = fmt.Sprintf("message %d: %s", i, err.Message)
	return err
}

func userBlocks(content []llm.ContentBlock) ([]any, *llm.Error) {
	out := make([]any, 0, len(content))
	for _, b := range content {
		switch b := b.(type) {
		case llm.TextBlock:
			out = append(out, map[string]any{"type": "text", "text": b.Text})
		case llm.ImageBlock:
			img, err := imageBlock(b)
			if err != nil {
				return nil, err
			}
			out = append(out, img)
		case llm.DocumentBlock:
			doc, err := documentBlock(b)
			if err != nil {
				return nil, err
			}
			out = append(out, doc)
		default:
			return nil, invalid("anthropic does not accept %s blocks in user messages", b.BlockType())
		}
	}
	return out, nil
}

// mediaType returns the block's MIME type, sniffed from the data when the
// block has none.
func mediaType(declared string, src llm.Source) string {
	if declared != "" {
		if i := strings.IndexByte(declared, ';'); i >= 0 {
			declared = declared[:i]
		}
		return strings.ToLower(strings.TrimSpace(declared))
	}
	if raw, ok := src.Raw(); ok && len(raw) > 0 {
		mt := http.DetectContentType(raw)
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		return mt
	}
	return ""
}

func imageBlock(b llm.ImageBlock) (map[string]any, *llm.Error) {
	switch b.Source.Type {
	case llm.SourceURL:
		if b.Source.URL == "" {
			return nil, invalid("image has an empty URL")
		}
		return map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": b.Source.URL}}, nil
	case llm.SourceBase64, llm.SourceBytes:
		data, _ := b.Source.Base64()
		mt := mediaType(b.MimeType, b.Source)
		if !strings.HasPrefix(mt, "image/") {
			return nil, invalid("image has no image MIME type (got %q)", mt)
		}
		return map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": mt, "data": data}}, nil
	}
	return nil, invalid("anthropic does not accept images with a %q source", b.Source.Type)
}

func documentBlock(b llm.DocumentBlock) (map[string]any, *llm.Error) {
	var src map[string]any
	mt := mediaType(b.MimeType, b.Source)
	switch b.Source.Type {
	case llm.SourceURL:
		if b.Source.URL == "" {
			return nil, invalid("document has an empty URL")
		}
		if b.MimeType != "" && mt != "application/pdf" {
			return nil, invalid("anthropic takes documents by URL only as PDF, not %q", mt)
		}
		src = map[string]any{"type": "url", "url": b.Source.URL}
	case llm.SourceText:
		src = map[string]any{"type": "text", "media_type": "text/plain", "data": b.Source.Data}
	case llm.SourceBase64, llm.SourceBytes:
		switch {
		case mt == "application/pdf":
			data, _ := b.Source.Base64()
			src = map[string]any{"type": "base64", "media_type": mt, "data": data}
		case strings.HasPrefix(mt, "text/"):
			raw, ok := b.Source.Raw()
			if !ok {
				return nil, invalid("document's base64 data is invalid")
			}
			src = map[string]any{"type": "text", "media_type": "text/plain", "data": string(raw)}
		default:
			return nil, invalid("anthropic accepts PDF and plain-text documents, not %q", mt)
		}
	default:
		return nil, invalid("anthropic does not accept documents with a %q source", b.Source.Type)
	}
	doc := map[string]any{"type": "document", "source": src}
	if b.Title != "" {
		doc["title"] = b.Title
	}
	return doc, nil
}

// reasoningData returns the Anthropic data of an assistant message's
// reasoning blocks, in order.
func reasoningData(md llm.Metadata) []map[string]any {
	list, _ := md.Provider(name)["reasoning"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		m, _ := x.(map[string]any)
		out = append(out, m)
	}
	return out
}

func assistantBlocks(m *llm.AssistantMessage) ([]any, *llm.Error) {
	data := reasoningData(m.Metadata)
	out := make([]any, 0, len(m.Content)+len(m.ToolCalls))
	r := 0
	for _, b := range m.Content {
		switch b := b.(type) {
		case llm.TextBlock:
			if b.Text == "" {
				continue // the API refuses empty text blocks
			}
			out = append(out, map[string]any{"type": "text", "text": b.Text})
		case llm.ReasoningBlock:
			var d map[string]any
			if r < len(data) {
				d = data[r]
			}
			r++
			if d == nil {
				continue // not Anthropic's: unverifiable, see the package doc
			}
			if red, _ := d["redacted"].(bool); red {
				s, _ := d["data"].(string)
				out = append(out, map[string]any{"type": "redacted_thinking", "data": s})
				continue
			}
			sig, _ := d["signature"].(string)
			out = append(out, map[string]any{"type": "thinking", "thinking": b.Text, "signature": sig})
		default:
			return nil, invalid("anthropic does not accept %s blocks in assistant messages", b.BlockType())
		}
	}
	for _, c := range m.ToolCalls {
		input := c.Arguments
		if input == nil {
			input = map[string]any{} // unparsable arguments: the input must be an object
		}
		out = append(out, map[string]any{"type": "tool_use", "id": c.ToolCallID, "name": c.ToolName, "input": input})
	}
	return out, nil
}
