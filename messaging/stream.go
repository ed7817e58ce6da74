package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/messaging/internal/binding"
)

// Stream is the producing end of the delta stream a request opened
// (§5): a Handler sends the request's deltas through it. It numbers them
// from 0, stamps them and keeps the last Window of them in a log that
// consumers read and resume from. Send blocks while Window deltas are
// un-ACKed, so the producer never runs more than a window ahead of its
// consumer and the log never holds more. Its methods are safe for
// concurrent use.
type Stream struct {
	id       string
	quotedID []byte
	owner    string // the requester's from
	reqID    string // bare lowercase id of the request
	window   int
	idle     time.Duration   // a blocked Send gives up after this long without an ACK
	ctx      context.Context // the handler's context
	cancel   context.CancelCauseFunc

	mu        sync.Mutex
	ring      [][]byte // delta s is ring[s % window], for s in [next-window, next)
	next      int64    // delta_seq of the next delta
	acked     int64    // highest contiguous delta_seq ACKed, -1 for none
	state     reqState
	cancelled bool          // a cancel envelope arrived
	space     chan struct{} // closed (and replaced) when acked advances or the stream ends
	reader    *cursor       // the attached consumer, if any
	ended     chan struct{} // closed once the final delta is in the log
	released  chan struct{} // closed once the final delta is ACKed
	touched   time.Time     // last ACK or attach

	// When the Server keeps its streams in a shared store
	// (Options.Streams), its keeper (shared.go) stores the deltas, and a
	// delta's ring slot is reused only once the delta is stored too: the
	// window bounds the deltas neither ACKed nor stored.
	stored  bool          // the keeper stores the deltas
	flushed int64         // delta_seq of the next delta to store
	dirty   chan struct{} // cap 1: the keeper has work (a delta to store, a Send blocked)
}

// errCancelled is the cause of a stream's context when its requester
// cancelled the request.
var errCancelled = errors.New("messaging: request cancelled by the requester")

// errAbandoned is the cause of a stream's context when no consumer ACKed
// it for the idle timeout.
var errAbandoned = errors.New("messaging: stream abandoned by its consumer")

func newStream(parent context.Context, id, owner, reqID string, window int, idle time.Duration) *Stream {
	q, _ := json.Marshal(id) // a string
	ctx, cancel := context.WithCancelCause(parent)
	return &Stream{
		id: id, quotedID: q, owner: owner, reqID: reqID, window: window, idle: idle, ctx: ctx, cancel: cancel,
		ring: make([][]byte, window), acked: -1, state: stateInProgress,
		space: make(chan struct{}), ended: make(chan struct{}), released: make(chan struct{}), touched: time.Now(),
	}
}

// ID returns the stream_id.
func (s *Stream) ID() string { return s.id }

// Window returns the stream's delta_window: the most deltas Send lets be
// un-ACKed.
func (s *Stream) Window() int { return s.window }

// Send appends a delta of type typ with payload (a JSON object, or nil
// for none) to the stream. It blocks while Window deltas are un-ACKed,
// until the consumer ACKs, ctx ends or the stream is cancelled; then it
// returns the context's error or cause. After a final delta (done,
// cancel, error) it refuses with 4.09 (envelope.ErrTerminal). A payload
// the strict decoders would refuse is refused with 4.00.
func (s *Stream) Send(ctx context.Context, typ envelope.DeltaType, payload json.RawMessage) error {
	if !typ.Valid() {
		return envelope.NewError(envelope.CodeBadRequest, fmt.Sprintf("delta type %q", typ), nil)
	}
	p, err := checkPayload(payload)
	if err != nil {
		return err
	}
	return s.send(ctx, typ, p, false)
}

// send appends a delta; finishing is set by finish, which may still
// write the final delta of a cancelled stream.
func (s *Stream) send(ctx context.Context, typ envelope.DeltaType, payload []byte, finishing bool) error {
	streamDone := s.ctx.Done()
	if finishing {
		streamDone = nil
	}
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	s.mu.Lock()
	for {
		if s.state.terminal() {
			_, err := s.state.apply(deltaEvent(typ))
			s.mu.Unlock()
			return err
		}
		if s.next-s.floor()-1 < int64(s.window) {
			break
		}
		if s.stored {
			s.poke() // the consumer may ACK through another Server: the keeper looks
		}
		if s.idle > 0 && time.Since(s.touched) >= s.idle && !finishing {
			s.mu.Unlock()
			s.cancel(errAbandoned)
			return errAbandoned
		}
		space := s.space
		wake := s.idle - time.Since(s.touched)
		s.mu.Unlock()
		var timeout <-chan time.Time
		if s.idle > 0 && !finishing {
			if idle == nil {
				idle = time.NewTimer(wake)
			} else {
				idle.Reset(wake)
			}
			timeout = idle.C
		}
		select {
		case <-space:
		case <-timeout:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-streamDone:
			return context.Cause(s.ctx)
		}
		s.mu.Lock()
	}
	state, err := s.state.apply(deltaEvent(typ))
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.state = state
	slot := &s.ring[s.next%int64(s.window)]
	*slot = appendDelta((*slot)[:0], s.next, s.quotedID, ids.Now(), typ, payload)
	s.next++
	if state.terminal() {
		close(s.ended)
	}
	if s.reader != nil {
		s.reader.signal()
	}
	if s.stored {
		s.poke()
	}
	s.mu.Unlock()
	return nil
}

// floor is the highest delta_seq whose ring slot may be reused: the
// highest ACKed, and when the deltas are stored, stored too. s.mu is
// held.
func (s *Stream) floor() int64 {
	if s.stored && s.flushed-1 < s.acked {
		return s.flushed - 1
	}
	return s.acked
}

// poke wakes the keeper.
func (s *Stream) poke() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// wakeProducer wakes a Send waiting for window space. s.mu is held.
func (s *Stream) wakeProducer() {
	close(s.space)
	s.space = make(chan struct{})
}

// ack records that the consumer holds every delta up to seq. An ACK of a
// delta not yet sent is refused (4.09, not retryable); an older ACK
// changes nothing.
func (s *Stream) ack(seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touched = time.Now()
	if seq >= s.next {
		e := envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("ack_seq %d: only %d deltas were sent", seq, s.next), nil)
		e.Retry = false
		return e
	}
	if seq <= s.acked {
		return nil
	}
	s.acked = seq
	s.wakeProducer()
	if s.state.terminal() && s.acked == s.next-1 {
		select {
		case <-s.released:
		default:
			close(s.released)
		}
	}
	return nil
}

// requestCancel cancels the request: the handler's context ends and the
// stream ends with a cancel delta. A stream that has ended refuses (4.09,
// envelope.ErrTerminal).
func (s *Stream) requestCancel() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.state.apply(evCancel); err != nil {
		return err
	}
	s.cancelled = true
	s.cancel(errCancelled)
	return nil
}

// finish ends the stream once its handler returned err: with the final
// delta the handler did not send — cancel when the requester cancelled,
// error carrying the wire form of err, done otherwise. It waits for
// window space at most wait, and no longer than ctx.
func (s *Stream) finish(ctx context.Context, err error, wait time.Duration) {
	s.mu.Lock()
	terminal, cancelled := s.state.terminal(), s.cancelled
	s.mu.Unlock()
	if terminal {
		return
	}
	typ, payload := envelope.DeltaDone, []byte(nil)
	switch {
	case cancelled:
		typ, payload = envelope.DeltaCancel, []byte(`{"reason":"cancelled by the requester"}`)
	case err != nil:
		e := envelope.AsError(err)
		if errors.Is(err, errAbandoned) {
			e = envelope.NewError(envelope.CodeBusy, "stream abandoned: no ACK within the idle timeout", err)
		}
		typ, payload = envelope.DeltaError, errorPayload(e)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	s.send(ctx, typ, payload, true)
}

// errorPayload is the payload of an error delta: err's wire form {code,
// message, retry}.
func errorPayload(err *envelope.Error) []byte {
	b, _ := json.Marshal(err) // strings and a bool
	return b
}

// cursor is a consumer attached to a stream: it reads the log from its
// position on. A stream has at most one; attaching another detaches the
// previous one (a consumer that reconnected before the server noticed
// the old connection drop).
type cursor struct {
	s        *Stream
	pos      int64
	notify   chan struct{} // cap 1: the log grew
	detached chan struct{} // closed when another consumer took over
}

func (c *cursor) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// attach attaches a consumer that wants the deltas from delta_seq from
// on. The log keeps the last Window deltas: a from before them, or after
// the next delta, is refused (4.09, not retryable).
func (s *Stream) attach(from int64) (*cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := max(0, s.next-int64(s.window))
	if from < oldest || from > s.next {
		e := envelope.NewError(envelope.CodeMissingDeltaSeq,
			fmt.Sprintf("cannot resume at delta_seq %d: the log holds %d to %d", from, oldest, s.next-1), nil)
		e.Retry = false
		return nil, e
	}
	if s.reader != nil {
		close(s.reader.detached)
	}
	s.touched = time.Now()
	c := &cursor{s: s, pos: from, notify: make(chan struct{}, 1), detached: make(chan struct{})}
	s.reader = c
	return c, nil
}

// detach detaches c if it is still the stream's consumer.
func (c *cursor) detach() {
	c.s.mu.Lock()
	if c.s.reader == c {
		c.s.reader = nil
	}
	c.s.mu.Unlock()
}

// errDetached: another consumer attached to the stream.
var errDetached = binding.ErrTakenOver

// read waits until the log holds deltas after the cursor, then appends
// up to maxBytes of them (at least one) to dst, each through frame, and
// advances. final reports that the last delta appended ends the stream.
// When tick fires first it returns dst unchanged. It returns errDetached
// when another consumer took over, or ctx's error.
func (c *cursor) read(ctx context.Context, dst []byte, maxBytes int, tick <-chan time.Time, frame func(dst []byte, seq int64, delta []byte) []byte) (_ []byte, final bool, err error) {
	s := c.s
	for {
		s.mu.Lock()
		if s.reader != c {
			s.mu.Unlock()
			return dst, false, errDetached
		}
		if c.pos == s.next && s.state.terminal() {
			s.mu.Unlock()
			return dst, true, nil // everything was delivered
		}
		if c.pos < s.next {
			start := len(dst)
			for c.pos < s.next && (len(dst) == start || len(dst)-start < maxBytes) {
				dst = frame(dst, c.pos, s.ring[c.pos%int64(s.window)])
				c.pos++
			}
			final = c.pos == s.next && s.state.terminal()
			s.mu.Unlock()
			return dst, final, nil
		}
		s.mu.Unlock()
		select {
		case <-c.notify:
		case <-c.detached:
			return dst, false, errDetached
		case <-tick:
			return dst, false, nil
		case <-ctx.Done():
			return dst, false, ctx.Err()
		}
	}
}

// sequencer checks the deltas a consumer receives on one stream (§5):
// numbered from 0 without gaps (a gap is 4.09), duplicates dropped,
// nothing after the final delta (4.09, not retryable).
type sequencer struct {
	streamID string
	next     int64 // delta_seq expected next
	final    bool
}

// accept reports whether d is new and in order; a duplicate is dropped
// (false, nil).
func (q *sequencer) accept(d *envelope.Delta) (bool, error) {
	if d.StreamID != q.streamID {
		return false, envelope.NewError(envelope.CodeBadRequest, fmt.Sprintf("delta of stream %q on stream %q", d.StreamID, q.streamID), nil)
	}
	if d.Seq < q.next {
		return false, nil
	}
	if q.final {
		e := envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("delta_seq %d after the final delta %d", d.Seq, q.next-1), envelope.ErrTerminal)
		e.Retry = false
		return false, e
	}
	if d.Seq > q.next {
		return false, envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("missing delta_seq %d (got %d)", q.next, d.Seq), nil)
	}
	q.next++
	q.final = d.Type.Final()
	return true, nil
}

// last returns the highest contiguous delta_seq accepted, -1 for none.
func (q *sequencer) last() int64 { return q.next - 1 }
