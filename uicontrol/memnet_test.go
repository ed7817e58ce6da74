package uicontrol_test

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"
)

// memServer serves an http.Handler over in-memory connections (memConn),
// so that a binding can run inside a testing/synctest bubble: no real
// socket, every goroutine ends when the test's cleanups have run.
type memServer struct {
	l      *memListener
	srv    *http.Server
	served chan struct{}
	client *http.Client // dials the server in memory; no idle connections
}

// newMemServer serves h; each connection buffers chunks KiB per
// direction (a small socket buffer).
func newMemServer(t testing.TB, h http.Handler, chunks int) *memServer {
	l := &memListener{conns: make(chan net.Conn), done: make(chan struct{}), chunks: chunks}
	s := &memServer{l: l, served: make(chan struct{}),
		srv: &http.Server{Handler: h, ErrorLog: log.New(discardWriter{}, "", 0)}}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: l.dial, DisableKeepAlives: true}
	s.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		_ = s.srv.Close()
		<-s.served
		tr.CloseIdleConnections()
		// A server connection that answered without reading the whole
		// request lingers half a second before closing (net/http's reset
		// avoidance): outwait it, in the bubble's time.
		time.Sleep(time.Second)
	})
	return s
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

type memListener struct {
	chunks int
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := memPipe(l.chunks)
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// memPipe returns the ends of an in-memory connection that, unlike
// net.Pipe, buffers writes as a socket does, if little (chunks of
// memPipeChunk bytes per direction): with net.Pipe two WebSocket peers
// answering each other's pings at the same moment would both block
// writing their pong; with much buffering the suite's stuck connection
// would not get stuck. Every wait is on a channel, so a blocked end is
// durably blocked in a synctest bubble.
func memPipe(chunks int) (a, b net.Conn) {
	ab, ba := make(chan []byte, chunks), make(chan []byte, chunks)
	da, db := make(chan struct{}), make(chan struct{})
	a = &memConn{in: ba, out: ab, local: da, remote: db, rd: newDeadline(), wd: newDeadline()}
	b = &memConn{in: ab, out: ba, local: db, remote: da, rd: newDeadline(), wd: newDeadline()}
	return a, b
}

const memPipeChunk = 1 << 10

type memConn struct {
	in, out       chan []byte
	local, remote chan struct{} // closed by this end's, the other end's Close
	once          sync.Once
	rd, wd        *deadline

	mu      sync.Mutex
	pending []byte // the rest of a chunk partly read
}

func (c *memConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	select {
	case <-c.local:
		return 0, net.ErrClosed
	case <-c.rd.wait():
		return 0, os.ErrDeadlineExceeded
	default:
	}
	var chunk []byte
	select {
	case chunk = <-c.in:
	case <-c.remote:
		select { // what was written before the close
		case chunk = <-c.in:
		default:
			return 0, io.EOF
		}
	case <-c.local:
		return 0, net.ErrClosed
	case <-c.rd.wait():
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(b, chunk)
	c.mu.Lock()
	c.pending = chunk[n:]
	c.mu.Unlock()
	return n, nil
}

func (c *memConn) Write(b []byte) (int, error) {
	select {
	case <-c.local:
		return 0, net.ErrClosed
	case <-c.remote:
		return 0, io.ErrClosedPipe
	case <-c.wd.wait():
		return 0, os.ErrDeadlineExceeded
	default:
	}
	n := 0
	for n < len(b) {
		chunk := append([]byte(nil), b[n:min(len(b), n+memPipeChunk)]...)
		select {
		case c.out <- chunk:
			n += len(chunk)
		case <-c.local:
			return n, net.ErrClosed
		case <-c.remote:
			return n, io.ErrClosedPipe
		case <-c.wd.wait():
			return n, os.ErrDeadlineExceeded
		}
	}
	return n, nil
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.local) })
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr { return memAddr{} }
func (c *memConn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}
func (c *memConn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a settable deadline whose expiry closes a channel (as in
// net.Pipe).
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func newDeadline() *deadline { return &deadline{cancel: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer's func has closed it
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
