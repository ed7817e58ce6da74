package openai

// The Chat Completions API: POST {base}/chat/completions.

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/llm"
)

// chatBody builds a Chat Completions request body.
func (b builder) chatBody(req *llm.Request, stream bool) (map[string]any, error) {
	body := baseBody(req, stream)
	msgs := make([]any, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": req.System})
	}
	for _, m := range req.Messages {
		out, err := b.chatMessages(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, out...)
	}
	body["messages"] = msgs
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			fn := functionDef(t)
			if b.strict {
				fn["strict"] = true
			}
			b.toolOverrides(t, fn)
			tools[i] = map[string]any{"type": "function", "function": fn}
		}
		withTools(body, tools)
	}
	if req.Structure != nil {
		body["response_format"] = map[string]any{"type": "json_schema", "json_schema": b.jsonSchema(req.Structure)}
	}
	if stream {
		so := mergedObject(body, "stream_options")
		so["include_usage"] = true
		body["stream_options"] = so
	}
	return body, nil
}

// chatMessages converts one message; a tool result message becomes one
// "tool" message per result.
func (b builder) chatMessages(m llm.Message) ([]any, error) {
	switch m := m.(type) {
	case *llm.UserMessage:
		content, err := b.chatUserContent(m.Content)
		if err != nil {
			return nil, err
		}
		return []any{map[string]any{"role": "user", "content": content}}, nil
	case *llm.AssistantMessage:
		msg, err := b.chatAssistant(m)
		if err != nil {
			return nil, err
		}
		return []any{msg}, nil
	case *llm.ToolResultMessage:
		out := make([]any, len(m.Results))
		for i, r := range m.Results {
			out[i] = map[string]any{"role": "tool", "tool_call_id": r.ToolCallID, "content": llm.ResultText(r.Result)}
		}
		return out, nil
	}
	return nil, b.invalid("unsupported message type %T", m)
}

// chatUserContent returns a plain string for a single text block, else
// content parts.
func (b builder) chatUserContent(blocks []llm.ContentBlock) (any, error) {
	if len(blocks) == 1 {
		if t, ok := blocks[0].(llm.TextBlock); ok {
			return t.Text, nil
		}
	}
	parts := make([]any, 0, len(blocks))
	for _, blk := range blocks {
		switch v := blk.(type) {
		case llm.TextBlock:
			parts = append(parts, map[string]any{"type": "text", "text": v.Text})
		case llm.ImageBlock:
			u, err := b.imageURL(v)
			if err != nil {
				return nil, err
			}
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}})
		case llm.DocumentBlock:
			switch v.Source.Type {
			case llm.SourceText:
				parts = append(parts, map[string]any{"type": "text", "text": documentText(v)})
			case llm.SourceURL:
				return nil, b.invalid("the Chat Completions API cannot take a document by URL; send its data, or use the Responses API")
			default:
				name, data, err := b.documentFile(v)
				if err != nil {
					return nil, err
				}
				parts = append(parts, map[string]any{"type": "file", "file": map[string]any{"filename": name, "file_data": data}})
			}
		case llm.AudioBlock:
			format, ok := audioFormat(v.MimeType)
			if !ok {
				return nil, b.invalid("audio of type %q is not supported: the Chat Completions API takes WAV or MP3", v.MimeType)
			}
			parts = append(parts, map[string]any{"type": "input_audio", "input_audio": map[string]any{
				"data": base64.StdEncoding.EncodeToString(v.Data), "format": format,
			}})
		default:
			return nil, b.invalid("the Chat Completions API does not take %s input", blk.BlockType())
		}
	}
	return parts, nil
}

func (b builder) chatAssistant(m *llm.AssistantMessage) (map[string]any, error) {
	texts, reasoning, err := b.assistantContent(m, "Chat Completions API")
	if err != nil {
		return nil, err
	}
	msg := map[string]any{"role": "assistant"}
	switch {
	case len(texts) > 1:
		parts := make([]any, len(texts))
		for i, t := range texts {
			parts[i] = map[string]any{"type": "text", "text": t}
		}
		msg["content"] = parts
	case len(texts) == 1:
		msg["content"] = texts[0]
	case len(m.ToolCalls) == 0:
		msg["content"] = ""
	}
	// Servers that emit reasoning in a field want it back there on
	// tool-calling turns (DeepSeek); others ignore it.
	if meta := m.Metadata.Provider(b.provider); meta != nil && len(reasoning) > 0 {
		if field, _ := meta["reasoning_field"].(string); field == "reasoning_content" || field == "reasoning" {
			msg[field] = strings.Join(reasoning, "\n\n")
		}
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args, err := b.arguments(c)
			if err != nil {
				return nil, err
			}
			calls[i] = map[string]any{"id": c.ToolCallID, "type": "function",
				"function": map[string]any{"name": c.ToolName, "arguments": args}}
		}
		msg["tool_calls"] = calls
	}
	return msg, nil
}

// Chat Completions wire types (response and stream chunk share them).

type chatCompletion struct {
	ID                string       `json:"id"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             *chatUsage   `json:"usage"`
	SystemFingerprint string       `json:"system_fingerprint"`
	ServiceTier       string       `json:"service_tier"`
	Error             *vendorError `json:"error"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Delta        chatMessage `json:"delta"`
	FinishReason string      `json:"finish_reason"`
}

type chatMessage struct {
	Content          json.RawMessage `json:"content"`
	Refusal          *string         `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []chatToolCall  `json:"tool_calls"`
}

type chatToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string     `json:"name"`
		Arguments flexString `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	PromptTokensDetails *tokenDetails `json:"prompt_tokens_details"`
}

func (u *chatUsage) usage() llm.TokenUsage {
	if u == nil {
		return llm.TokenUsage{}
	}
	return tokenUsage(u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails)
}

// optionalString decodes a string field that may be null or absent; ok is
// false for any other JSON value.
func optionalString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// contentText decodes message content: a string, null, or text parts.
func contentText(raw json.RawMessage) (string, bool) {
	if s, ok := optionalString(raw); ok {
		return s, true
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
		sb.WriteString(p.Refusal)
	}
	return sb.String(), true
}

// reasoningField returns the message's non-standard reasoning and the field
// it came in; a non-string value is ignored.
func reasoningField(m *chatMessage) (text, field string) {
	if s, ok := optionalString(m.ReasoningContent); ok && s != "" {
		return s, "reasoning_content"
	}
	if s, ok := optionalString(m.Reasoning); ok && s != "" {
		return s, "reasoning"
	}
	return "", ""
}

// chatReply is a decoded reply, from a response or assembled from a stream.
type chatReply struct {
	id, model, fingerprint, serviceTier string
	finishReason                        string
	text, refusal                       string
	reasoning, reasoningField           string
	calls                               []llm.ToolCall
	usage                               llm.TokenUsage
}

func (r *chatReply) response(o decodeOptions) *llm.Response {
	var content []llm.ContentBlock
	if r.reasoning != "" {
		content = append(content, llm.ReasoningBlock{Text: r.reasoning})
	}
	text := r.text + r.refusal
	if text != "" {
		content = append(content, llm.TextBlock{Text: text})
	}
	msg := llm.NewAssistantMessage(content, r.calls)
	meta := map[string]any{"api": string(ChatCompletions), "id": r.id, "model": r.model, "finish_reason": r.finishReason}
	for k, v := range map[string]string{
		"system_fingerprint": r.fingerprint, "service_tier": r.serviceTier,
		"reasoning_field": r.reasoningField, "refusal": r.refusal,
	} {
		if v != "" {
			meta[k] = v
		}
	}
	msg.Metadata = llm.Metadata{o.provider: meta}
	return &llm.Response{Message: msg, Usage: r.usage, StopReason: r.finishReason, Data: o.data(r.text)}
}

// decodeChatResponse decodes a non-streamed Chat Completions response.
func decodeChatResponse(data []byte, o decodeOptions) (*llm.Response, error) {
	var c chatCompletion
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, o.invalid("malformed response: %v", err)
	}
	if c.Error != nil && len(c.Choices) == 0 {
		return nil, streamError(o.provider, c.Error)
	}
	choice := firstChoice(c.Choices)
	if choice == nil {
		return nil, o.invalid("response has no choices")
	}
	r := &chatReply{id: c.ID, model: c.Model, fingerprint: c.SystemFingerprint, serviceTier: c.ServiceTier,
		finishReason: choice.FinishReason, usage: c.Usage.usage()}
	m := &choice.Message
	var ok bool
	if r.text, ok = contentText(m.Content); !ok {
		return nil, o.invalid("message content is neither text nor parts")
	}
	if m.Refusal != nil {
		r.refusal = *m.Refusal
	}
	r.reasoning, r.reasoningField = reasoningField(m)
	for _, tc := range m.ToolCalls {
		id := tc.ID
		if id == "" {
			id = newCallID()
		}
		r.calls = append(r.calls, toolCall(id, tc.Function.Name, string(tc.Function.Arguments)))
	}
	return r.response(o), nil
}

// firstChoice returns the choice with index 0 (the first listed when none
// says so).
func firstChoice(cs []chatChoice) *chatChoice {
	for i := range cs {
		if cs[i].Index == 0 {
			return &cs[i]
		}
	}
	return nil
}

// chatCall is a tool call being streamed.
type chatCall struct {
	block *sblock
	args  strings.Builder
}

// decodeChatStream decodes a Chat Completions SSE stream, emitting events,
// and returns the assembled response. Errors reading r are returned as
// they are; protocol failures are *llm.Error.
func decodeChatStream(r io.Reader, o decodeOptions, emit func(llm.StreamEvent)) (*llm.Response, error) {
	dec := sse.NewDecoder(r)
	bl := &blocks{emit: emit, structured: o.structured}
	reply := &chatReply{}
	var text, refusal, reasoning strings.Builder
	var textBlk, reasoningBlk *sblock
	calls := map[int]*chatCall{}
	var order []*chatCall
	for {
		ev, err := o.nextEvent(dec)
		if err != nil {
			return nil, err
		}
		data := strings.TrimSpace(string(ev.Data))
		if data == "[DONE]" {
			break
		}
		var c chatCompletion
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			return nil, o.invalid("malformed stream chunk: %v", err)
		}
		if c.Error != nil {
			return nil, streamError(o.provider, c.Error)
		}
		bl.messageStart()
		if reply.id == "" {
			reply.id = c.ID
		}
		if c.Model != "" {
			reply.model = c.Model
		}
		if c.SystemFingerprint != "" {
			reply.fingerprint = c.SystemFingerprint
		}
		if c.ServiceTier != "" {
			reply.serviceTier = c.ServiceTier
		}
		if c.Usage != nil {
			reply.usage = c.Usage.usage()
		}
		choice := firstChoice(c.Choices)
		if choice == nil {
			continue
		}
		d := &choice.Delta
		if s, field := reasoningField(d); s != "" {
			if reasoningBlk == nil || bl.open != reasoningBlk {
				reasoningBlk = bl.begin(kindReasoning, "", "")
			}
			reply.reasoningField = field
			reasoning.WriteString(s)
			bl.delta(reasoningBlk, s)
		}
		s, ok := contentText(d.Content)
		if !ok {
			return nil, o.invalid("delta content is neither text nor parts")
		}
		var ref string
		if d.Refusal != nil {
			ref = *d.Refusal
		}
		if s+ref != "" {
			if textBlk == nil || bl.open != textBlk {
				textBlk = bl.begin(kindText, "", "")
			}
			text.WriteString(s)
			refusal.WriteString(ref)
			bl.delta(textBlk, s+ref)
		}
		for _, tc := range d.ToolCalls {
			var call *chatCall
			key := -1 - len(order) // servers that send no index: by id, else the last call
			if tc.Index != nil {
				key = *tc.Index
				call = calls[key]
			} else if n := len(order); n > 0 && (tc.ID == "" || tc.ID == order[n-1].block.callID) {
				call = order[n-1]
			}
			if call == nil {
				id := tc.ID
				if id == "" {
					id = newCallID()
				}
				call = &chatCall{block: bl.begin(kindTool, id, tc.Function.Name)}
				calls[key] = call
				order = append(order, call)
			} else if call.block.name == "" && tc.Function.Name != "" {
				call.block.name = tc.Function.Name
			}
			frag := string(tc.Function.Arguments)
			call.args.WriteString(frag)
			bl.delta(call.block, frag)
		}
		if choice.FinishReason != "" {
			reply.finishReason = choice.FinishReason
		}
	}
	bl.finish()
	reply.text, reply.refusal, reply.reasoning = text.String(), refusal.String(), reasoning.String()
	if reply.reasoning == "" {
		reply.reasoningField = ""
	}
	for _, c := range order {
		reply.calls = append(reply.calls, toolCall(c.block.callID, c.block.name, c.args.String()))
	}
	return reply.response(o), nil
}
