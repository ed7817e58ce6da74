package runs

import (
	"context"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/govern"
)

// A hub follows one run for its event subscribers: it reads the run's
// journal records (its durable events) and takes the model's events from
// the run executing in this process (its transient events), numbers them
// and fans them out. It exists while the run has subscribers.
type hub struct {
	s  *Service
	id string

	pollMu sync.Mutex // serialises reads of the journal
	pos    uint64     // the last journal record read (pollMu)
	der    deriver    // pollMu

	mu         sync.Mutex
	ready      bool     // the first read is done: transient events may be numbered
	durable    []*Event // every durable event published, in order
	last       uint64   // the last Seq published
	pendingEnd *Event   // EventEnded held back while the run executes here
	releasing  bool     // the last model text was held back by the governor
	end        uint64   // Seq of EventEnded once published
	subs       map[*subscription]struct{}
	kick       chan struct{}
	done       chan struct{} // closed when the last subscriber left
}

// subscription is one consumer of a hub, with its bounded buffer.
type subscription struct {
	h      *hub
	ch     chan *Event
	lag    chan struct{} // signalled when ch overflowed
	lagged bool          // h.mu: events are not sent to ch until the subscriber catches up
	last   uint64        // the last Seq yielded
	queue  []*Event      // to yield before reading ch
	ended  bool          // EventEnded was yielded
}

// subscribe starts following run id after Seq after. It fails with
// UnknownRun when the run is neither journaled nor executing here.
func (s *Service) subscribe(ctx context.Context, id string, after uint64) (*subscription, error) {
	s.mu.Lock()
	if s.base.Err() != nil {
		s.mu.Unlock()
		return nil, newError(Unavailable, id, "the service is closed", nil)
	}
	h, fresh := s.hubs[id], false
	if h == nil {
		h = &hub{s: s, id: id, subs: map[*subscription]struct{}{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
		s.hubs[id], fresh = h, true
	}
	sub := &subscription{h: h, ch: make(chan *Event, s.opts.EventBuffer), lag: make(chan struct{}, 1), last: after}
	h.mu.Lock()
	h.subs[sub] = struct{}{} // held while the first read goes on: the hub stays
	h.mu.Unlock()
	s.mu.Unlock()
	if fresh {
		go h.follow()
	}
	if err := h.poll(ctx); err != nil {
		sub.close()
		return nil, newError(Internal, id, "", err)
	}
	executing := s.executing(id)
	h.mu.Lock()
	if len(h.durable) == 0 && !executing {
		h.mu.Unlock()
		sub.close()
		return nil, newError(UnknownRun, id, "no such run", nil)
	}
	h.ready = true
	sub.queue = h.durableAfter(after)
	if h.end != 0 && after >= h.end {
		sub.ended = true
	}
	h.mu.Unlock()
	return sub, nil
}

// close ends the subscription; the hub stops with its last subscriber.
func (sub *subscription) close() {
	h, s := sub.h, sub.h.s
	s.mu.Lock()
	h.mu.Lock()
	delete(h.subs, sub)
	last := len(h.subs) == 0
	h.mu.Unlock()
	if last && s.hubs[h.id] == h {
		delete(s.hubs, h.id)
		close(h.done)
	}
	s.mu.Unlock()
}

// endOfRun ends a subscription after EventEnded.
type endOfRun struct{}

func (endOfRun) Error() string { return "runs: the run has ended" }

// next returns the next event: from the queue, then from the buffer. With
// a beat channel it returns (nil, nil) at each beat.
func (sub *subscription) next(ctx context.Context, beat <-chan time.Time) (*Event, error) {
	for {
		if len(sub.queue) > 0 {
			ev := sub.queue[0]
			sub.queue = sub.queue[1:]
			if ev := sub.accept(ev); ev != nil {
				return ev, nil
			}
			continue
		}
		if sub.ended {
			return nil, endOfRun{}
		}
		select { // what is buffered first: the lag is dealt with once it is read
		case ev := <-sub.ch:
			if ev := sub.accept(ev); ev != nil {
				return ev, nil
			}
			continue
		default:
		}
		select {
		case ev := <-sub.ch:
			if ev := sub.accept(ev); ev != nil {
				return ev, nil
			}
		case <-sub.lag:
			sub.queue = sub.h.catchUp(sub)
		case <-beat:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-sub.h.s.base.Done():
			return nil, newError(Unavailable, sub.h.id, "the service is closing", nil)
		}
	}
}

// accept returns ev unless it was yielded already, and notes the end.
func (sub *subscription) accept(ev *Event) *Event {
	if ev.Seq <= sub.last {
		return nil
	}
	sub.last = ev.Seq
	if ev.Type == EventEnded {
		sub.ended = true
	}
	return ev
}

// catchUp returns what a subscriber that fell behind yields next: the
// events still in its buffer, then the durable events published after
// them. The transient events dropped meanwhile are lost.
func (h *hub) catchUp(sub *subscription) []*Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*Event
	for drained := false; !drained; {
		select {
		case ev := <-sub.ch:
			out = append(out, ev)
		default:
			drained = true
		}
	}
	from := sub.last
	if n := len(out); n > 0 {
		from = max(from, out[n-1].Seq)
	}
	sub.lagged = false
	return append(out, h.durableAfter(from)...)
}

func (h *hub) durableAfter(seq uint64) []*Event {
	i, _ := slices.BinarySearchFunc(h.durable, seq, func(ev *Event, seq uint64) int {
		switch {
		case ev.Seq <= seq:
			return -1
		default:
			return 1
		}
	})
	return slices.Clone(h.durable[i:])
}

// follow reads the journal when woken and every poll interval, until
// the hub's last subscriber leaves or the service closes.
func (h *hub) follow() {
	t := time.NewTicker(h.s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-h.kick:
		case <-t.C:
		case <-h.done:
			return
		case <-h.s.base.Done():
			return
		}
		if err := h.poll(h.s.base); err != nil && h.s.base.Err() == nil {
			h.s.log.Error("runs: reading a run's journal records", "request_id", h.id, "error", err)
		}
	}
}

func (h *hub) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// poll reads the run's journal records appended since the last read and
// publishes their events.
func (h *hub) poll(ctx context.Context) error {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	var fresh bool
	for rec, err := range runRecordsAfter(ctx, h.s.g.Journal(), h.id, h.pos) {
		if err != nil {
			return err
		}
		h.pos, fresh = rec.Seq, true
		evs, end := h.der.events(rec)
		local := false
		if end != nil {
			if end.Status == Delivered {
				end.Output = h.s.output(ctx, h.id)
			}
			local = h.s.executing(h.id)
		}
		h.mu.Lock() // never held while taking s.mu
		for _, ev := range evs {
			h.publishLocked(ev)
		}
		switch {
		case end != nil && local:
			h.pendingEnd = end // after what the run still streams (localEnded)
		case end != nil:
			h.publishLocked(end)
		}
		h.mu.Unlock()
	}
	if fresh {
		h.s.notify()
	}
	return nil
}

// localEnded is called when the run stopped executing here: what it
// journaled last, and its end, go out.
func (h *hub) localEnded() {
	if err := h.poll(h.s.base); err != nil && h.s.base.Err() == nil {
		h.s.log.Error("runs: reading a run's journal records", "request_id", h.id, "error", err)
	}
	output := h.s.output(h.s.base, h.id) // saved before the run stopped executing
	h.mu.Lock()
	defer h.mu.Unlock()
	if end := h.pendingEnd; end != nil {
		if end.Status == Delivered {
			end.Output = output
		}
		h.pendingEnd = nil
		h.publishLocked(end)
	}
}

// publishText publishes model text. Text a governed run held back (not
// marked unverified) comes out only once the run delivered: the journal
// is read first, so that it follows the deliver.
func (h *hub) publishText(ctx context.Context, text string, unverified bool) {
	h.mu.Lock()
	release := !unverified && !h.releasing
	h.releasing = !unverified
	h.mu.Unlock()
	if release {
		if err := h.poll(ctx); err != nil && ctx.Err() == nil {
			h.s.log.Error("runs: reading a run's journal records", "request_id", h.id, "error", err)
		}
	}
	h.publishTransient(modelEvent(h.id, text, unverified, nil))
}

// publishTransient numbers and publishes an event of the run executing
// here. Before the hub's first read, or past the room the numbering
// leaves (see Event.Seq), it is dropped.
func (h *hub) publishTransient(ev *Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ready || h.end != 0 {
		return
	}
	seq := h.last + 1
	if seq >= endSeq(h.last/seqStride) {
		return
	}
	ev.Seq = seq
	h.publishLocked(ev)
}

func (h *hub) publishLocked(ev *Event) {
	if ev.Seq <= h.last {
		return // read twice: already out
	}
	h.last = ev.Seq
	if ev.Durable {
		h.durable = append(h.durable, ev)
	}
	if ev.Type == EventEnded {
		h.end = ev.Seq
	}
	for sub := range h.subs {
		if sub.lagged {
			continue
		}
		select {
		case sub.ch <- ev:
		default:
			sub.lagged = true
			select {
			case sub.lag <- struct{}{}:
			default:
			}
		}
	}
}

// runRecordsAfter yields the records of run id with Seq > after, in
// order: from the journal's index of runs when it has one.
func runRecordsAfter(ctx context.Context, j govern.Journal, id string, after uint64) iter.Seq2[govern.Record, error] {
	return func(yield func(govern.Record, error) bool) {
		if rr, ok := j.(govern.RunReader); ok {
			recs, err := rr.RunRecords(ctx, id)
			if err != nil {
				yield(govern.Record{}, err)
				return
			}
			for _, rec := range recs {
				if rec.Seq > after && !yield(rec, nil) {
					return
				}
			}
			return
		}
		for rec, err := range j.Records(ctx, after+1) {
			if err != nil {
				yield(govern.Record{}, err)
				return
			}
			if rec.RequestID == id && !yield(rec, nil) {
				return
			}
		}
	}
}

// Events returns the run's events as they happen, after the one
// numbered after (0: from the start): first those already recorded, then
// the new ones, until EventEnded, the end of ctx (its error), or the
// closing of the service (Unavailable). It fails at once with UnknownRun
// for an unknown run. Breaking the loop ends the subscription.
//
// The durable events are derived from the run's journal records, so
// they are replayed after a restart and a client that resumes after the
// last Seq it saw misses none; the model's events are transient (see
// EventType).
//
// A slow consumer never slows the run: each subscription buffers up to
// Options.EventBuffer events, and one that falls further behind catches
// up from the journal — it gets every durable event it has not seen, in
// order, and loses only the transient events published while its buffer
// was full.
func (s *Service) Events(ctx context.Context, requestID string, after uint64) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		sub, err := s.subscribe(ctx, requestID, after)
		if err != nil {
			yield(nil, err)
			return
		}
		defer sub.close()
		for {
			ev, err := sub.next(ctx, nil)
			if _, ok := err.(endOfRun); ok {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}
