package uicontrol

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/uiapwire"
)

// link is one attachment of a session to a transport: it writes
// messages one at a time, matches responses to the requests sent over it,
// and counts what the peer sends (for heartbeats). A session outlives its
// links when it is resumed over a new transport.
type link struct {
	t      Transport
	ctx    context.Context // cancelled when the link closes
	cancel context.CancelFunc
	sem    chan struct{} // held while writing; a channel so waiting is ctx-aware
	done   chan struct{}
	once   sync.Once
	alive  atomic.Uint64 // messages received that prove the peer is there
	beats  atomic.Bool   // a heartbeat runs on this link

	mu      sync.Mutex
	closed  bool
	pending map[string]*waiter
}

// waiter is a request awaiting its response or error. onReply, if set,
// runs on the receiving goroutine before the next message is read, so
// that a handshake's outcome applies before anything after it.
type waiter struct {
	ch      chan *Envelope
	onReply func(*Envelope)
}

func newLink(parent context.Context, t Transport) *link {
	ctx, cancel := context.WithCancel(parent)
	return &link{t: t, ctx: ctx, cancel: cancel, sem: make(chan struct{}, 1), done: make(chan struct{}),
		pending: map[string]*waiter{}}
}

// acquire takes the write slot, or fails when ctx ends or the link
// closes first.
func acquire(ctx context.Context, sem chan struct{}, done <-chan struct{}) error {
	select {
	case <-done:
		return ErrClosed
	default:
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send writes one message.
func (l *link) send(ctx context.Context, e *Envelope) error {
	b, err := e.MarshalJSON() // json.Marshal would compact its output again
	if err != nil {
		return err
	}
	if err := acquire(ctx, l.sem, l.done); err != nil {
		return err
	}
	defer func() { <-l.sem }()
	return l.t.Send(ctx, b)
}

// call sends a request and waits for its response or error.
func (l *link) call(ctx context.Context, e *Envelope, onReply func(*Envelope)) (*Envelope, error) {
	w, release, err := l.start(ctx, e, onReply)
	if err != nil {
		return nil, err
	}
	defer release()
	select {
	case r := <-w.ch:
		return r, nil
	case <-l.done:
		return l.late(w)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start sends a request whose answer will arrive on the returned
// waiter's channel; release forgets the request (a late answer is then
// dropped).
func (l *link) start(ctx context.Context, e *Envelope, onReply func(*Envelope)) (*waiter, func(), error) {
	w := &waiter{ch: make(chan *Envelope, 1), onReply: onReply}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, ErrClosed
	}
	l.pending[e.ID] = w
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		delete(l.pending, e.ID)
		l.mu.Unlock()
	}
	if err := l.send(ctx, e); err != nil {
		release()
		return nil, nil, err
	}
	return w, release, nil
}

// late returns the answer that arrived just before the link closed, or
// ErrClosed.
func (l *link) late(w *waiter) (*Envelope, error) {
	select {
	case r := <-w.ch:
		return r, nil
	default:
		return nil, ErrClosed
	}
}

// deliver hands a response or error to the request it answers and
// reports whether one was waiting.
func (l *link) deliver(e *Envelope) bool {
	l.mu.Lock()
	w, ok := l.pending[e.CorrelationID]
	if ok {
		delete(l.pending, e.CorrelationID)
	}
	l.mu.Unlock()
	if !ok {
		return false
	}
	if w.onReply != nil {
		w.onReply(e)
	}
	w.ch <- e
	return true
}

// close ends the link: pending calls fail, the transport is closed.
func (l *link) close() {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.done)
		l.cancel()
		_ = l.t.Close()
	})
}

func (l *link) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// idWindow remembers the most recent message IDs received in a session,
// to refuse a repeated one (§3: a MessageId is unique within a session).
type idWindow struct {
	set  map[string]struct{}
	ring []string
	next int
}

// idWindowSize is how many recent IDs a session remembers.
const idWindowSize = 4096

// add records id and reports whether it was new. The ring grows as IDs
// arrive: most sessions never see idWindowSize of them.
func (w *idWindow) add(id string) bool {
	if w.set == nil {
		w.set = make(map[string]struct{})
	}
	if _, dup := w.set[id]; dup {
		return false
	}
	if len(w.ring) < idWindowSize {
		w.ring = append(w.ring, id)
	} else {
		delete(w.set, w.ring[w.next])
		w.ring[w.next] = id
		w.next = (w.next + 1) % idWindowSize
	}
	w.set[id] = struct{}{}
	return true
}

// stamp is what a side puts in the envelopes it sends.
type stamp struct {
	version   string
	sessionID string
	source    EndpointRef
}

// envelope returns a new message with a fresh ID and the current time.
func (s stamp) envelope(kind Kind, typ string, payload any) (*Envelope, error) {
	raw, err := payloadJSON(payload)
	if err != nil {
		return nil, err
	}
	return &Envelope{UIAP: s.version, Kind: kind, Type: typ, ID: newMessageID(), SessionID: s.sessionID,
		TS: ids.Now(), Source: s.source, Payload: raw}, nil
}

// reply returns the response of the given type to req.
func (s stamp) reply(req *Envelope, typ string, payload any) (*Envelope, error) {
	e, err := s.envelope(KindResponse, typ, payload)
	if err != nil {
		return nil, err
	}
	e.CorrelationID = req.ID
	return e, nil
}

// errorFor returns the error message answering failed, which may be a
// partly read message: correlationId is its ID when one could be read
// (DESIGN §5), failedType its type.
func (s stamp) errorFor(failed *Envelope, e *Error) *Envelope {
	p := *e
	if p.FailedType == "" && failed != nil {
		p.FailedType = failed.Type
	}
	env, err := s.envelope(KindError, uiapwire.TypeError, &p)
	if err != nil { // an *Error always encodes; keep the code if details do not
		env, _ = s.envelope(KindError, uiapwire.TypeError, &Error{Code: p.Code, Message: p.Message, FailedType: p.FailedType})
	}
	if failed != nil {
		env.CorrelationID = failed.ID
	}
	return env
}

// payloadJSON encodes a payload, which must be a JSON object; nil is {}.
func payloadJSON(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if len(p) == 0 || p[0] != '{' {
			return nil, NewError(CodeInternalError, "payload is not a JSON object")
		}
		return p, nil
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, NewError(CodeInternalError, "payload is not a JSON object")
	}
	return b, nil
}

// newMessageID issues a message ID (UUIDv4, DESIGN §2): unique within a
// session (§3) without coordination, also across resumes.
func newMessageID() string { return ids.New() }

// randomToken returns n random bytes from crypto/rand, hex-encoded.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// heartbeat keeps a link alive (§8.4): every interval it looks whether
// the peer sent anything since the last tick; if not, it pings (session.
// ping with a random nonce; only a pong echoing it counts as an answer).
// When limit pings in a row went unanswered it calls dead and stops. It
// returns when the link closes.
func heartbeat(l *link, st func() stamp, interval time.Duration, limit int, dead func()) {
	if !l.beats.CompareAndSwap(false, true) {
		return // one per link: a resume over the same link keeps it
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	last, missed, pinged := l.alive.Load(), 0, false
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		if n := l.alive.Load(); n != last {
			last, missed, pinged = n, 0, false
			continue
		}
		if pinged {
			if missed++; missed >= limit {
				dead()
				return
			}
		}
		pinged = true
		nonce := randomToken(8)
		env, err := st().envelope(KindRequest, uiapwire.TypePing, sessionPing{Nonce: nonce})
		if err != nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(l.ctx, interval*time.Duration(limit+1))
			defer cancel()
			r, err := l.call(ctx, env, nil)
			if err != nil || r.Kind != KindResponse || r.Type != uiapwire.TypePong {
				return
			}
			if p, perr := decodePing(r.Payload); perr == nil && p.Nonce == nonce {
				l.alive.Add(1)
			}
		})
	}
}
