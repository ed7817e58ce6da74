package llm

import (
	"context"
	"iter"
	"time"

	"github.com/agentry-dev/agentry/internal/stream"
)

// StreamEventType is one of the 13 UPP stream event types (UPP-1.3 §9.2).
type StreamEventType string

// The stream event types.
const (
	TextDelta          StreamEventType = "text_delta"
	ReasoningDelta     StreamEventType = "reasoning_delta"
	ImageDelta         StreamEventType = "image_delta"
	AudioDelta         StreamEventType = "audio_delta"
	VideoDelta         StreamEventType = "video_delta"
	ObjectDelta        StreamEventType = "object_delta"
	ToolCallDelta      StreamEventType = "tool_call_delta"
	ToolExecutionStart StreamEventType = "tool_execution_start"
	ToolExecutionEnd   StreamEventType = "tool_execution_end"
	MessageStart       StreamEventType = "message_start"
	MessageStop        StreamEventType = "message_stop"
	ContentBlockStart  StreamEventType = "content_block_start"
	ContentBlockStop   StreamEventType = "content_block_stop"
)

// streamEventTypes lists the 13 types in specification order.
var streamEventTypes = []StreamEventType{
	TextDelta, ReasoningDelta, ImageDelta, AudioDelta, VideoDelta, ObjectDelta,
	ToolCallDelta, ToolExecutionStart, ToolExecutionEnd, MessageStart,
	MessageStop, ContentBlockStart, ContentBlockStop,
}

// StreamEvent is one streamed event. Index is the content block index for
// content events and the call's position in its round for tool execution
// events.
type StreamEvent struct {
	Type  StreamEventType
	Index int
	Delta EventDelta
}

// EventDelta carries an event's data; which fields are set depends on Type:
//
//	text_delta, reasoning_delta, object_delta  Text (object_delta: a JSON fragment)
//	image_delta, audio_delta, video_delta       Data
//	tool_call_delta                             ToolCallID, ToolName, ArgumentsJSON (fragment)
//	tool_execution_start                        ToolCallID, ToolName, Timestamp
//	tool_execution_end                          ToolCallID, ToolName, Result, IsError, Timestamp
type EventDelta struct {
	Text          string
	Data          []byte
	ToolCallID    string
	ToolName      string
	ArgumentsJSON string
	Result        any
	IsError       bool
	Timestamp     time.Time
	// Parsed is set by the ParsedObject middleware: the value parsed so far
	// from the accumulated object_delta or tool_call_delta fragments.
	Parsed any
}

// StreamResult is a streaming generation (UPP-1.3 §9.1). It starts when
// Events or Turn is first called.
//
// Events may be ranged over once; breaking out of the loop cancels the
// generation. Turn waits for the end, consuming any events not yet read,
// and returns the Turn that Generate would have returned. Abort cancels the
// generation, including in-flight tool calls; Turn then fails with
// CANCELLED. All methods are safe for concurrent use.
type StreamResult struct {
	s *stream.Stream[StreamEvent, *Turn]
}

// streamBuffer bounds how many events a producer may run ahead of its
// consumer.
const streamBuffer = 64

func newStreamResult(ctx context.Context, run func(ctx context.Context, emit func(StreamEvent)) (*Turn, error)) *StreamResult {
	return &StreamResult{stream.New(ctx, streamBuffer, run)}
}

// failedStream returns a StreamResult that fails with err.
func failedStream(ctx context.Context, err error) *StreamResult {
	return &StreamResult{stream.Failed[StreamEvent, *Turn](ctx, err)}
}

// Events returns the events as they arrive. A failure ends the sequence
// with a final (zero event, error) pair.
func (s *StreamResult) Events() iter.Seq2[StreamEvent, error] { return s.s.Events() }

// Turn waits for the generation to end and returns its Turn.
func (s *StreamResult) Turn() (*Turn, error) { return s.s.Result() }

// Abort cancels the generation.
func (s *StreamResult) Abort() { s.s.Abort() }
