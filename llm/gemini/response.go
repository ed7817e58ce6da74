package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
)

// generateResponse is a GenerateContentResponse: the whole answer of
// generateContent, or one chunk of a stream. Error is set on a stream's
// error event.
type generateResponse struct {
	Candidates     []candidate     `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	ModelVersion   string          `json:"modelVersion"`
	ResponseID     string          `json:"responseId"`
	Error          *apiError       `json:"error"`
}

type candidate struct {
	Content       *responseContent `json:"content"`
	FinishReason  string           `json:"finishReason"`
	FinishMessage string           `json:"finishMessage"`
}

type responseContent struct {
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

type promptFeedback struct {
	BlockReason        string `json:"blockReason"`
	BlockReasonMessage string `json:"blockReasonMessage"`
}

type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

// filterReasons are the finish reasons of a candidate stopped by a content
// filter.
var filterReasons = map[string]bool{
	"SAFETY": true, "RECITATION": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true,
	"SPII": true, "IMAGE_SAFETY": true, "IMAGE_PROHIBITED_CONTENT": true, "IMAGE_RECITATION": true,
}

func invalidResponse(format string, args ...any) *llm.Error {
	return llm.NewError(llm.InvalidResponse, name, fmt.Sprintf(format, args...), nil)
}

// decodeResponse decodes a generateContent response body.
func decodeResponse(data []byte, structured bool) (*llm.Response, error) {
	var r generateResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, llm.NewError(llm.InvalidResponse, name, "malformed response JSON", err)
	}
	a := &assembler{structured: structured}
	if err := a.add(&r); err != nil {
		return nil, err
	}
	return a.finish()
}

type itemKind int

const (
	kindText itemKind = iota
	kindThought
	kindImage
	kindAudio
	kindVideo
	kindCall
)

// item is one block of the reply in part order: a content block or a tool
// call.
type item struct {
	kind  itemKind
	index int // position in part order: the stream event Index
	text  strings.Builder
	data  []byte
	mime  string
	call  int // index into assembler.calls, for kindCall
	sig   string
}

// assembler builds a Response from the parts of one response or of a
// stream's chunks, emitting stream events when emit is set. Consecutive
// text parts (or thought parts) are merged into one block.
type assembler struct {
	structured bool
	emit       func(llm.StreamEvent) // nil: no events

	started       bool
	items         []*item
	open          *item // the text or thought block more text may extend
	calls         []llm.ToolCall
	vendorIDs     []string
	sawCandidate  bool
	finishReason  string
	finishMessage string
	responseID    string
	modelVersion  string
	usage         *usageMetadata
	blockReason   string
	blockMessage  string
	unsupported   []any
}

func (a *assembler) send(t llm.StreamEventType, index int, d llm.EventDelta) {
	if a.emit != nil {
		a.emit(llm.StreamEvent{Type: t, Index: index, Delta: d})
	}
}

// done reports whether the terminal chunk has been seen.
func (a *assembler) done() bool { return a.finishReason != "" || a.blockReason != "" }

func (a *assembler) add(r *generateResponse) error {
	if r.Error != nil {
		return streamError(r.Error)
	}
	if !a.started {
		a.started = true
		a.send(llm.MessageStart, 0, llm.EventDelta{})
	}
	if r.ResponseID != "" {
		a.responseID = r.ResponseID
	}
	if r.ModelVersion != "" {
		a.modelVersion = r.ModelVersion
	}
	if r.UsageMetadata != nil {
		a.usage = r.UsageMetadata
	}
	if f := r.PromptFeedback; f != nil && f.BlockReason != "" {
		a.blockReason, a.blockMessage = f.BlockReason, f.BlockReasonMessage
	}
	if len(r.Candidates) == 0 {
		return nil
	}
	a.sawCandidate = true
	c := r.Candidates[0]
	if c.Content != nil {
		for _, raw := range c.Content.Parts {
			if err := a.addPart(raw); err != nil {
				return err
			}
		}
	}
	if c.FinishReason != "" {
		a.finishReason = c.FinishReason
	}
	if c.FinishMessage != "" {
		a.finishMessage = c.FinishMessage
	}
	return nil
}

func (a *assembler) newItem(kind itemKind) *item {
	it := &item{kind: kind, index: len(a.items)}
	a.items = append(a.items, it)
	return it
}

func (a *assembler) closeOpen() {
	if a.open != nil {
		a.send(llm.ContentBlockStop, a.open.index, llm.EventDelta{})
		a.open = nil
	}
}

func (a *assembler) addPart(raw json.RawMessage) error {
	var p part
	if err := json.Unmarshal(raw, &p); err != nil {
		return llm.NewError(llm.InvalidResponse, name, "malformed content part", err)
	}
	switch {
	case p.FunctionCall != nil:
		return a.addCall(p.FunctionCall, p.ThoughtSignature)
	case p.InlineData != nil:
		return a.addMedia(p.InlineData, p.ThoughtSignature, raw)
	case p.Text != nil || p.ThoughtSignature != "" || p.Thought:
		a.addText(p)
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		a.unsupported = append(a.unsupported, v) // e.g. executableCode, fileData
	}
	return nil
}

func (a *assembler) addText(p part) {
	kind := kindText
	if p.Thought {
		kind = kindThought
	}
	var text string
	if p.Text != nil {
		text = *p.Text
	}
	if text == "" {
		if p.ThoughtSignature == "" {
			return
		}
		if a.open != nil && a.open.sig == "" {
			a.open.sig = p.ThoughtSignature
			return
		}
		// A signature with nothing to attach it to: keep it on an empty
		// block of its own so that it is sent back in place.
		a.closeOpen()
		a.open = a.newItem(kind)
		a.open.sig = p.ThoughtSignature
		a.send(llm.ContentBlockStart, a.open.index, llm.EventDelta{})
		return
	}
	if a.open == nil || a.open.kind != kind {
		a.closeOpen()
		a.open = a.newItem(kind)
		a.send(llm.ContentBlockStart, a.open.index, llm.EventDelta{})
	}
	a.open.text.WriteString(text)
	if p.ThoughtSignature != "" {
		a.open.sig = p.ThoughtSignature
	}
	t := llm.TextDelta
	switch {
	case kind == kindThought:
		t = llm.ReasoningDelta
	case a.structured:
		t = llm.ObjectDelta
	}
	a.send(t, a.open.index, llm.EventDelta{Text: text})
}

func (a *assembler) addMedia(b *blob, sig string, raw json.RawMessage) error {
	var kind itemKind
	var event llm.StreamEventType
	mt := strings.ToLower(b.MimeType)
	switch {
	case strings.HasPrefix(mt, "image/"):
		kind, event = kindImage, llm.ImageDelta
	case strings.HasPrefix(mt, "audio/"):
		kind, event = kindAudio, llm.AudioDelta
	case strings.HasPrefix(mt, "video/"):
		kind, event = kindVideo, llm.VideoDelta
	default:
		var v any
		if json.Unmarshal(raw, &v) == nil {
			a.unsupported = append(a.unsupported, v)
		}
		return nil
	}
	data, err := base64.StdEncoding.DecodeString(b.Data)
	if err != nil {
		return llm.NewError(llm.InvalidResponse, name, "inline data is not valid base64", err)
	}
	a.closeOpen()
	it := a.newItem(kind)
	it.data, it.mime, it.sig = data, b.MimeType, sig
	a.send(llm.ContentBlockStart, it.index, llm.EventDelta{})
	a.send(event, it.index, llm.EventDelta{Data: data})
	a.send(llm.ContentBlockStop, it.index, llm.EventDelta{})
	return nil
}

func (a *assembler) addCall(fc *functionCall, sig string) error {
	if fc.Name == "" {
		return invalidResponse("function call without a name")
	}
	call := llm.ToolCall{ToolCallID: fc.ID, ToolName: fc.Name}
	if call.ToolCallID == "" {
		call.ToolCallID = ids.New()
	}
	args := bytes.TrimSpace(fc.Args)
	switch {
	case len(args) == 0 || string(args) == "null":
		args = []byte("{}")
		call.Arguments = map[string]any{}
	case args[0] == '{':
		c := llm.NewToolCall(call.ToolCallID, call.ToolName, args)
		if c.Arguments == nil {
			return llm.NewError(llm.InvalidResponse, name, "malformed function call arguments", nil)
		}
		call.Arguments, call.ArgumentsJSON = c.Arguments, c.ArgumentsJSON
	default:
		call.RawArguments = string(args)
	}
	a.closeOpen()
	it := a.newItem(kindCall)
	it.call, it.sig = len(a.calls), sig
	a.calls = append(a.calls, call)
	a.vendorIDs = append(a.vendorIDs, fc.ID)
	d := llm.EventDelta{ToolCallID: call.ToolCallID, ToolName: call.ToolName}
	a.send(llm.ContentBlockStart, it.index, d)
	d.ArgumentsJSON = string(args)
	a.send(llm.ToolCallDelta, it.index, d)
	a.send(llm.ContentBlockStop, it.index, llm.EventDelta{})
	return nil
}

// finish closes the reply and returns the assembled response.
func (a *assembler) finish() (*llm.Response, error) {
	a.closeOpen()
	if len(a.items) == 0 {
		if a.blockReason != "" {
			msg := "prompt blocked: " + a.blockReason
			if a.blockMessage != "" {
				msg += ": " + a.blockMessage
			}
			return nil, llm.NewError(llm.ContentFiltered, name, msg, nil)
		}
		if !a.sawCandidate {
			return nil, invalidResponse("response has no candidates")
		}
		if filterReasons[a.finishReason] {
			msg := "response blocked: " + a.finishReason
			if a.finishMessage != "" {
				msg += ": " + a.finishMessage
			}
			return nil, llm.NewError(llm.ContentFiltered, name, msg, nil)
		}
	}

	var (
		blocks    []llm.ContentBlock
		order     []string
		sigs      = map[string]any{}
		callIDs   = map[string]any{}
		canonical = true
		seenCall  bool
		object    strings.Builder
	)
	for _, it := range a.items {
		var key string
		if it.kind == kindCall {
			seenCall = true
			key = "t" + strconv.Itoa(it.call)
			if id := a.vendorIDs[it.call]; id != "" {
				callIDs[key] = id
			}
		} else {
			if seenCall {
				canonical = false // content after a call
			}
			key = "c" + strconv.Itoa(len(blocks))
			blocks = append(blocks, it.block())
			if it.kind == kindText {
				object.WriteString(it.text.String())
			}
		}
		order = append(order, key)
		if it.sig != "" {
			sigs[key] = it.sig
		}
	}

	meta := map[string]any{}
	setString := func(k, v string) {
		if v != "" {
			meta[k] = v
		}
	}
	setString("responseId", a.responseID)
	setString("modelVersion", a.modelVersion)
	setString("finishReason", a.finishReason)
	setString("finishMessage", a.finishMessage)
	setString("blockReason", a.blockReason)
	if len(sigs) > 0 {
		meta["thoughtSignatures"] = sigs
	}
	if len(callIDs) > 0 {
		meta["functionCallIds"] = callIDs
	}
	if !canonical {
		keys := make([]any, len(order))
		for i, k := range order {
			keys[i] = k
		}
		meta["partOrder"] = keys
	}
	if len(a.unsupported) > 0 {
		meta["unsupportedParts"] = a.unsupported
	}

	msg := llm.NewAssistantMessage(blocks, a.calls)
	msg.Metadata = llm.Metadata{name: meta}
	resp := &llm.Response{Message: msg, StopReason: a.finishReason, Usage: a.tokenUsage()}
	if a.structured {
		var v any
		if json.Unmarshal([]byte(object.String()), &v) == nil {
			resp.Data = v
		}
	}
	return resp, nil
}

func (it *item) block() llm.ContentBlock {
	switch it.kind {
	case kindThought:
		return llm.ReasoningBlock{Text: it.text.String()}
	case kindImage:
		return llm.ImageFromBytes(it.data, it.mime)
	case kindAudio:
		return llm.AudioFromBytes(it.data, it.mime)
	case kindVideo:
		return llm.VideoFromBytes(it.data, it.mime)
	}
	return llm.TextBlock{Text: it.text.String()}
}

func (a *assembler) tokenUsage() llm.TokenUsage {
	u := a.usage
	if u == nil {
		return llm.TokenUsage{}
	}
	in := u.PromptTokenCount + u.ToolUsePromptTokenCount
	out := u.CandidatesTokenCount + u.ThoughtsTokenCount
	return llm.TokenUsage{InputTokens: in, OutputTokens: out, TotalTokens: in + out, CacheReadTokens: u.CachedContentTokenCount}
}

// msgMeta is what a request needs from an assistant message's gemini
// metadata.
type msgMeta struct {
	signatures map[string]string
	callIDs    map[string]string
	partOrder  []string
}

func readMeta(m map[string]any) msgMeta {
	return msgMeta{
		signatures: stringMap(m["thoughtSignatures"]),
		callIDs:    stringMap(m["functionCallIds"]),
		partOrder:  stringList(m["partOrder"]),
	}
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	switch m := v.(type) {
	case map[string]string:
		for k, s := range m {
			out[k] = s
		}
	case map[string]any:
		for k, x := range m {
			if s, ok := x.(string); ok {
				out[k] = s
			}
		}
	}
	return out
}

func stringList(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		out := make([]string, 0, len(l))
		for _, x := range l {
			s, ok := x.(string)
			if !ok {
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	return nil
}

// order returns the part keys of a message with nc content blocks and nt
// tool calls: the recorded partOrder when it is a permutation of them,
// else content first, then calls.
func (m msgMeta) order(nc, nt int) []string {
	keys := make([]string, 0, nc+nt)
	for i := range nc {
		keys = append(keys, "c"+strconv.Itoa(i))
	}
	for j := range nt {
		keys = append(keys, "t"+strconv.Itoa(j))
	}
	if len(m.partOrder) != len(keys) {
		return keys
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		seen[k] = false
	}
	for _, k := range m.partOrder {
		used, ok := seen[k]
		if !ok || used {
			return keys
		}
		seen[k] = true
	}
	return m.partOrder
}
