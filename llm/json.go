package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// JSON forms: MessageJSON, ThreadJSON and TurnJSON of UPP-1.3 as the
// reference implementation writes them (camelCase fields, ISO 8601
// timestamps with milliseconds, bytes as standard base64).

// timeLayout is JavaScript's Date.toISOString form.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if y := t.UTC().Year(); err != nil || y < 0 || y > 9999 { // beyond what the JSON form can write back
		return time.Time{}, fmt.Errorf("%s: invalid timestamp %q", field, s)
	}
	return t.UTC(), nil
}

type sourceJSON struct {
	Type SourceType `json:"type"`
	Data *string    `json:"data,omitempty"`
	URL  *string    `json:"url,omitempty"`
}

func (s Source) toJSON() sourceJSON {
	out := sourceJSON{Type: s.Type}
	switch s.Type {
	case SourceURL:
		out.URL = &s.URL
	case SourceBytes:
		d := base64.StdEncoding.EncodeToString(s.Bytes)
		out.Data = &d
	default:
		out.Data = &s.Data
	}
	return out
}

func (j sourceJSON) source(allowed ...SourceType) (Source, error) {
	ok := false
	for _, a := range allowed {
		ok = ok || a == j.Type
	}
	if !ok {
		return Source{}, fmt.Errorf("source: unsupported type %q", j.Type)
	}
	switch j.Type {
	case SourceURL:
		if j.URL == nil {
			return Source{}, errors.New("source: url missing")
		}
		return Source{Type: SourceURL, URL: *j.URL}, nil
	case SourceBytes:
		if j.Data == nil {
			return Source{}, errors.New("source: data missing")
		}
		b, err := base64.StdEncoding.DecodeString(*j.Data)
		if err != nil {
			return Source{}, fmt.Errorf("source: data is not base64: %v", err)
		}
		return Source{Type: SourceBytes, Bytes: b}, nil
	default:
		if j.Data == nil {
			return Source{}, errors.New("source: data missing")
		}
		return Source{Type: j.Type, Data: *j.Data}, nil
	}
}

// blockJSON is the union of every block's fields.
type blockJSON struct {
	Type     BlockType      `json:"type"`
	Text     *string        `json:"text,omitempty"`
	Source   *sourceJSON    `json:"source,omitempty"`
	Data     *[]byte        `json:"data,omitempty"`
	MimeType string         `json:"mimeType,omitempty"`
	Width    int            `json:"width,omitempty"`
	Height   int            `json:"height,omitempty"`
	Title    string         `json:"title,omitempty"`
	Duration float64        `json:"duration,omitempty"` // seconds
	Metadata map[string]any `json:"metadata,omitempty"`
}

func blockToJSON(b ContentBlock) (blockJSON, error) {
	switch v := b.(type) {
	case TextBlock:
		return blockJSON{Type: BlockText, Text: &v.Text}, nil
	case ReasoningBlock:
		return blockJSON{Type: BlockReasoning, Text: &v.Text}, nil
	case ImageBlock:
		s := v.Source.toJSON()
		return blockJSON{Type: BlockImage, Source: &s, MimeType: v.MimeType, Width: v.Width, Height: v.Height}, nil
	case DocumentBlock:
		s := v.Source.toJSON()
		return blockJSON{Type: BlockDocument, Source: &s, MimeType: v.MimeType, Title: v.Title}, nil
	case AudioBlock:
		return blockJSON{Type: BlockAudio, Data: dataPtr(v.Data), MimeType: v.MimeType, Duration: v.Duration.Seconds()}, nil
	case VideoBlock:
		return blockJSON{Type: BlockVideo, Data: dataPtr(v.Data), MimeType: v.MimeType, Duration: v.Duration.Seconds(), Width: v.Width, Height: v.Height}, nil
	case BinaryBlock:
		return blockJSON{Type: BlockBinary, Data: dataPtr(v.Data), MimeType: v.MimeType, Metadata: v.Metadata}, nil
	case nil:
		return blockJSON{}, errors.New("nil content block")
	}
	return blockJSON{}, fmt.Errorf("unknown content block %T", b)
}

// dataPtr points at b, never at nil, so that `data` is always emitted.
func dataPtr(b []byte) *[]byte {
	if b == nil {
		b = []byte{}
	}
	return &b
}

func dataOf(p *[]byte) []byte {
	if p == nil || *p == nil {
		return []byte{}
	}
	return *p
}

func (j blockJSON) block() (ContentBlock, error) {
	needText := func() (string, error) {
		if j.Text == nil {
			return "", fmt.Errorf("%s block: text missing", j.Type)
		}
		return *j.Text, nil
	}
	dur := time.Duration(j.Duration * float64(time.Second))
	switch j.Type {
	case BlockText:
		t, err := needText()
		return TextBlock{Text: t}, err
	case BlockReasoning:
		t, err := needText()
		return ReasoningBlock{Text: t}, err
	case BlockImage, BlockDocument:
		if j.Source == nil {
			return nil, fmt.Errorf("%s block: source missing", j.Type)
		}
		if j.Type == BlockImage {
			s, err := j.Source.source(SourceBase64, SourceURL, SourceBytes)
			if err != nil {
				return nil, fmt.Errorf("image block: %w", err)
			}
			return ImageBlock{Source: s, MimeType: j.MimeType, Width: j.Width, Height: j.Height}, nil
		}
		s, err := j.Source.source(SourceBase64, SourceURL, SourceText)
		if err != nil {
			return nil, fmt.Errorf("document block: %w", err)
		}
		return DocumentBlock{Source: s, MimeType: j.MimeType, Title: j.Title}, nil
	case BlockAudio, BlockVideo, BlockBinary:
		if j.Data == nil {
			return nil, fmt.Errorf("%s block: data missing", j.Type)
		}
	}
	switch j.Type {
	case BlockAudio:
		return AudioBlock{Data: dataOf(j.Data), MimeType: j.MimeType, Duration: dur}, nil
	case BlockVideo:
		return VideoBlock{Data: dataOf(j.Data), MimeType: j.MimeType, Duration: dur, Width: j.Width, Height: j.Height}, nil
	case BlockBinary:
		return BinaryBlock{Data: dataOf(j.Data), MimeType: j.MimeType, Metadata: j.Metadata}, nil
	case "":
		return nil, errors.New("content block: type missing")
	}
	return nil, fmt.Errorf("content block: unknown type %q", j.Type)
}

// marshalBlock returns a content block's JSON form.
func marshalBlock(b ContentBlock) ([]byte, error) {
	j, err := blockToJSON(b)
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// UnmarshalBlock decodes a content block's JSON form.
func UnmarshalBlock(data []byte) (ContentBlock, error) {
	var j blockJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("content block: %w", err)
	}
	return j.block()
}

type toolCallJSON struct {
	ToolCallID   string         `json:"toolCallId"`
	ToolName     string         `json:"toolName"`
	Arguments    map[string]any `json:"arguments"`
	RawArguments string         `json:"rawArguments,omitempty"`
}

// MarshalJSON emits {toolCallId, toolName, arguments}, plus rawArguments
// when the model's arguments were not a JSON object (arguments is then {}).
func (c ToolCall) MarshalJSON() ([]byte, error) {
	args := c.Arguments
	if args == nil {
		args = map[string]any{}
	}
	return json.Marshal(toolCallJSON{c.ToolCallID, c.ToolName, args, c.RawArguments})
}

// UnmarshalJSON reads {toolCallId, toolName, arguments}.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var j toolCallJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if j.ToolCallID == "" || j.ToolName == "" {
		return errors.New("tool call: toolCallId and toolName are required")
	}
	*c = ToolCall{ToolCallID: j.ToolCallID, ToolName: j.ToolName, Arguments: j.Arguments, RawArguments: j.RawArguments}
	if c.RawArguments != "" && len(c.Arguments) == 0 {
		c.Arguments = nil // malformed arguments: only the raw text is meaningful
	}
	return nil
}

type toolResultJSON struct {
	ToolCallID string `json:"toolCallId"`
	Result     any    `json:"result"`
	IsError    bool   `json:"isError,omitempty"`
}

// MarshalJSON emits {toolCallId, result, isError?}.
func (r ToolResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(toolResultJSON(r))
}

// UnmarshalJSON reads {toolCallId, result, isError?}.
func (r *ToolResult) UnmarshalJSON(data []byte) error {
	var j toolResultJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if j.ToolCallID == "" {
		return errors.New("tool result: toolCallId is required")
	}
	*r = ToolResult(j)
	return nil
}

type messageJSON struct {
	ID        string            `json:"id"`
	Type      MessageType       `json:"type"`
	Timestamp string            `json:"timestamp"`
	Metadata  Metadata          `json:"metadata,omitempty"`
	Content   []json.RawMessage `json:"content"`
	ToolCalls []ToolCall        `json:"toolCalls,omitempty"`
	Results   []ToolResult      `json:"results,omitempty"`
}

func marshalMessage(info MessageInfo, typ MessageType, blocks []ContentBlock, calls []ToolCall, results []ToolResult) ([]byte, error) {
	j := messageJSON{ID: info.ID, Type: typ, Timestamp: formatTime(info.Timestamp), Metadata: info.Metadata,
		Content: make([]json.RawMessage, 0, len(blocks)), ToolCalls: calls, Results: results}
	for _, b := range blocks {
		raw, err := marshalBlock(b)
		if err != nil {
			return nil, err
		}
		j.Content = append(j.Content, raw)
	}
	if typ == TypeToolResult && results == nil {
		j.Results = []ToolResult{}
	}
	return json.Marshal(j)
}

// MarshalJSON emits MessageJSON.
func (m *UserMessage) MarshalJSON() ([]byte, error) {
	return marshalMessage(m.MessageInfo, TypeUser, m.Content, nil, nil)
}

// MarshalJSON emits MessageJSON.
func (m *AssistantMessage) MarshalJSON() ([]byte, error) {
	return marshalMessage(m.MessageInfo, TypeAssistant, m.Content, m.ToolCalls, nil)
}

// MarshalJSON emits MessageJSON (content is always empty; results hold the
// data).
func (m *ToolResultMessage) MarshalJSON() ([]byte, error) {
	return marshalMessage(m.MessageInfo, TypeToolResult, nil, nil, m.Results)
}

// UnmarshalMessage decodes a message from its MessageJSON form. It checks
// the structure (id, known type, timestamp, known block types allowed for
// the message type, base64 data) and reports the first problem.
func UnmarshalMessage(data []byte) (Message, error) {
	var j messageJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("message: %w", err)
	}
	if dec.More() {
		return nil, errors.New("message: trailing data")
	}
	if j.ID == "" {
		return nil, errors.New("message: id missing")
	}
	ts, err := parseTime("message "+j.ID, j.Timestamp)
	if err != nil {
		return nil, err
	}
	info := MessageInfo{ID: j.ID, Timestamp: ts, Metadata: j.Metadata}
	blocks := make([]ContentBlock, 0, len(j.Content))
	for i, raw := range j.Content {
		b, err := UnmarshalBlock(raw)
		if err != nil {
			return nil, fmt.Errorf("message %s: content[%d]: %w", j.ID, i, err)
		}
		blocks = append(blocks, b)
	}
	switch j.Type {
	case TypeUser:
		for i, b := range blocks {
			if _, ok := b.(ReasoningBlock); ok {
				return nil, fmt.Errorf("message %s: content[%d]: reasoning block in a user message", j.ID, i)
			}
		}
		return &UserMessage{MessageInfo: info, Content: blocks}, nil
	case TypeAssistant:
		for i, b := range blocks {
			switch b.(type) {
			case DocumentBlock, BinaryBlock:
				return nil, fmt.Errorf("message %s: content[%d]: %s block in an assistant message", j.ID, i, b.BlockType())
			}
		}
		return &AssistantMessage{MessageInfo: info, Content: blocks, ToolCalls: j.ToolCalls}, nil
	case TypeToolResult:
		if len(blocks) > 0 {
			return nil, fmt.Errorf("message %s: tool_result message with content", j.ID)
		}
		return &ToolResultMessage{MessageInfo: info, Results: j.Results}, nil
	case "":
		return nil, fmt.Errorf("message %s: type missing", j.ID)
	}
	return nil, fmt.Errorf("message %s: unknown type %q", j.ID, j.Type)
}

// messageList is a list of messages with a JSON form: an array of
// MessageJSON.
type messageList []Message

// UnmarshalJSON decodes an array of MessageJSON.
func (ms *messageList) UnmarshalJSON(data []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	out := make(messageList, 0, len(raws))
	for i, raw := range raws {
		m, err := UnmarshalMessage(raw)
		if err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
		out = append(out, m)
	}
	*ms = out
	return nil
}

// MarshalJSON encodes an array of MessageJSON ([] when empty).
func (ms messageList) MarshalJSON() ([]byte, error) {
	if ms == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]Message(ms))
}

type usageJSON struct {
	InputTokens      int              `json:"inputTokens"`
	OutputTokens     int              `json:"outputTokens"`
	TotalTokens      int              `json:"totalTokens"`
	CacheReadTokens  int              `json:"cacheReadTokens"`
	CacheWriteTokens int              `json:"cacheWriteTokens"`
	Cycles           []cycleUsageJSON `json:"cycles,omitempty"`
}

type cycleUsageJSON struct {
	InputTokens      int `json:"inputTokens"`
	OutputTokens     int `json:"outputTokens"`
	CacheReadTokens  int `json:"cacheReadTokens"`
	CacheWriteTokens int `json:"cacheWriteTokens"`
}

// MarshalJSON emits the TokenUsage JSON form.
func (u TokenUsage) MarshalJSON() ([]byte, error) {
	j := usageJSON{u.InputTokens, u.OutputTokens, u.TotalTokens, u.CacheReadTokens, u.CacheWriteTokens, nil}
	for _, c := range u.Cycles {
		j.Cycles = append(j.Cycles, cycleUsageJSON(c))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the TokenUsage JSON form.
func (u *TokenUsage) UnmarshalJSON(data []byte) error {
	var j usageJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	*u = TokenUsage{InputTokens: j.InputTokens, OutputTokens: j.OutputTokens, TotalTokens: j.TotalTokens,
		CacheReadTokens: j.CacheReadTokens, CacheWriteTokens: j.CacheWriteTokens}
	for _, c := range j.Cycles {
		u.Cycles = append(u.Cycles, CycleUsage(c))
	}
	return nil
}

type executionJSON struct {
	ToolName   string         `json:"toolName"`
	ToolCallID string         `json:"toolCallId"`
	Arguments  map[string]any `json:"arguments"`
	Result     any            `json:"result"`
	IsError    bool           `json:"isError"`
	Duration   int64          `json:"duration"` // milliseconds
	Approved   *bool          `json:"approved,omitempty"`
}

// MarshalJSON emits the ToolExecution JSON form (duration in milliseconds).
func (x ToolExecution) MarshalJSON() ([]byte, error) {
	args := x.Arguments
	if args == nil {
		args = map[string]any{}
	}
	return json.Marshal(executionJSON{x.ToolName, x.ToolCallID, args, x.Result, x.IsError, x.Duration.Milliseconds(), x.Approved})
}

// UnmarshalJSON reads the ToolExecution JSON form.
func (x *ToolExecution) UnmarshalJSON(data []byte) error {
	var j executionJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("tool execution: %w", err)
	}
	*x = ToolExecution{ToolName: j.ToolName, ToolCallID: j.ToolCallID, Arguments: j.Arguments, Result: j.Result,
		IsError: j.IsError, Duration: time.Duration(j.Duration) * time.Millisecond, Approved: j.Approved}
	return nil
}

type turnJSON struct {
	Messages       messageList     `json:"messages"`
	Response       json.RawMessage `json:"response"`
	ToolExecutions []ToolExecution `json:"toolExecutions"`
	Usage          TokenUsage      `json:"usage"`
	Cycles         int             `json:"cycles"`
	Data           any             `json:"data,omitempty"`
}

// MarshalJSON emits TurnJSON: the Turn with MessageJSON messages.
func (t *Turn) MarshalJSON() ([]byte, error) {
	j := turnJSON{Messages: messageList(t.Messages), ToolExecutions: t.ToolExecutions, Usage: t.Usage, Cycles: t.Cycles, Data: t.Data}
	if j.ToolExecutions == nil {
		j.ToolExecutions = []ToolExecution{}
	}
	if t.Response != nil {
		raw, err := t.Response.MarshalJSON()
		if err != nil {
			return nil, err
		}
		j.Response = raw
	} else {
		j.Response = json.RawMessage("null")
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads TurnJSON. When the response is one of the turn's
// messages (by id), Response points at that message.
func (t *Turn) UnmarshalJSON(data []byte) error {
	var j turnJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("turn: %w", err)
	}
	out := Turn{Messages: j.Messages, ToolExecutions: j.ToolExecutions, Usage: j.Usage, Cycles: j.Cycles, Data: j.Data}
	if len(j.Response) > 0 && string(j.Response) != "null" {
		m, err := UnmarshalMessage(j.Response)
		if err != nil {
			return fmt.Errorf("turn: response: %w", err)
		}
		a, ok := m.(*AssistantMessage)
		if !ok {
			return fmt.Errorf("turn: response is a %s message", m.Type())
		}
		out.Response = a
		for _, m := range out.Messages {
			if am, ok := m.(*AssistantMessage); ok && am.ID == a.ID {
				out.Response = am
			}
		}
	}
	*t = out
	return nil
}

type deltaJSON struct {
	Text          string `json:"text,omitempty"`
	Data          []byte `json:"data,omitempty"`
	ToolCallID    string `json:"toolCallId,omitempty"`
	ToolName      string `json:"toolName,omitempty"`
	ArgumentsJSON string `json:"argumentsJson,omitempty"`
	Result        any    `json:"result,omitempty"`
	IsError       bool   `json:"isError,omitempty"`
	Timestamp     int64  `json:"timestamp,omitempty"` // Unix milliseconds
	Parsed        any    `json:"parsed,omitempty"`
}

type streamEventJSON struct {
	Type  StreamEventType `json:"type"`
	Index int             `json:"index"`
	Delta deltaJSON       `json:"delta"`
}

// MarshalJSON emits the StreamEvent JSON form {type, index, delta}; the
// delta's timestamp is Unix milliseconds and data is base64.
func (ev StreamEvent) MarshalJSON() ([]byte, error) {
	d := ev.Delta
	j := streamEventJSON{Type: ev.Type, Index: ev.Index, Delta: deltaJSON{
		Text: d.Text, Data: d.Data, ToolCallID: d.ToolCallID, ToolName: d.ToolName,
		ArgumentsJSON: d.ArgumentsJSON, Result: d.Result, IsError: d.IsError, Parsed: d.Parsed,
	}}
	if !d.Timestamp.IsZero() {
		j.Delta.Timestamp = d.Timestamp.UnixMilli()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the StreamEvent JSON form; the type must be one of
// the 13 UPP event types.
func (ev *StreamEvent) UnmarshalJSON(data []byte) error {
	var j streamEventJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("stream event: %w", err)
	}
	known := false
	for _, t := range streamEventTypes {
		known = known || t == j.Type
	}
	if !known {
		return fmt.Errorf("stream event: unknown type %q", j.Type)
	}
	d := j.Delta
	*ev = StreamEvent{Type: j.Type, Index: j.Index, Delta: EventDelta{
		Text: d.Text, Data: d.Data, ToolCallID: d.ToolCallID, ToolName: d.ToolName,
		ArgumentsJSON: d.ArgumentsJSON, Result: d.Result, IsError: d.IsError, Parsed: d.Parsed,
	}}
	if d.Timestamp != 0 {
		ev.Delta.Timestamp = time.UnixMilli(d.Timestamp).UTC()
	}
	return nil
}
