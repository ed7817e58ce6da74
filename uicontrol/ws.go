package uicontrol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// wsSubprotocol is the WebSocket subprotocol of the ws@0.1 binding. DialWS
// offers it and NewWSHandler selects it when offered; a client that
// offers none (a browser's new WebSocket(url)) is served all the same.
const wsSubprotocol = "uiap.v0.1"

// defaultWSPing is how often a WebSocket ping is sent by default.
const defaultWSPing = 30 * time.Second

// wsBuffer is how many received messages a WebSocket transport holds
// before it stops reading the connection (back-pressure).
const wsBuffer = 64

// WSOptions configures NewWSHandler. The zero value works: same-origin
// and non-browser clients only, messages up to DefaultMaxMessageSize, a
// ping every 30 s.
type WSOptions struct {
	// OriginPatterns authorizes cross-origin browser connections: each is
	// a host pattern (path.Match, case-insensitive) matched against the
	// Origin header's host, or against "scheme://host" when the pattern
	// contains "://". A request without Origin (not from a browser) or
	// whose Origin host is the request's Host is always accepted; any
	// other is refused with 403 Forbidden.
	OriginPatterns []string
	// ReadLimit bounds a received message in bytes; a larger one closes
	// the connection with status 1009 (message too big). 0 means
	// DefaultMaxMessageSize.
	ReadLimit int64
	// PingInterval is how often a WebSocket ping is sent; when its pong
	// has not come back by the next one the connection is closed. 0 means
	// 30 s, a negative value sends no pings (pings from the peer are
	// always answered).
	PingInterval time.Duration
	// Logger receives operational records; nil is slog.Default().
	Logger *slog.Logger
}

// NewWSHandler returns the server side of the ws@0.1 binding: an
// http.Handler that accepts a WebSocket (conventionally at /uiap/ws) and
// runs serve over it, one UIAP message per text frame, until serve
// returns; then the connection is closed. serve is usually an App's
// Serve method:
//
//	mux.Handle("/uiap/ws", uicontrol.NewWSHandler(app.Serve, nil))
//
// serve gets the request's context. A request that is not a WebSocket
// handshake is answered 426 Upgrade Required; a cross-origin one not
// authorized by opts.OriginPatterns, 403 Forbidden. opts may be nil.
func NewWSHandler(serve func(context.Context, Transport) error, opts *WSOptions) http.Handler {
	h := &wsHandler{serve: serve}
	if opts != nil {
		h.opts = *opts
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}

type wsHandler struct {
	serve func(context.Context, Transport) error
	opts  WSOptions
	log   *slog.Logger
}

func (h *wsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:   []string{wsSubprotocol},
		OriginPatterns: h.opts.OriginPatterns,
	})
	if err != nil { // Accept has answered
		h.log.Debug("uicontrol: websocket refused", "remote", r.RemoteAddr, "err", err)
		return
	}
	t := newWSTransport(c, h.opts.ReadLimit, h.opts.PingInterval)
	defer t.Close()
	if err := h.serve(r.Context(), t); err != nil {
		h.log.Debug("uicontrol: websocket connection ended", "remote", r.RemoteAddr, "err", err)
	}
}

// WSDialOptions configures DialWS. The zero value works.
type WSDialOptions struct {
	// HTTPClient makes the handshake request; nil is http.DefaultClient.
	// Its Transport must support protocol switches (http.Transport does).
	HTTPClient *http.Client
	// Header is added to the handshake request (e.g. Authorization).
	Header http.Header
	// ReadLimit and PingInterval are as in WSOptions.
	ReadLimit    int64
	PingInterval time.Duration
}

// DialWS opens a ws@0.1 connection to url (ws://, wss://, or http(s)://
// taken as ws(s)://) for an agent to Connect over. ctx bounds the
// handshake only. opts may be nil.
func DialWS(ctx context.Context, url string, opts *WSDialOptions) (Transport, error) {
	var o WSDialOptions
	if opts != nil {
		o = *opts
	}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:   o.HTTPClient,
		HTTPHeader:   o.Header,
		Subprotocols: []string{wsSubprotocol},
	})
	if err != nil {
		return nil, fmt.Errorf("uicontrol: %w", err)
	}
	return newWSTransport(c, o.ReadLimit, o.PingInterval), nil
}

// wsTransport is a Transport over one WebSocket connection. Receive
// reads the connection on the caller's goroutine: a hand-off from a
// reading goroutine costs two goroutine wake-ups per round trip, about
// as much as the WebSocket round trip itself. Control frames (ping,
// pong, close) are handled while a Receive is waiting, which App.Serve
// and Agent do all the time. A WebSocket read cannot be abandoned
// without losing the connection, so a Receive whose ctx has a deadline
// (a caller polling with a timeout) reads on a helper goroutine, whose
// message the next Receive returns if the deadline passes first; a ctx
// without one that ends closes the transport (App.Serve and Agent cancel
// theirs only to close it).
type wsTransport struct {
	c    *websocket.Conn
	done chan struct{} // closed by Close
	once sync.Once
	rmu  chan struct{} // held by a Receive (a channel: waiting is ctx-aware)
	bg   chan wsRead   // a helper read's result; nil when none is in flight

	readErr error // why reading stopped
}

type wsRead struct {
	b   []byte
	err error
}

func newWSTransport(c *websocket.Conn, readLimit int64, ping time.Duration) *wsTransport {
	if readLimit <= 0 {
		readLimit = DefaultMaxMessageSize
	}
	if ping == 0 {
		ping = defaultWSPing
	}
	c.SetReadLimit(readLimit)
	t := &wsTransport{c: c, done: make(chan struct{}), rmu: make(chan struct{}, 1)}
	if ping > 0 {
		go t.ping(ping)
	}
	return t
}

// errBinaryFrame ends a connection whose peer sent a binary message.
var errBinaryFrame = errors.New("uicontrol: websocket: binary message (UIAP messages are text)")

// read reads one text message; any failure ends the connection. Reads
// are serialized (by rmu, or by the one helper in flight).
func (t *wsTransport) read() ([]byte, error) {
	if t.readErr != nil {
		return nil, t.readErr
	}
	typ, b, err := t.c.Read(context.Background())
	if err == nil && typ != websocket.MessageText {
		err = errBinaryFrame
		go func() { _ = t.c.Close(websocket.StatusUnsupportedData, "UIAP messages are text frames") }()
	}
	if err != nil {
		t.readErr = fmt.Errorf("%w: %w", ErrClosed, err)
		return nil, t.readErr
	}
	return b, nil
}

// ping sends a ping every interval and closes the connection when the
// pong does not come back within the interval.
func (t *wsTransport) ping(interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		err := t.c.Ping(ctx)
		cancel()
		if err != nil {
			_ = t.c.CloseNow()
			return
		}
	}
}

// Send writes msg as one text message. A write cut short (by ctx or a
// connection error) closes the connection: it may have been half sent.
func (t *wsTransport) Send(ctx context.Context, msg []byte) error {
	select {
	case <-t.done:
		return ErrClosed
	default:
	}
	if err := t.c.Write(ctx, websocket.MessageText, msg); err != nil {
		select {
		case <-t.done:
			return ErrClosed
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return nil
}

func (t *wsTransport) Receive(ctx context.Context) ([]byte, error) {
	select {
	case <-t.done:
		return nil, ErrClosed
	default:
	}
	select {
	case t.rmu <- struct{}{}:
	case <-t.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-t.rmu }()
	if _, ok := ctx.Deadline(); !ok && t.bg == nil {
		// A context coder/websocket sees would, when it ends, drop the
		// connection without a closing handshake, and with it what the
		// peer sent before closing; Close says goodbye properly.
		stop := context.AfterFunc(ctx, func() { _ = t.Close() })
		b, err := t.read()
		stop()
		if err != nil {
			select {
			case <-t.done:
				return nil, ErrClosed
			default:
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		return b, err
	}
	if t.bg == nil {
		bg := make(chan wsRead, 1)
		t.bg = bg
		go func() {
			b, err := t.read()
			bg <- wsRead{b, err}
		}()
	}
	select {
	case r := <-t.bg:
		t.bg = nil
		return r.b, r.err
	case <-t.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err() // the next Receive gets the helper's message
	}
}

// Close starts the closing handshake (status 1000) and returns at once:
// the handshake waits for the peer's close frame (at most 10 s), which
// a Close should not.
func (t *wsTransport) Close() error {
	t.once.Do(func() {
		close(t.done)
		go func() { _ = t.c.Close(websocket.StatusNormalClosure, "") }()
	})
	return nil
}
