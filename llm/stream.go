package llm

import (
	"context"
	"iter"
	"sync"
	"time"
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

// StreamEventTypes lists the 13 types in specification order.
var StreamEventTypes = []StreamEventType{
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
	ctx    context.Context
	cancel context.CancelFunc
	run    func(ctx context.Context, emit func(StreamEvent)) (*Turn, error)

	start  sync.Once
	events chan StreamEvent
	done   chan struct{}
	turn   *Turn
	err    error
}

// streamBuffer bounds how many events a producer may run ahead of its
// consumer.
const streamBuffer = 64

func newStreamResult(ctx context.Context, run func(ctx context.Context, emit func(StreamEvent)) (*Turn, error)) *StreamResult {
	ctx, cancel := context.WithCancel(ctx)
	return &StreamResult{
		ctx: ctx, cancel: cancel, run: run,
		events: make(chan StreamEvent, streamBuffer),
		done:   make(chan struct{}),
	}
}

// failedStream returns a StreamResult that fails with err.
func failedStream(ctx context.Context, err error) *StreamResult {
	return newStreamResult(ctx, func(context.Context, func(StreamEvent)) (*Turn, error) { return nil, err })
}

func (s *StreamResult) begin() {
	s.start.Do(func() {
		go func() {
			defer close(s.done)
			var mu sync.Mutex // tools of one round emit concurrently
			emit := func(ev StreamEvent) {
				mu.Lock()
				defer mu.Unlock()
				select {
				case s.events <- ev:
				case <-s.ctx.Done():
				}
			}
			turn, err := s.run(s.ctx, emit)
			mu.Lock()
			close(s.events)
			mu.Unlock()
			s.turn, s.err = turn, err
			s.cancel()
		}()
	})
}

// Events returns the events as they arrive. A failure ends the sequence
// with a final (zero event, error) pair.
func (s *StreamResult) Events() iter.Seq2[StreamEvent, error] {
	return func(yield func(StreamEvent, error) bool) {
		s.begin()
		for ev := range s.events {
			if !yield(ev, nil) {
				s.cancel()
				return
			}
		}
		<-s.done
		if s.err != nil {
			yield(StreamEvent{}, s.err)
		}
	}
}

// Turn waits for the generation to end and returns its Turn.
func (s *StreamResult) Turn() (*Turn, error) {
	s.begin()
	for range s.events {
	}
	<-s.done
	return s.turn, s.err
}

// Abort cancels the generation.
func (s *StreamResult) Abort() { s.cancel() }
