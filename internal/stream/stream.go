// Package stream runs a producer in a goroutine and hands its events to a
// consumer as an iter.Seq2, with bounded read-ahead and cancellation: the
// shared machinery behind llm.StreamResult and agent.StreamResult.
package stream

import (
	"context"
	"iter"
	"sync"

	"github.com/agentry-dev/agentry/internal/stack"
)

// Stream is a running (or not yet started) producer of events of type E
// with a final result of type R. It starts when Events or Result is first
// called. All methods are safe for concurrent use.
type Stream[E, R any] struct {
	ctx    context.Context
	cancel context.CancelFunc
	run    func(ctx context.Context, emit func(E)) (R, error)

	start  sync.Once
	events chan E
	done   chan struct{}
	result R
	err    error
}

// New returns a stream that will call run with an emit function; emit
// blocks while buffer events are unread and returns early once the stream
// is cancelled. run must not call emit after it returns.
func New[E, R any](ctx context.Context, buffer int, run func(ctx context.Context, emit func(E)) (R, error)) *Stream[E, R] {
	ctx, cancel := context.WithCancel(ctx)
	return &Stream[E, R]{ctx: ctx, cancel: cancel, run: run, events: make(chan E, buffer), done: make(chan struct{})}
}

// Failed returns a stream that yields err and no events.
func Failed[E, R any](ctx context.Context, err error) *Stream[E, R] {
	return New(ctx, 0, func(context.Context, func(E)) (R, error) {
		var zero R
		return zero, err
	})
}

func (s *Stream[E, R]) begin() {
	s.start.Do(func() {
		go func() {
			stack.Grow() // the producer runs a whole generation
			defer close(s.done)
			var mu sync.Mutex // concurrent producers (tool calls) emit one at a time
			emit := func(ev E) {
				mu.Lock()
				defer mu.Unlock()
				select {
				case s.events <- ev:
					return
				default:
				}
				select {
				case s.events <- ev:
				case <-s.ctx.Done():
				}
			}
			result, err := s.run(s.ctx, emit)
			mu.Lock()
			close(s.events)
			mu.Unlock()
			s.result, s.err = result, err
			s.cancel()
		}()
	})
}

// Events returns the events as they arrive. A failure ends the sequence
// with a final (zero event, error) pair; breaking out of the loop cancels
// the producer.
func (s *Stream[E, R]) Events() iter.Seq2[E, error] {
	return func(yield func(E, error) bool) {
		s.begin()
		for ev := range s.events {
			if !yield(ev, nil) {
				s.cancel()
				return
			}
		}
		<-s.done
		if s.err != nil {
			var zero E
			yield(zero, s.err)
		}
	}
}

// Result waits for the producer to finish, discarding unread events, and
// returns its result.
func (s *Stream[E, R]) Result() (R, error) {
	s.begin()
	for range s.events {
	}
	<-s.done
	return s.result, s.err
}

// Abort cancels the producer.
func (s *Stream[E, R]) Abort() { s.cancel() }
