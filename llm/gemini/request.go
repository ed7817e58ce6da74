package gemini

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentry-dev/agentry/llm"
)

// Request wire types. Fields follow the Gemini API's JSON names.

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             *string           `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

type functionDeclaration struct {
	Name                 string     `json:"name"`
	Description          string     `json:"description,omitempty"`
	ParametersJSONSchema llm.Schema `json:"parametersJsonSchema,omitempty"`
}

func textPart(s string) part { return part{Text: &s} }

func invalid(format string, args ...any) *llm.Error {
	return llm.NewError(llm.InvalidRequest, name, fmt.Sprintf(format, args...), nil)
}

// buildBody returns the JSON body of a generateContent request: a shallow
// copy of req.Params with the fields the provider manages set over it (see
// the package documentation). req is not modified.
func buildBody(req *llm.Request) (map[string]any, error) {
	body := make(map[string]any, len(req.Params)+4)
	maps.Copy(body, req.Params)

	contents, err := convertMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	body["contents"] = contents
	if req.System != "" {
		body["systemInstruction"] = content{Parts: []part{textPart(req.System)}}
	}
	if len(req.Tools) > 0 {
		tools, err := mergeTools(req.Params["tools"], req.Tools)
		if err != nil {
			return nil, err
		}
		body["tools"] = tools
	}
	if req.Structure != nil {
		gc, err := objectParam(req.Params["generationConfig"], "generationConfig")
		if err != nil {
			return nil, err
		}
		delete(gc, "responseSchema")
		gc["responseMimeType"] = "application/json"
		gc["responseJsonSchema"] = req.Structure
		body["generationConfig"] = gc
	}
	return body, nil
}

// objectParam returns a copy of a params value that must be a JSON object
// (nil gives an empty map).
func objectParam(v any, name string) (map[string]any, error) {
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return maps.Clone(m), nil
	}
	b, err := json.Marshal(v)
	var out map[string]any
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil || out == nil {
		return nil, invalid("params.%s must be a JSON object", name)
	}
	return out, nil
}

// mergeTools appends the function declarations to a copy of params' tools
// array.
func mergeTools(native any, tools []llm.Tool) ([]any, error) {
	var out []any
	switch v := native.(type) {
	case nil:
	case []any:
		out = append(out, v...)
	default:
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, &out)
		}
		if err != nil {
			return nil, invalid("params.tools must be a JSON array")
		}
	}
	decls := make([]functionDeclaration, len(tools))
	for i, t := range tools {
		decls[i] = functionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.Parameters}
	}
	return append(out, map[string]any{"functionDeclarations": decls}), nil
}

// callRef is what a tool result needs from its call.
type callRef struct {
	name string
	id   string // the vendor id to echo, "" for none
}

func convertMessages(msgs []llm.Message) ([]content, error) {
	out := make([]content, 0, len(msgs))
	calls := map[string]callRef{}
	for i, m := range msgs {
		var (
			c   content
			err error
		)
		switch m := m.(type) {
		case *llm.UserMessage:
			c, err = userContent(m)
		case *llm.AssistantMessage:
			c, err = modelContent(m, calls)
		case *llm.ToolResultMessage:
			c, err = resultContent(m, calls)
		default:
			err = invalid("unsupported message type %T", m)
		}
		if err != nil {
			if e, ok := err.(*llm.Error); ok {
				e.Message = fmt.Sprintf("message %d: %s", i, e.Message)
			}
			return nil, err
		}
		if len(c.Parts) == 0 {
			continue // an empty assistant message (e.g. cut off by MAX_TOKENS) carries nothing
		}
		out = append(out, c)
	}
	return out, nil
}

func userContent(m *llm.UserMessage) (content, error) {
	if len(m.Content) == 0 {
		return content{}, invalid("user message has no content")
	}
	parts := make([]part, 0, len(m.Content))
	for _, b := range m.Content {
		if _, ok := b.(llm.ReasoningBlock); ok {
			return content{}, invalid("a user message cannot hold a reasoning block")
		}
		p, err := blockPart(b)
		if err != nil {
			return content{}, err
		}
		parts = append(parts, p)
	}
	return content{Role: "user", Parts: parts}, nil
}

// blockPart converts a content block to a part.
func blockPart(b llm.ContentBlock) (part, error) {
	switch b := b.(type) {
	case llm.TextBlock:
		return textPart(b.Text), nil
	case llm.ReasoningBlock:
		p := textPart(b.Text)
		p.Thought = true
		return p, nil
	case llm.ImageBlock:
		return sourcePart("image", b.Source, b.MimeType, "")
	case llm.DocumentBlock:
		def := "application/pdf"
		if b.Source.Type == llm.SourceText {
			def = "text/plain"
		}
		return sourcePart("document", b.Source, b.MimeType, def)
	case llm.AudioBlock:
		return dataPart("audio", b.Data, b.MimeType)
	case llm.VideoBlock:
		return dataPart("video", b.Data, b.MimeType)
	case llm.BinaryBlock:
		if b.MimeType == "" {
			return part{}, invalid("binary block has no MIME type")
		}
		return dataPart("binary", b.Data, b.MimeType)
	}
	return part{}, invalid("unsupported content block %T", b)
}

func sourcePart(kind string, s llm.Source, mimeType, def string) (part, error) {
	switch s.Type {
	case llm.SourceURL:
		if s.URL == "" {
			return part{}, invalid("%s block has an empty URL", kind)
		}
		return part{FileData: &fileData{MimeType: mimeType, FileURI: s.URL}}, nil
	case llm.SourceBase64, llm.SourceBytes, llm.SourceText:
		if s.Type == llm.SourceText && kind == "image" {
			break
		}
		raw, ok := s.Raw()
		if !ok {
			return part{}, invalid("%s block has invalid base64 data", kind)
		}
		if mimeType == "" {
			mimeType = def
		}
		if mimeType == "" {
			mimeType = sniff(raw)
		}
		if mimeType == "" {
			return part{}, invalid("%s block has no MIME type", kind)
		}
		data := s.Data
		if s.Type != llm.SourceBase64 {
			data = base64.StdEncoding.EncodeToString(raw)
		}
		return part{InlineData: &blob{MimeType: mimeType, Data: data}}, nil
	}
	return part{}, invalid("%s block has unsupported source type %q", kind, s.Type)
}

func dataPart(kind string, data []byte, mimeType string) (part, error) {
	if mimeType == "" {
		mimeType = sniff(data)
	}
	if mimeType == "" {
		return part{}, invalid("%s block has no MIME type", kind)
	}
	return part{InlineData: &blob{MimeType: mimeType, Data: base64.StdEncoding.EncodeToString(data)}}, nil
}

// sniff guesses a MIME type from data, "" when it cannot tell.
func sniff(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	mt := http.DetectContentType(data)
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	if mt == "application/octet-stream" {
		return ""
	}
	return mt
}

func modelContent(m *llm.AssistantMessage, calls map[string]callRef) (content, error) {
	meta := readMeta(m.Metadata.Provider(name))
	var parts []part
	for _, key := range meta.order(len(m.Content), len(m.ToolCalls)) {
		var p part
		if key[0] == 'c' {
			i, _ := strconv.Atoi(key[1:])
			var err error
			if p, err = blockPart(m.Content[i]); err != nil {
				return content{}, err
			}
		} else {
			j, _ := strconv.Atoi(key[1:])
			tc := m.ToolCalls[j]
			if tc.ToolName == "" {
				return content{}, invalid("tool call %q has no name", tc.ToolCallID)
			}
			args := json.RawMessage("{}")
			if tc.Arguments != nil {
				b, err := json.Marshal(tc.Arguments)
				if err != nil {
					return content{}, invalid("tool call %q: arguments are not JSON-encodable", tc.ToolCallID)
				}
				args = b
			}
			id := meta.callIDs[key]
			if id != tc.ToolCallID {
				id = "" // generated by this provider, or not Gemini's
			}
			p = part{FunctionCall: &functionCall{ID: id, Name: tc.ToolName, Args: args}}
			calls[tc.ToolCallID] = callRef{name: tc.ToolName, id: id}
		}
		p.ThoughtSignature = meta.signatures[key]
		parts = append(parts, p)
	}
	return content{Role: "model", Parts: parts}, nil
}

func resultContent(m *llm.ToolResultMessage, calls map[string]callRef) (content, error) {
	if len(m.Results) == 0 {
		return content{}, invalid("tool result message has no results")
	}
	parts := make([]part, len(m.Results))
	for i, r := range m.Results {
		ref, ok := calls[r.ToolCallID]
		if !ok {
			return content{}, invalid("tool result for %q has no matching tool call in an earlier assistant message", r.ToolCallID)
		}
		parts[i] = part{FunctionResponse: &functionResponse{ID: ref.id, Name: ref.name, Response: resultObject(r)}}
	}
	return content{Role: "user", Parts: parts}, nil
}

// resultObject is a tool result as the object functionResponse.response
// must be: an object result as it is, anything else under "output", an
// error under "error".
func resultObject(r llm.ToolResult) map[string]any {
	var v any
	switch x := r.Result.(type) {
	case string:
		v = x
	default:
		b, err := json.Marshal(x)
		if err == nil {
			err = json.Unmarshal(b, &v)
		}
		if err != nil {
			v = llm.ResultText(r.Result)
		}
	}
	if r.IsError {
		return map[string]any{"error": v}
	}
	if obj, ok := v.(map[string]any); ok {
		return obj
	}
	return map[string]any{"output": v}
}
