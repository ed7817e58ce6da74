package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/llm"
)

// streamEvent is one event of a Messages API stream. Delta is a content
// block's delta (content_block_delta) or the message's (message_delta).
type streamEvent struct {
	Type         string       `json:"type"`
	Message      *apiMessage  `json:"message"`
	Index        *int         `json:"index"`
	ContentBlock *apiBlock    `json:"content_block"`
	Delta        *streamDelta `json:"delta"`
	Usage        *apiUsage    `json:"usage"`
	Error        *apiError    `json:"error"`
}

type streamDelta struct {
	Type         string  `json:"type"`
	Text         string  `json:"text"`
	PartialJSON  string  `json:"partial_json"`
	Thinking     string  `json:"thinking"`
	Signature    string  `json:"signature"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// blockKind is how a streamed block's deltas are emitted.
type blockKind int

const (
	kindIgnored   blockKind = iota // no UPP form (server tools…): no events
	kindText                       // text_delta
	kindObject                     // object_delta: native structured text or the json_response tool
	kindReasoning                  // reasoning_delta
	kindTool                       // tool_call_delta
)

type streamBlock struct {
	index   int
	kind    blockKind
	block   apiBlock
	text    strings.Builder // text, thinking or input JSON
	deltas  bool            // an input_json_delta arrived
	stopped bool
}

func truncatedStream() *llm.Error {
	return invalidResponse("stream truncated before message_stop", nil)
}

// decodeStream reads a Messages API event stream, calling emit for each UPP
// event, and returns the assembled message at message_stop. Protocol
// failures are *llm.Error (INVALID_RESPONSE, or the code of an error
// event); a failure to read r is returned as it is.
func decodeStream(r io.Reader, mode outputMode, emit func(llm.StreamEvent)) (*apiMessage, error) {
	dec := sse.NewDecoder(r)
	var (
		msg     *apiMessage
		blocks  = map[int]*streamBlock{}
		evIndex = func(e *streamEvent) (*streamBlock, error) {
			if e.Index == nil {
				return nil, invalidResponse(e.Type+" event without an index", nil)
			}
			b := blocks[*e.Index]
			if b == nil {
				return nil, invalidResponse(fmt.Sprintf("%s for content block %d, which was not started", e.Type, *e.Index), nil)
			}
			return b, nil
		}
	)
	for {
		ev, err := dec.Next()
		switch {
		case err == io.EOF:
			return nil, truncatedStream()
		case errors.Is(err, sse.ErrTooLarge):
			return nil, invalidResponse("stream event too large", err)
		case err != nil:
			return nil, err
		}
		var e streamEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, invalidResponse("malformed stream event JSON", err)
		}
		if e.Type == "" {
			e.Type = ev.Type
		}
		switch e.Type {
		case "ping":
			continue
		case "error":
			return nil, eventError(e.Error)
		case "message_start":
			if msg != nil {
				return nil, invalidResponse("second message_start in one stream", nil)
			}
			if e.Message == nil {
				return nil, invalidResponse("message_start without a message", nil)
			}
			msg = e.Message
			msg.Content = nil
			emit(llm.StreamEvent{Type: llm.MessageStart})
			continue
		}
		if msg == nil {
			if e.Type == "message_stop" || strings.HasPrefix(e.Type, "content_block_") || e.Type == "message_delta" {
				return nil, invalidResponse(e.Type+" before message_start", nil)
			}
			continue
		}
		switch e.Type {
		case "content_block_start":
			if e.Index == nil || e.ContentBlock == nil {
				return nil, invalidResponse("content_block_start without an index or block", nil)
			}
			i := *e.Index
			if i < 0 {
				return nil, invalidResponse("negative content block index", nil)
			}
			if blocks[i] != nil {
				return nil, invalidResponse(fmt.Sprintf("content block %d started twice", i), nil)
			}
			b := &streamBlock{index: i, block: *e.ContentBlock}
			blocks[i] = b
			startBlock(b, mode, emit)
		case "content_block_delta":
			b, err := evIndex(&e)
			if err != nil {
				return nil, err
			}
			if e.Delta == nil {
				return nil, invalidResponse("content_block_delta without a delta", nil)
			}
			if err := applyDelta(b, e.Delta, emit); err != nil {
				return nil, err
			}
		case "content_block_stop":
			b, err := evIndex(&e)
			if err != nil {
				return nil, err
			}
			stopBlock(b, emit)
		case "message_delta":
			if e.Delta != nil {
				if e.Delta.StopReason != nil {
					msg.StopReason = e.Delta.StopReason
				}
				if e.Delta.StopSequence != nil {
					msg.StopSequence = e.Delta.StopSequence
				}
			}
			msg.Usage.merge(e.Usage)
		case "message_stop":
			msg.Content = assemble(blocks)
			emit(llm.StreamEvent{Type: llm.MessageStop})
			return msg, nil
		}
		// Other event types may be added by the API; they are skipped.
	}
}

func startBlock(b *streamBlock, mode outputMode, emit func(llm.StreamEvent)) {
	ev := llm.StreamEvent{Type: llm.ContentBlockStart, Index: b.index}
	var initial string
	switch b.block.Type {
	case "text":
		b.kind = kindText
		if mode == outputNative {
			b.kind = kindObject
		}
		initial = b.block.Text
	case "thinking":
		b.kind = kindReasoning
		initial = b.block.Thinking
	case "redacted_thinking":
		b.kind = kindReasoning
	case "tool_use":
		b.kind = kindTool
		if mode == outputTool && b.block.Name == jsonResponseTool {
			b.kind = kindObject
		} else {
			ev.Delta.ToolCallID, ev.Delta.ToolName = b.block.ID, b.block.Name
		}
	default:
		return
	}
	emit(ev)
	if initial != "" {
		b.text.WriteString(initial)
		emitFragment(b, initial, emit)
	}
}

func emitFragment(b *streamBlock, s string, emit func(llm.StreamEvent)) {
	ev := llm.StreamEvent{Index: b.index}
	switch b.kind {
	case kindText:
		ev.Type, ev.Delta.Text = llm.TextDelta, s
	case kindObject:
		ev.Type, ev.Delta.Text = llm.ObjectDelta, s
	case kindReasoning:
		ev.Type, ev.Delta.Text = llm.ReasoningDelta, s
	case kindTool:
		ev.Type = llm.ToolCallDelta
		ev.Delta.ToolCallID, ev.Delta.ToolName, ev.Delta.ArgumentsJSON = b.block.ID, b.block.Name, s
	default:
		return
	}
	emit(ev)
}

func applyDelta(b *streamBlock, d *streamDelta, emit func(llm.StreamEvent)) error {
	if b.kind == kindIgnored {
		return nil
	}
	var fragment string
	switch d.Type {
	case "text_delta":
		if b.block.Type != "text" {
			return mismatch(d.Type, b)
		}
		fragment = d.Text
	case "input_json_delta":
		if b.block.Type != "tool_use" {
			return mismatch(d.Type, b)
		}
		b.deltas = true
		fragment = d.PartialJSON
	case "thinking_delta":
		if b.block.Type != "thinking" {
			return mismatch(d.Type, b)
		}
		fragment = d.Thinking
	case "signature_delta":
		if b.block.Type != "thinking" {
			return mismatch(d.Type, b)
		}
		b.block.Signature += d.Signature
		return nil
	default:
		return nil // citations_delta and future delta types carry nothing UPP keeps
	}
	if fragment == "" {
		return nil
	}
	b.text.WriteString(fragment)
	emitFragment(b, fragment, emit)
	return nil
}

func mismatch(delta string, b *streamBlock) *llm.Error {
	return invalidResponse(fmt.Sprintf("%s for a %s block (index %d)", delta, b.block.Type, b.index), nil)
}

func stopBlock(b *streamBlock, emit func(llm.StreamEvent)) {
	if b.stopped || b.kind == kindIgnored {
		return
	}
	b.stopped = true
	if b.block.Type == "tool_use" && !b.deltas {
		// No input_json_delta: the input, if any, came whole with the start.
		if in := compactJSON(b.block.Input); strings.TrimSpace(in) != "" && in != "{}" && in != "null" {
			b.text.WriteString(in)
			emitFragment(b, in, emit)
		}
	}
	emit(llm.StreamEvent{Type: llm.ContentBlockStop, Index: b.index})
}

// assemble returns the streamed blocks in index order as the message's
// content.
func assemble(blocks map[int]*streamBlock) []apiBlock {
	order := make([]*streamBlock, 0, len(blocks))
	for _, b := range blocks {
		order = append(order, b)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].index < order[j].index })
	out := make([]apiBlock, 0, len(order))
	for _, b := range order {
		blk := b.block
		switch blk.Type {
		case "text":
			blk.Text = b.text.String()
		case "thinking":
			blk.Thinking = b.text.String()
		case "tool_use":
			if b.deltas || b.stopped {
				blk.Input = json.RawMessage(b.text.String())
			}
		}
		out = append(out, blk)
	}
	return out
}
