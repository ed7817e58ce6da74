package uicontrol

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by a Transport's Send and Receive once the
// connection is closed, by either end.
var ErrClosed = errors.New("uicontrol: transport closed")

// Transport carries UIAP messages between two peers, one encoded
// envelope per Send and per Receive; bindings (in-process, WebSocket,
// HTTP) implement it. UIAP Core is transport-agnostic (§2): a Transport
// neither reads nor checks messages.
//
// Concurrency: Send and Receive may be called concurrently with each
// other, but neither concurrently with itself; Close may be called at any
// time from any goroutine, more than once. Send returns once the message
// is handed to the connection (not when the peer has read it) and may
// block while the connection applies back-pressure; Receive blocks until
// a message arrives. Both return ctx's error when ctx ends first, and
// ErrClosed (possibly wrapped) after Close. Messages sent before the
// other end closed remain receivable; after Close on its own end,
// Receive returns ErrClosed at once. A Transport may keep the slice
// passed to Send; Receive's result belongs to the caller.
type Transport interface {
	Send(ctx context.Context, msg []byte) error
	Receive(ctx context.Context) ([]byte, error)
	Close() error
}

// pairBuffer is how many messages each direction of a Pair holds before
// Send blocks.
const pairBuffer = 64

// Pair returns the two ends of an in-process connection: what one end
// sends the other receives, in order. Closing either end closes the
// connection. It is for tests and for an app and agent in one process;
// it works inside a testing/synctest bubble.
func Pair() (app, agent Transport) {
	c := &pairConn{done: make(chan struct{})}
	ab, ba := make(chan []byte, pairBuffer), make(chan []byte, pairBuffer)
	return &pairEnd{c: c, in: ba, out: ab}, &pairEnd{c: c, in: ab, out: ba}
}

type pairConn struct {
	once sync.Once
	done chan struct{}
}

type pairEnd struct {
	c       *pairConn
	in, out chan []byte
	closed  atomic.Bool // this end called Close
}

func (p *pairEnd) Send(ctx context.Context, msg []byte) error {
	select {
	case <-p.c.done:
		return ErrClosed
	default:
	}
	select {
	case p.out <- msg:
		return nil
	case <-p.c.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pairEnd) Receive(ctx context.Context) ([]byte, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	select {
	case msg := <-p.in:
		return msg, nil
	case <-p.c.done:
		// Deliver what was sent before the close.
		select {
		case msg := <-p.in:
			return msg, nil
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pairEnd) Close() error {
	p.closed.Store(true)
	p.c.once.Do(func() { close(p.c.done) })
	return nil
}
