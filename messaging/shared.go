package messaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/streamlog"
)

// This file keeps a Server's streams in a store other Servers share
// (Options.Streams: replicas of one service on one database), so that a
// consumer resumes a stream on any of them (docs/spec-notes/uamp.md,
// "Streams on several replicas").
//
// The producing Server serves its own consumers from memory as always;
// a keeper goroutine per stream stores the deltas behind them (Send
// waits while window deltas are neither ACKed nor stored), renews the
// producer's lease, and picks up the ACKs and cancels other Servers
// recorded. Another Server follows the stream from the store (GET
// /v1/stream/{id}), records ACKs and cancels there, and, once the
// producer's lease expired with the stream unfinished, ends it with an
// error delta 5.02 — stored, so that every consumer reads the same end
// and the producer, if it was only cut off, can append no more.

// codeProducerDied is the code of the error delta that ends a stream
// whose producer died (docs/spec-notes/uamp.md): a server failure
// (5.xx) a retry cannot mend, answered by a Server acting for another
// (502, Bad Gateway).
const codeProducerDied envelope.Code = "5.02"

// errTakenOver is the cause of a stream's context when another Server
// ended it in the store, having found its lease expired.
var errTakenOver = errors.New("messaging: the stream was ended by another server, which found this one's lease expired")

// sharing is what a Server with Options.Streams uses.
type sharing struct {
	store streamlog.Store
	terms streamlog.Terms
	// heartbeat is how often a keeper renews its stream's lease;
	// poll how often a waiting keeper or follower reads the store
	// when no change was signalled; sweep how often expired streams
	// are deleted; call bounds one store call.
	heartbeat, poll, sweep, call time.Duration
}

// The timings of sharing: a producer that stops renewing is presumed
// dead 10 s later; its stream stays Options.Linger after that.
const (
	sharedLease     = 10 * time.Second
	sharedHeartbeat = sharedLease / 4
	sharedPoll      = time.Second
	sharedSweep     = time.Minute
	sharedCall      = sharedLease / 2
)

func newSharing(st streamlog.Store, linger time.Duration) *sharing {
	return &sharing{store: st, terms: streamlog.Terms{Lease: sharedLease, Linger: linger},
		heartbeat: sharedHeartbeat, poll: sharedPoll, sweep: sharedSweep, call: sharedCall}
}

func (s *Stream) key() streamlog.Key { return streamlog.Key{Owner: s.owner, ID: s.id} }

// unstored returns the deltas not yet stored, from delta_seq first, and
// whether the last of them ends the stream. The slices are the ring's:
// their slots are not reused before the keeper reports them stored.
func (s *Stream) unstored() (first int64, batch [][]byte, final bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stored {
		return s.flushed, nil, false
	}
	for q := s.flushed; q < s.next; q++ {
		batch = append(batch, s.ring[q%int64(s.window)])
	}
	return s.flushed, batch, s.state.terminal()
}

// storedTo records that the deltas below next are stored.
func (s *Stream) storedTo(next int64) {
	s.mu.Lock()
	if next > s.flushed {
		s.flushed = next
		s.wakeProducer()
	}
	s.mu.Unlock()
}

// unstore stops storing the stream: Send waits for ACKs only.
func (s *Stream) unstore() {
	s.mu.Lock()
	if s.stored {
		s.stored = false
		s.wakeProducer()
	}
	s.mu.Unlock()
}

// blocked reports whether window deltas are un-ACKed: the producer
// waits for the consumer, who may ACK through another Server.
func (s *Stream) blocked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.state.terminal() && s.next-s.acked-1 >= int64(s.window)
}

// applyShared applies what other Servers recorded of the stream: an ACK
// that moves it on (an older one changes nothing, not even the idle
// clock), a cancel.
func (s *Stream) applyShared(h streamlog.Head) {
	s.mu.Lock()
	seq := min(h.Acked, s.next-1)
	moves, cancel := seq > s.acked, h.Cancelled && !s.cancelled
	s.mu.Unlock()
	if moves {
		s.ack(seq)
	}
	if cancel {
		s.requestCancel() // refused once the stream ended: nothing to cancel
	}
}

// keep stores st's deltas, renews its lease and applies what other
// Servers recorded, until the final delta is stored, run tells it to
// stop (unkeep), or the store is lost: then st is no longer stored (a
// store failing longer than half a lease), or is cancelled (another
// Server ended it in the store).
func (s *Server) keep(st *Stream, unkeep <-chan struct{}, kept chan<- struct{}) {
	defer s.wg.Done()
	defer close(kept)
	sh := s.shared
	k := st.key()
	changed, stopWatch := sh.store.Watch(k)
	defer stopWatch()
	timer := time.NewTimer(sh.heartbeat)
	defer timer.Stop()
	var failing time.Time // since when the store fails
	written := time.Now() // the last successful write, which renewed the lease
	look := false         // read the head: an ACK through another Server may free the producer
	for {
		first, batch, final := st.unstored()
		var (
			h             streamlog.Head
			err           error
			called, wrote bool
		)
		ctx, cancel := context.WithTimeout(context.Background(), sh.call)
		switch {
		case len(batch) > 0:
			h, err = sh.store.Append(ctx, k, first, batch, final, st.window, sh.terms)
			called, wrote = true, true
		case time.Since(written) >= sh.heartbeat:
			h, err = sh.store.Renew(ctx, k, sh.terms)
			called, wrote = true, true
		case look:
			h, err = sh.store.Head(ctx, k)
			called = true
		}
		cancel()
		look = false
		switch {
		case !called:
		case err == nil && h.Final && !(len(batch) > 0 && final):
			// The store holds an end this keeper did not write: another
			// Server ended the stream, having found this one's lease
			// expired (a producer cut off, then back).
			s.opts.Logger.Warn("uamp: stream taken over: its lease had expired", "stream_id", st.id)
			st.unstore()
			st.cancel(errTakenOver)
			return
		case err == nil:
			failing = time.Time{}
			if wrote {
				written = time.Now()
			}
			if len(batch) > 0 {
				st.storedTo(first + int64(len(batch)))
			}
			st.applyShared(h)
			if len(batch) > 0 && final {
				return // the end is stored: nothing more to keep
			}
			if len(batch) > 0 {
				continue // more may have come meanwhile
			}
		case errors.Is(err, streamlog.ErrConflict), errors.Is(err, streamlog.ErrNotFound):
			// Another Server ended the stream in the store, having found
			// this one's lease expired (or the stream expired): what is
			// produced here can no longer be delivered there.
			s.opts.Logger.Warn("uamp: stream taken over: its lease had expired", "stream_id", st.id, "error", err)
			st.unstore()
			st.cancel(errTakenOver)
			return
		default:
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) >= sh.terms.Lease/2 {
				// Serve this Server's consumer without the store rather
				// than stall it: the stream is no longer resumable
				// elsewhere, where its lease will expire.
				s.opts.Logger.Error("uamp: cannot store the stream; serving it from memory only", "stream_id", st.id, "error", err)
				st.unstore()
				return
			}
		}
		wait := sh.heartbeat - time.Since(written)
		if !failing.IsZero() || st.blocked() {
			wait = min(wait, sh.poll)
		}
		timer.Reset(max(wait, 0))
		select {
		case <-st.dirty:
			look = st.blocked()
		case <-changed:
			look = st.blocked()
		case <-timer.C:
			look = st.blocked()
		case <-unkeep:
			return
		}
	}
}

// sweepShared deletes expired streams from the store every sh.sweep
// until the Server closes.
func (s *Server) sweepShared() {
	defer s.wg.Done()
	t := time.NewTicker(s.shared.sweep)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.shared.call)
		if err := s.shared.store.Sweep(ctx); err != nil && s.ctx.Err() == nil {
			s.opts.Logger.Warn("uamp: cannot sweep expired streams", "error", err)
		}
		cancel()
	}
}

// storeFailed is the 5.04 of a store out of reach.
func (s *Server) storeFailed(err error) *envelope.Error {
	e := envelope.NewError(envelope.CodeBusy, "the stream store is unavailable", err)
	e.RetryAfter = s.opts.RetryAfter
	return e
}

// producerDied is the error that ends a stream whose producer died
// after n deltas.
func producerDied(id string, n int64) *envelope.Error {
	e := envelope.NewError(codeProducerDied,
		fmt.Sprintf("stream %s lost its producer: the server producing it stopped (its lease expired) after %d deltas; the request's outcome is unknown", strconv.Quote(id), n), nil)
	e.Retry = false
	return e
}

// errBadStored: a delta read from the store is not one a producer wrote
// for that place in that stream.
var errBadStored = errors.New("messaging: a stored delta is corrupt")

// storedDelta decodes a delta read from the store for delta_seq seq of
// stream id, strictly (as a consumer would) and as it must be to go out
// as one SSE event: one line.
func storedDelta(b []byte, id string, seq int64) (*envelope.Delta, error) {
	if bytes.ContainsAny(b, "\r\n") {
		return nil, fmt.Errorf("%w: line break in delta_seq %d", errBadStored, seq)
	}
	d, err := decodeDelta(b)
	if err != nil {
		return nil, fmt.Errorf("%w: delta_seq %d: %w", errBadStored, seq, err)
	}
	if d.Seq != seq || d.StreamID != id {
		return nil, fmt.Errorf("%w: delta_seq %d of %q stored as %d of %q", errBadStored, d.Seq, d.StreamID, seq, id)
	}
	return d, nil
}

// readStored is how many deltas a follower reads from the store at once.
const readStored = 64

// followStored serves GET /v1/stream/{id} of a stream this Server does
// not hold, from the shared store: the deltas after Last-Event-ID as
// they are stored, to the final one; when the producer died first, the
// 5.02 error delta that ends it.
func (s *Server) followStored(w http.ResponseWriter, r *http.Request, principal, id string) {
	sh := s.shared
	k := streamlog.Key{Owner: principal, ID: id}
	ctx, cancel := s.connContext(r.Context())
	defer cancel()
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, sh.call) }
	cctx, ccancel := call()
	h, err := sh.store.Head(cctx, k)
	ccancel()
	if errors.Is(err, streamlog.ErrNotFound) {
		s.writeErrorStatus(w, http.StatusNotFound, principal, "", noStream("no such stream"))
		return
	}
	if err != nil {
		s.writeError(w, principal, "", s.storeFailed(err))
		return
	}
	from, err := lastEventID(r)
	if err != nil {
		s.writeError(w, principal, "", err)
		return
	}
	// The producer is at most a window ahead of the store.
	if from > h.Next {
		var refuse *envelope.Error
		switch {
		case !h.Final && !h.Alive:
			refuse = producerDied(id, h.Next)
		case h.Final || from-h.Next > int64(s.opts.MaxDeltaWindow):
			refuse = envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("cannot resume at delta_seq %d: the stream holds deltas below %d", from, h.Next), nil)
			refuse.Retry = false
		}
		if refuse != nil {
			s.writeError(w, principal, "", refuse)
			return
		}
	}
	cctx, ccancel = call()
	pending, h, err := sh.store.Read(cctx, k, from, readStored)
	ccancel()
	if err != nil {
		s.writeError(w, principal, "", s.storeFailed(err))
		return
	}
	if from < h.Next {
		var first *envelope.Delta
		if len(pending) > 0 {
			if first, err = decodeDelta(pending[0]); err != nil {
				s.writeError(w, principal, "", fmt.Errorf("%w: %w", errBadStored, err))
				return
			}
		}
		if first == nil || first.Seq != from {
			e := envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("cannot resume at delta_seq %d: the log no longer holds it", from), nil)
			e.Retry = false
			s.writeError(w, principal, "", e)
			return
		}
	}
	changed, stopWatch := sh.store.Watch(k)
	defer stopWatch()
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	poll := time.NewTimer(sh.poll)
	defer poll.Stop()
	quoted := strconv.AppendQuote(nil, id)
	pos := from
	var buf []byte
	for {
		if len(pending) > 0 {
			final := false
			buf = buf[:0]
			for _, b := range pending {
				d, err := storedDelta(b, id, pos)
				if err != nil {
					s.opts.Logger.Error("uamp: cannot serve a stored stream", "stream_id", id, "error", err)
					return
				}
				buf = sseFrame(buf, pos, b)
				pos++
				if final = d.Type.Final(); final {
					break
				}
			}
			if _, err := w.Write(buf); err != nil {
				return
			}
			if err := rc.Flush(); err != nil || final {
				return
			}
			pending = nil
		}
		cctx, ccancel = call()
		pending, h, err = sh.store.Read(cctx, k, pos, readStored)
		ccancel()
		switch {
		case errors.Is(err, streamlog.ErrNotFound):
			return // released or expired: a reconnect is told so
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			// The store is out of reach for now: wait and read again.
		case len(pending) > 0:
			continue
		case h.Final && pos >= h.Next:
			return
		case !h.Alive && !h.Final && pos == h.Next:
			end := appendDelta(nil, pos, quoted, ids.Now(), envelope.DeltaError, errorPayload(producerDied(id, pos)))
			cctx, ccancel = call()
			err := sh.store.EndDead(cctx, k, pos, end, s.opts.Linger)
			ccancel()
			if err == nil || errors.Is(err, streamlog.ErrConflict) {
				continue // ours, or the producer's: read it
			}
		case pos < h.Next:
			return // the deltas it wants are no longer kept: a reconnect is told so
		case !h.Alive && !h.Final:
			return // the consumer is past what was stored: a reconnect is told the producer died
		}
		poll.Reset(sh.poll)
		select {
		case <-changed:
		case <-poll.C:
		case <-heartbeat.C:
			if _, err := w.Write([]byte(":\n\n")); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// dispatchStored acts on an ACK or a cancel of a request this Server
// does not hold, through the shared store; notHere is the refusal when
// the store has no such request either.
func (s *Server) dispatchStored(ctx context.Context, e *envelope.Envelope, notHere error) error {
	sh := s.shared
	reqID, _ := envelope.ParseID(e.ReplyTo)
	cctx, cancel := context.WithTimeout(ctx, sh.call)
	defer cancel()
	h, err := sh.store.Request(cctx, e.From, reqID)
	if errors.Is(err, streamlog.ErrNotFound) {
		return notHere
	}
	if err != nil {
		return s.storeFailed(err)
	}
	switch e.Intent {
	case envelope.IntentProgress:
		seq, _ := ackSeq(e) // dispatch checked it
		// The producer is at most a window ahead of the store.
		if seq >= h.Next+int64(s.opts.MaxDeltaWindow) {
			e := envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("ack_seq %d: only %d deltas were stored", seq, h.Next), nil)
			e.Retry = false
			return e
		}
		if h.Final && seq >= h.Next-1 {
			// The consumer holds the end: the stream is released.
			err = sh.store.Delete(cctx, h.Key)
		} else {
			err = sh.store.Ack(cctx, h.Key, seq)
		}
	case envelope.IntentCancel:
		if !h.Alive && !h.Final {
			return producerDied(h.ID, h.Next)
		}
		err = sh.store.Cancel(cctx, h.Key)
		if errors.Is(err, streamlog.ErrEnded) {
			e := envelope.NewError(envelope.CodeMissingDeltaSeq, "request has ended: cancel refused", envelope.ErrTerminal)
			e.Retry = false
			return e
		}
	}
	if errors.Is(err, streamlog.ErrNotFound) {
		return notHere
	}
	if err != nil {
		return s.storeFailed(err)
	}
	return nil
}
