package openai

// The parts both APIs share: request-building helpers, error parsing,
// tool-call and usage decoding, stream reading and the streamed-block
// bookkeeping.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"strings"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/llm"
)

// builder turns an llm.Request into a vendor body.
type builder struct {
	provider string
	strict   bool
}

func (b builder) invalid(format string, args ...any) *llm.Error {
	return llm.NewError(llm.InvalidRequest, b.provider, fmt.Sprintf(format, args...), nil)
}

// baseBody is a shallow copy of the params, with model set and stream
// set, or dropped from the params for a call that is not streamed.
func baseBody(req *llm.Request, stream bool) map[string]any {
	body := make(map[string]any, len(req.Params)+8)
	maps.Copy(body, req.Params)
	body["model"] = req.ModelID
	if stream {
		body["stream"] = true
	} else {
		delete(body, "stream")
	}
	return body
}

// mergedObject returns a copy of body[key] when it is a JSON object, else a
// new map: UPP sets one field of it and keeps the caller's others.
func mergedObject(body map[string]any, key string) map[string]any {
	out := map[string]any{}
	if m, ok := body[key].(map[string]any); ok {
		maps.Copy(out, m)
	}
	return out
}

// withTools appends tools to the params' own tools (provider-native ones).
func withTools(body map[string]any, tools []any) {
	var all []any
	switch t := body["tools"].(type) {
	case []any:
		all = append(all, t...)
	case []map[string]any:
		for _, x := range t {
			all = append(all, x)
		}
	}
	body["tools"] = append(all, tools...)
}

// functionDef is what both APIs declare of a function tool: its name,
// description and parameter schema (an empty object schema when unset).
func functionDef(t llm.Tool) map[string]any {
	params := map[string]any(t.Parameters)
	if params == nil {
		params = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	def := map[string]any{"name": t.Name, "parameters": params}
	if t.Description != "" {
		def["description"] = t.Description
	}
	return def
}

// jsonSchema is the json_schema format of structured output: the schema,
// named "response", strict when the builder is.
func (b builder) jsonSchema(s llm.Schema) map[string]any {
	format := map[string]any{"name": "response", "schema": map[string]any(s)}
	if b.strict {
		format["strict"] = true
	}
	return format
}

// assistantContent splits an assistant message's content into its texts
// and its reasoning; other content is an error naming api.
func (b builder) assistantContent(m *llm.AssistantMessage, api string) (texts, reasoning []string, err error) {
	for _, blk := range m.Content {
		switch v := blk.(type) {
		case llm.TextBlock:
			texts = append(texts, v.Text)
		case llm.ReasoningBlock:
			reasoning = append(reasoning, v.Text)
		default:
			return nil, nil, b.invalid("the %s does not take %s content in assistant messages", api, blk.BlockType())
		}
	}
	return texts, reasoning, nil
}

// toolOverrides applies the tool's Metadata[provider] keys to def.
func (b builder) toolOverrides(t llm.Tool, def map[string]any) {
	if m, ok := t.Metadata[b.provider].(map[string]any); ok {
		maps.Copy(def, m)
	}
}

// arguments renders a call's arguments for history: the model's own text
// when it was not an object, else JSON.
func (b builder) arguments(c llm.ToolCall) (string, error) {
	if c.Arguments == nil {
		if c.RawArguments != "" {
			return c.RawArguments, nil
		}
		return "{}", nil
	}
	data, err := json.Marshal(c.Arguments)
	if err != nil {
		return "", b.invalid("tool call %q: arguments cannot be encoded: %v", c.ToolCallID, err)
	}
	return string(data), nil
}

// toolCall is a call decoded from a reply. Its argument text gives
// Arguments when it is a JSON object, else nil Arguments and the text as
// RawArguments; empty text is an empty object.
// The text is kept as the call's ArgumentsJSON (llm.NewToolCall), so a
// typed tool decodes it directly.
func toolCall(id, name, args string) llm.ToolCall {
	return llm.NewToolCall(id, name, []byte(args))
}

// newCallID is the ID given to a call the vendor sent without one.
func newCallID() string { return "call_" + ids.New() }

// dataURL returns a data: URL for base64 data.
func dataURL(mimeType, b64 string) string {
	return "data:" + mimeType + ";base64," + b64
}

// sourceData returns a source's base64 data and its MIME type, sniffed from
// the data when mimeType is empty; ok is false for url and text sources.
func sourceData(s llm.Source, mimeType string) (b64, mt string, ok bool) {
	b64, ok = s.Base64()
	if !ok {
		return "", "", false
	}
	mt = mimeType
	if mt == "" {
		if raw, ok := s.Raw(); ok {
			mt = http.DetectContentType(raw)
			if i := strings.IndexByte(mt, ';'); i >= 0 {
				mt = mt[:i]
			}
		} else {
			mt = "application/octet-stream"
		}
	}
	return b64, mt, true
}

// imageURL returns an image as the URL OpenAI takes: its own URL or a data
// URL.
func (b builder) imageURL(img llm.ImageBlock) (string, error) {
	if img.Source.Type == llm.SourceURL {
		if img.Source.URL == "" {
			return "", b.invalid("image has an empty URL")
		}
		return img.Source.URL, nil
	}
	b64, mt, ok := sourceData(img.Source, img.MimeType)
	if !ok {
		return "", b.invalid("image source %q is not supported", img.Source.Type)
	}
	return dataURL(mt, b64), nil
}

// documentFile returns a document sent as file data: its file name and
// its data URL.
func (b builder) documentFile(d llm.DocumentBlock) (name, url string, err error) {
	b64, mt, ok := sourceData(d.Source, d.MimeType)
	if !ok {
		return "", "", b.invalid("document source %q is not supported", d.Source.Type)
	}
	return filename(d, mt), dataURL(mt, b64), nil
}

// documentText returns a text document as the text sent to the model.
func documentText(d llm.DocumentBlock) string {
	if d.Title == "" {
		return d.Source.Data
	}
	return d.Title + "\n\n" + d.Source.Data
}

var fileExtensions = map[string]string{
	"application/pdf":  ".pdf",
	"text/plain":       ".txt",
	"text/markdown":    ".md",
	"text/csv":         ".csv",
	"application/json": ".json",
}

// filename names a document file: its title, given the extension of its
// MIME type when it has none (OpenAI reads the type from the name).
func filename(d llm.DocumentBlock, mimeType string) string {
	name := d.Title
	if name == "" {
		name = "document"
	}
	if path.Ext(name) == "" {
		name += fileExtensions[mimeType]
	}
	return name
}

// audioFormat maps an audio MIME type to Chat Completions' input_audio
// format.
func audioFormat(mimeType string) (string, bool) {
	switch strings.ToLower(mimeType) {
	case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave":
		return "wav", true
	case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg-3":
		return "mp3", true
	}
	return "", false
}

// flexString decodes a JSON string, or keeps any other JSON value as its
// text (some compatible servers send tool arguments as an object).
type flexString string

func (f *flexString) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	if bytes.Equal(data, []byte("null")) {
		*f = ""
		return nil
	}
	*f = flexString(data)
	return nil
}

// vendorError is OpenAI's error object: {"message","type","code","param"}.
// Compatible servers send numeric codes too.
type vendorError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Param   json.RawMessage `json:"param"`
}

// code returns the code as text ("" for null).
func (e *vendorError) code() string {
	if len(e.Code) == 0 || bytes.Equal(e.Code, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(e.Code, &s) == nil {
		return s
	}
	return string(e.Code)
}

// errorBody is an error response: OpenAI's {"error":{…}}, a bare string
// error, or a top-level message (older vLLM).
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func decodeErrorBody(body []byte) (*vendorError, bool) {
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		return nil, false
	}
	if len(eb.Error) > 0 && eb.Error[0] == '{' {
		var ve vendorError
		if err := json.Unmarshal(eb.Error, &ve); err != nil {
			return nil, false
		}
		return &ve, true
	}
	if len(eb.Error) > 0 && eb.Error[0] == '"' {
		var s string
		if json.Unmarshal(eb.Error, &s) == nil {
			return &vendorError{Message: s}, true
		}
	}
	if eb.Message != "" {
		return &vendorError{Message: eb.Message, Type: eb.Type, Code: eb.Code}, true
	}
	return nil, false
}

// parseError is the wire.Client hook: the vendor's message and the code it
// implies.
func parseError(status int, body []byte) (string, llm.ErrorCode) {
	ve, ok := decodeErrorBody(body)
	if !ok {
		return "", ""
	}
	return ve.Message, refineCode(ve.Type, ve.code(), ve.Message)
}

var quotaCodes = map[string]bool{
	"insufficient_quota":                true,
	"credit_balance_exhausted":          true,
	"organization_spend_limit_exceeded": true,
	"project_spend_limit_exceeded":      true,
	"organization_usage_limit_exceeded": true,
	"billing_hard_limit_reached":        true,
}

// refineCode maps OpenAI's error type and code to a UPP code; "" keeps the
// status-derived one.
func refineCode(typ, code, message string) llm.ErrorCode {
	lc := strings.ToLower(code)
	lm := strings.ToLower(message)
	switch {
	case quotaCodes[lc] || typ == "insufficient_quota":
		return llm.QuotaExceeded
	case lc == "context_length_exceeded" || strings.Contains(lm, "maximum context length") ||
		strings.Contains(lm, "context_length_exceeded"):
		return llm.ContextLengthExceeded
	case lc == "content_filter" || strings.HasSuffix(lc, "content_policy_violation") ||
		typ == "content_filter" || strings.Contains(lm, "content management policy"):
		return llm.ContentFiltered
	case lc == "model_not_found":
		return llm.ModelNotFound
	case lc == "rate_limit_exceeded" || lc == "slow_down" || typ == "rate_limit_exceeded":
		return llm.RateLimited
	case lc == "invalid_api_key" || typ == "authentication_error":
		return llm.AuthenticationFailed
	case lc == "server_error" || typ == "server_error":
		return llm.ProviderError
	case lc == "vector_store_timeout":
		return llm.Timeout
	}
	return ""
}

// streamError is an error reported inside a 200 stream.
func streamError(provider string, ve *vendorError) *llm.Error {
	code := refineCode(ve.Type, ve.code(), ve.Message)
	if code == "" {
		code = llm.ProviderError
		if c := ve.code(); strings.HasPrefix(c, "invalid_") || ve.Type == "invalid_request_error" {
			code = llm.InvalidRequest
		}
	}
	msg := ve.Message
	if msg == "" {
		msg = "stream error"
		if c := ve.code(); c != "" {
			msg += ": " + c
		}
	}
	return llm.NewError(code, provider, msg, nil)
}

// decodeOptions are what a decoder needs to know of the request.
type decodeOptions struct {
	provider   string
	structured bool
}

func (o decodeOptions) invalid(format string, args ...any) *llm.Error {
	return llm.NewError(llm.InvalidResponse, o.provider, fmt.Sprintf(format, args...), nil)
}

// data is a reply's structured output: its text parsed, nil when the
// request had no Structure or the text is not JSON.
func (o decodeOptions) data(text string) any {
	var v any
	if !o.structured || text == "" || json.Unmarshal([]byte(text), &v) != nil {
		return nil
	}
	return v
}

// nextEvent reads a stream's next event. The stream ending before its
// terminal event, or an event over the size limit, is an invalid
// response; errors reading are returned as they are.
func (o decodeOptions) nextEvent(dec *sse.Decoder) (sse.Event, error) {
	ev, err := dec.Next()
	switch {
	case err == io.EOF:
		return ev, llm.NewError(llm.InvalidResponse, o.provider, "stream truncated: it ended before its terminal event", nil)
	case errors.Is(err, sse.ErrTooLarge):
		return ev, o.invalid("stream event too large")
	}
	return ev, err
}

// tokenDetails is the breakdown of input tokens both APIs report.
type tokenDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// tokenUsage is a reply's usage; details may be nil.
func tokenUsage(input, output int, details *tokenDetails) llm.TokenUsage {
	u := llm.TokenUsage{InputTokens: input, OutputTokens: output, TotalTokens: input + output}
	if details != nil {
		u.CacheReadTokens = details.CachedTokens
	}
	return u
}

// blockKind is what a streamed block holds.
type blockKind int

const (
	kindText blockKind = iota
	kindReasoning
	kindTool
)

// sblock is one streamed block.
type sblock struct {
	kind   blockKind
	index  int
	callID string
	name   string
	open   bool
}

// blocks emits the block events of one streamed reply. At most one block
// is open: starting a block stops the open one.
type blocks struct {
	emit       func(llm.StreamEvent)
	structured bool
	started    bool
	list       []*sblock
	open       *sblock
}

func (s *blocks) messageStart() {
	if !s.started {
		s.started = true
		s.emit(llm.StreamEvent{Type: llm.MessageStart})
	}
}

func (s *blocks) begin(kind blockKind, callID, name string) *sblock {
	s.messageStart()
	s.stopOpen()
	b := &sblock{kind: kind, index: len(s.list), callID: callID, name: name, open: true}
	s.list = append(s.list, b)
	s.open = b
	ev := llm.StreamEvent{Type: llm.ContentBlockStart, Index: b.index}
	if kind == kindTool {
		ev.Delta = llm.EventDelta{ToolCallID: callID, ToolName: name}
	}
	s.emit(ev)
	return b
}

func (s *blocks) stop(b *sblock) {
	if b == nil || !b.open {
		return
	}
	b.open = false
	if s.open == b {
		s.open = nil
	}
	s.emit(llm.StreamEvent{Type: llm.ContentBlockStop, Index: b.index})
}

func (s *blocks) stopOpen() { s.stop(s.open) }

// delta emits a fragment of b.
func (s *blocks) delta(b *sblock, text string) {
	if text == "" {
		return
	}
	ev := llm.StreamEvent{Index: b.index}
	switch b.kind {
	case kindText:
		ev.Type, ev.Delta.Text = llm.TextDelta, text
		if s.structured {
			ev.Type = llm.ObjectDelta
		}
	case kindReasoning:
		ev.Type, ev.Delta.Text = llm.ReasoningDelta, text
	case kindTool:
		ev.Type = llm.ToolCallDelta
		ev.Delta = llm.EventDelta{ToolCallID: b.callID, ToolName: b.name, ArgumentsJSON: text}
	}
	s.emit(ev)
}

// finish stops the open block and emits message_stop.
func (s *blocks) finish() {
	s.messageStart()
	s.stopOpen()
	s.emit(llm.StreamEvent{Type: llm.MessageStop})
}
