package openai

// The Responses API: POST {base}/responses.

import (
	"encoding/json"
	"io"
	"maps"
	"strings"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/llm"
)

// responsesBody builds a Responses request body.
func (b builder) responsesBody(req *llm.Request, stream bool) (map[string]any, error) {
	body := baseBody(req, stream)
	input := make([]any, 0, len(req.Messages))
	for _, m := range req.Messages {
		items, err := b.responsesItems(m)
		if err != nil {
			return nil, err
		}
		input = append(input, items...)
	}
	body["input"] = input
	if req.System != "" {
		body["instructions"] = req.System
	}
	if len(req.Tools) > 0 {
		tools := make([]any, len(req.Tools))
		for i, t := range req.Tools {
			// strict defaults to true here; UPP schemas are arbitrary.
			def := functionDef(t)
			def["type"], def["strict"] = "function", b.strict
			b.toolOverrides(t, def)
			tools[i] = def
		}
		withTools(body, tools)
	}
	if req.Structure != nil {
		format := b.jsonSchema(req.Structure)
		format["type"] = "json_schema"
		text := mergedObject(body, "text")
		text["format"] = format
		body["text"] = text
	}
	return body, nil
}

// responsesItems converts one message to input items.
func (b builder) responsesItems(m llm.Message) ([]any, error) {
	switch m := m.(type) {
	case *llm.UserMessage:
		parts, err := b.responsesUserContent(m.Content)
		if err != nil {
			return nil, err
		}
		return []any{map[string]any{"role": "user", "content": parts}}, nil
	case *llm.AssistantMessage:
		return b.responsesAssistant(m)
	case *llm.ToolResultMessage:
		out := make([]any, len(m.Results))
		for i, r := range m.Results {
			out[i] = map[string]any{"type": "function_call_output", "call_id": r.ToolCallID, "output": llm.ResultText(r.Result)}
		}
		return out, nil
	}
	return nil, b.invalid("unsupported message type %T", m)
}

func (b builder) responsesUserContent(blocks []llm.ContentBlock) ([]any, error) {
	parts := make([]any, 0, len(blocks))
	for _, blk := range blocks {
		switch v := blk.(type) {
		case llm.TextBlock:
			parts = append(parts, map[string]any{"type": "input_text", "text": v.Text})
		case llm.ImageBlock:
			u, err := b.imageURL(v)
			if err != nil {
				return nil, err
			}
			parts = append(parts, map[string]any{"type": "input_image", "image_url": u, "detail": "auto"})
		case llm.DocumentBlock:
			switch v.Source.Type {
			case llm.SourceText:
				parts = append(parts, map[string]any{"type": "input_text", "text": documentText(v)})
			case llm.SourceURL:
				if v.Source.URL == "" {
					return nil, b.invalid("document has an empty URL")
				}
				parts = append(parts, map[string]any{"type": "input_file", "file_url": v.Source.URL})
			default:
				name, data, err := b.documentFile(v)
				if err != nil {
					return nil, err
				}
				parts = append(parts, map[string]any{"type": "input_file", "filename": name, "file_data": data})
			}
		default:
			return nil, b.invalid("the Responses API does not take %s input", blk.BlockType())
		}
	}
	return parts, nil
}

// metaItems returns the output items recorded in an assistant message's
// metadata.
func metaItems(m *llm.AssistantMessage, provider string) []map[string]any {
	meta := m.Metadata.Provider(provider)
	switch v := meta["items"].(type) {
	case []any:
		out := make([]map[string]any, 0, len(v))
		for _, x := range v {
			if it, ok := x.(map[string]any); ok {
				out = append(out, it)
			}
		}
		return out
	case []map[string]any:
		return v
	}
	return nil
}

// responsesAssistant rebuilds an assistant reply's output items: in the
// recorded order with their ids when the metadata has them (reasoning
// models require each reasoning item to be followed by its item), else as
// one message and the function calls.
func (b builder) responsesAssistant(m *llm.AssistantMessage) ([]any, error) {
	texts, _, err := b.assistantContent(m, "Responses API") // reasoning goes back through its recorded item only
	if err != nil {
		return nil, err
	}
	var out []any
	used := make([]bool, len(m.ToolCalls))
	next := 0
	for _, it := range metaItems(m, b.provider) {
		typ, _ := it["type"].(string)
		switch typ {
		case "":
		case "message":
			if next < len(texts) {
				out = append(out, assistantItem(texts[next:next+1], it))
				next++
			}
		case "function_call":
			callID, _ := it["call_id"].(string)
			for i, c := range m.ToolCalls {
				if !used[i] && c.ToolCallID == callID {
					item, err := b.functionCallItem(c)
					if err != nil {
						return nil, err
					}
					if id, _ := it["id"].(string); id != "" {
						item["id"] = id
					}
					out = append(out, item)
					used[i] = true
					break
				}
			}
		default: // reasoning and provider-native tool items, verbatim
			out = append(out, maps.Clone(it))
		}
	}
	if next < len(texts) {
		out = append(out, assistantItem(texts[next:], nil))
	}
	for i, c := range m.ToolCalls {
		if !used[i] {
			item, err := b.functionCallItem(c)
			if err != nil {
				return nil, err
			}
			out = append(out, item)
		}
	}
	return out, nil
}

// assistantItem is an output message item carrying texts, with the id,
// status and phase of the recorded item when there is one.
func assistantItem(texts []string, recorded map[string]any) map[string]any {
	parts := make([]any, len(texts))
	for i, t := range texts {
		parts[i] = map[string]any{"type": "output_text", "text": t, "annotations": []any{}}
	}
	item := map[string]any{"type": "message", "role": "assistant", "content": parts}
	for _, k := range []string{"id", "status", "phase"} {
		if v, _ := recorded[k].(string); v != "" {
			item[k] = v
		}
	}
	return item
}

func (b builder) functionCallItem(c llm.ToolCall) (map[string]any, error) {
	args, err := b.arguments(c)
	if err != nil {
		return nil, err
	}
	return map[string]any{"type": "function_call", "call_id": c.ToolCallID, "name": c.ToolName, "arguments": args}, nil
}

// Responses wire types.

type respObject struct {
	ID                string            `json:"id"`
	Model             string            `json:"model"`
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	Usage             *respUsage        `json:"usage"`
	Error             *vendorError      `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

type respUsage struct {
	InputTokens        int           `json:"input_tokens"`
	OutputTokens       int           `json:"output_tokens"`
	InputTokensDetails *tokenDetails `json:"input_tokens_details"`
}

func (u *respUsage) usage() llm.TokenUsage {
	if u == nil {
		return llm.TokenUsage{}
	}
	return tokenUsage(u.InputTokens, u.OutputTokens, u.InputTokensDetails)
}

type respItem struct {
	Type      string     `json:"type"`
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Phase     string     `json:"phase"`
	CallID    string     `json:"call_id"`
	Name      string     `json:"name"`
	Arguments flexString `json:"arguments"`
	Content   []respPart `json:"content"`
	Summary   []respPart `json:"summary"`
}

type respPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// messageText returns a message item's text and refusal.
func (it *respItem) messageText() (text, refusal string) {
	var t, r strings.Builder
	for _, p := range it.Content {
		t.WriteString(p.Text)
		r.WriteString(p.Refusal)
	}
	return t.String(), r.String()
}

// reasoningText returns a reasoning item's summary, or its reasoning text
// when it has no summary.
func (it *respItem) reasoningText() string {
	parts := it.Summary
	if len(parts) == 0 {
		parts = it.Content
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n\n")
}

// responsesReply converts a response object. callIDs gives the IDs
// generated while streaming for function calls that had none, by output
// index.
func responsesReply(obj *respObject, o decodeOptions, callIDs map[int]string) (*llm.Response, error) {
	if obj.Status == "failed" {
		ve := obj.Error
		if ve == nil {
			ve = &vendorError{Message: "response failed"}
		}
		return nil, streamError(o.provider, ve)
	}
	var (
		content  []llm.ContentBlock
		calls    []llm.ToolCall
		items    = []any{}
		text     strings.Builder
		refusals strings.Builder
	)
	for i, raw := range obj.Output {
		var it respItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, o.invalid("malformed output item: %v", err)
		}
		switch it.Type {
		case "":
			return nil, o.invalid("output item %d has no type", i)
		case "message":
			t, r := it.messageText()
			text.WriteString(t)
			refusals.WriteString(r)
			content = append(content, llm.TextBlock{Text: t + r})
			rec := map[string]any{"type": "message"}
			for k, v := range map[string]string{"id": it.ID, "status": it.Status, "phase": it.Phase} {
				if v != "" {
					rec[k] = v
				}
			}
			items = append(items, rec)
		case "function_call":
			id := it.CallID
			if id == "" {
				if id = callIDs[i]; id == "" {
					id = newCallID()
				}
			}
			calls = append(calls, toolCall(id, it.Name, string(it.Arguments)))
			rec := map[string]any{"type": "function_call", "call_id": id}
			if it.ID != "" {
				rec["id"] = it.ID
			}
			items = append(items, rec)
		default:
			if it.Type == "reasoning" {
				content = append(content, llm.ReasoningBlock{Text: it.reasoningText()})
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, o.invalid("malformed output item: %v", err)
			}
			items = append(items, m)
		}
	}
	stop := obj.Status
	meta := map[string]any{"api": string(Responses), "id": obj.ID, "model": obj.Model, "status": obj.Status, "items": items}
	if obj.IncompleteDetails != nil && obj.IncompleteDetails.Reason != "" {
		meta["incomplete_reason"] = obj.IncompleteDetails.Reason
		if obj.Status == "incomplete" {
			stop = obj.IncompleteDetails.Reason
		}
	}
	if refusals.Len() > 0 {
		meta["refusal"] = refusals.String()
	}
	msg := llm.NewAssistantMessage(content, calls)
	msg.Metadata = llm.Metadata{o.provider: meta}
	return &llm.Response{Message: msg, Usage: obj.Usage.usage(), StopReason: stop, Data: o.data(text.String())}, nil
}

// decodeResponsesResponse decodes a non-streamed Responses response.
func decodeResponsesResponse(data []byte, o decodeOptions) (*llm.Response, error) {
	var obj respObject
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, o.invalid("malformed response: %v", err)
	}
	if obj.Status == "" && obj.Output == nil {
		if obj.Error != nil {
			return nil, streamError(o.provider, obj.Error)
		}
		return nil, o.invalid("response has neither status nor output")
	}
	return responsesReply(&obj, o, nil)
}

// respEvent is one Responses stream event (the union of the fields used).
type respEvent struct {
	Type         string          `json:"type"`
	Response     *respObject     `json:"response"`
	OutputIndex  *int            `json:"output_index"`
	ItemID       string          `json:"item_id"`
	Item         json.RawMessage `json:"item"`
	Delta        json.RawMessage `json:"delta"`
	SummaryIndex int             `json:"summary_index"`
	// The error event: fields at the top level, or nested (compatible
	// servers).
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Error   *vendorError    `json:"error"`
}

// respState is one output item being streamed.
type respState struct {
	outputIndex *int
	typ         string
	id          string
	callID      string
	name        string
	block       *sblock
	added       map[string]any
	done        json.RawMessage
	text        strings.Builder
	summary     bool // reasoning text came from summary deltas
	lastSummary int
}

// respStream is the state of one Responses stream.
type respStream struct {
	o       decodeOptions
	bl      *blocks
	states  []*respState
	byIndex map[int]*respState
	byID    map[string]*respState
}

// find returns the item an event refers to, nil when it is new.
func (s *respStream) find(ev *respEvent) *respState {
	if ev.ItemID != "" {
		if st := s.byID[ev.ItemID]; st != nil {
			return st
		}
	}
	if ev.OutputIndex != nil {
		return s.byIndex[*ev.OutputIndex]
	}
	return nil
}

// state returns the item an event refers to, creating it (and its block)
// for servers that skip output_item.added.
func (s *respStream) state(ev *respEvent, typ string) *respState {
	if st := s.find(ev); st != nil {
		return st
	}
	return s.add(ev.OutputIndex, &respItem{Type: typ, ID: ev.ItemID}, nil)
}

func (s *respStream) add(outputIndex *int, it *respItem, raw map[string]any) *respState {
	st := &respState{outputIndex: outputIndex, typ: it.Type, id: it.ID, callID: it.CallID, name: it.Name, added: raw}
	s.states = append(s.states, st)
	if outputIndex != nil {
		s.byIndex[*outputIndex] = st
	}
	if it.ID != "" {
		s.byID[it.ID] = st
	}
	switch it.Type {
	case "message":
		st.block = s.bl.begin(kindText, "", "")
	case "reasoning":
		st.block = s.bl.begin(kindReasoning, "", "")
	case "function_call":
		if st.callID == "" {
			st.callID = newCallID()
		}
		st.block = s.bl.begin(kindTool, st.callID, st.name)
	}
	return st
}

// appendDelta adds a fragment to st and emits it.
func (s *respStream) appendDelta(st *respState, frag string) {
	st.text.WriteString(frag)
	if st.block != nil {
		s.bl.delta(st.block, frag)
	}
}

// doneText is the text of a finished item that streamed no deltas.
func doneText(it *respItem) string {
	switch it.Type {
	case "message":
		t, r := it.messageText()
		return t + r
	case "reasoning":
		return it.reasoningText()
	case "function_call":
		return string(it.Arguments)
	}
	return ""
}

// synthesized returns an item built from what was streamed, for servers
// whose final response carries no output.
func (st *respState) synthesized() json.RawMessage {
	if st.done != nil {
		return st.done
	}
	item := map[string]any{}
	maps.Copy(item, st.added)
	item["type"] = st.typ
	if st.id != "" {
		item["id"] = st.id
	}
	text := st.text.String()
	switch st.typ {
	case "message":
		item["content"] = []any{map[string]any{"type": "output_text", "text": text}}
	case "reasoning":
		key := "content"
		part := map[string]any{"type": "reasoning_text", "text": text}
		if st.summary {
			key, part = "summary", map[string]any{"type": "summary_text", "text": text}
		}
		if text != "" {
			item[key] = []any{part}
		}
	case "function_call":
		item["call_id"], item["name"], item["arguments"] = st.callID, st.name, text
	}
	data, _ := json.Marshal(item)
	return data
}

// decodeResponsesStream decodes a Responses SSE stream, emitting events,
// and returns the assembled response. Errors reading r are returned as
// they are; protocol failures are *llm.Error.
func decodeResponsesStream(r io.Reader, o decodeOptions, emit func(llm.StreamEvent)) (*llm.Response, error) {
	dec := sse.NewDecoder(r)
	s := &respStream{o: o, bl: &blocks{emit: emit, structured: o.structured},
		byIndex: map[int]*respState{}, byID: map[string]*respState{}}
	for {
		ev, err := o.nextEvent(dec)
		if err != nil {
			return nil, err
		}
		var e respEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, o.invalid("malformed stream event: %v", err)
		}
		if e.Type == "" {
			e.Type = ev.Type
		}
		resp, err := s.handle(&e)
		if resp != nil || err != nil {
			return resp, err
		}
	}
}

// handle processes one event; it returns the response at the terminal
// event.
func (s *respStream) handle(e *respEvent) (*llm.Response, error) {
	o := s.o
	switch e.Type {
	case "response.created", "response.in_progress", "response.queued":
		s.bl.messageStart()
	case "response.output_item.added":
		var it respItem
		var raw map[string]any
		if err := json.Unmarshal(e.Item, &it); err != nil {
			return nil, o.invalid("malformed output item: %v", err)
		}
		if err := json.Unmarshal(e.Item, &raw); err != nil {
			return nil, o.invalid("malformed output item: %v", err)
		}
		s.add(e.OutputIndex, &it, raw)
	case "response.output_text.delta", "response.refusal.delta":
		frag, ok := optionalString(e.Delta)
		if !ok {
			return nil, o.invalid("%s: delta is not text", e.Type)
		}
		s.appendDelta(s.state(e, "message"), frag)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		frag, ok := optionalString(e.Delta)
		if !ok {
			return nil, o.invalid("%s: delta is not text", e.Type)
		}
		st := s.state(e, "reasoning")
		if e.Type == "response.reasoning_summary_text.delta" {
			if st.summary && e.SummaryIndex != st.lastSummary && frag != "" {
				frag = "\n\n" + frag
			}
			st.summary, st.lastSummary = true, e.SummaryIndex
		}
		s.appendDelta(st, frag)
	case "response.function_call_arguments.delta":
		frag, ok := optionalString(e.Delta)
		if !ok {
			return nil, o.invalid("%s: delta is not text", e.Type)
		}
		s.appendDelta(s.state(e, "function_call"), frag)
	case "response.output_item.done":
		var it respItem
		if err := json.Unmarshal(e.Item, &it); err != nil {
			return nil, o.invalid("malformed output item: %v", err)
		}
		if e.ItemID == "" {
			e.ItemID = it.ID
		}
		st := s.find(e)
		if st == nil { // never announced
			st = s.add(e.OutputIndex, &it, nil)
		}
		if st.text.Len() == 0 {
			s.appendDelta(st, doneText(&it))
		}
		st.done = append(json.RawMessage(nil), e.Item...)
		s.bl.stop(st.block)
	case "response.completed", "response.incomplete":
		if e.Response == nil {
			return nil, o.invalid("%s without a response", e.Type)
		}
		s.bl.finish()
		return s.final(e.Response)
	case "response.failed":
		ve := &vendorError{Message: "response failed"}
		if e.Response != nil && e.Response.Error != nil {
			ve = e.Response.Error
		}
		return nil, streamError(o.provider, ve)
	case "error":
		ve := e.Error
		if ve == nil {
			ve = &vendorError{Message: e.Message, Code: e.Code}
		}
		return nil, streamError(o.provider, ve)
	}
	return nil, nil
}

// final assembles the response: from the terminal event's output, else
// from the streamed items.
func (s *respStream) final(obj *respObject) (*llm.Response, error) {
	callIDs := map[int]string{}
	for _, st := range s.states {
		if st.typ == "function_call" && st.outputIndex != nil {
			callIDs[*st.outputIndex] = st.callID
		}
	}
	if len(obj.Output) == 0 && len(s.states) > 0 {
		out := *obj
		out.Output = make([]json.RawMessage, 0, len(s.states))
		clear(callIDs)
		for _, st := range s.states {
			if st.typ == "function_call" {
				callIDs[len(out.Output)] = st.callID
			}
			out.Output = append(out.Output, st.synthesized())
		}
		obj = &out
	}
	return responsesReply(obj, s.o, callIDs)
}
