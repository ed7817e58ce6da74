package messaging

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/coder/websocket"
)

// maxWSBatch is the size up to which a writer packs the deltas that are
// ready into one WebSocket message (one delta is sent whatever its size).
const maxWSBatch = 32 << 10

// serveWebSocket serves /uamp/1/ws: envelopes in, deltas and error
// envelopes out, as length-prefixed records in binary messages
// (DESIGN §5). An ask opens a stream whose deltas follow on this
// connection; an ACK of a stream not followed here resumes it here from
// the delta after ack_seq; a cancel cancels.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 {
		// WebSocket over HTTP/2 (RFC 8441) or HTTP/3 (RFC 9220) is not
		// supported: answer rather than send an upgrade answer with
		// headers those protocols forbid.
		s.writeErrorStatus(w, http.StatusHTTPVersionNotSupported, "", "", envelope.NewError(envelope.CodeBadRequest, "the WebSocket binding is served over HTTP/1.1", nil))
		return
	}
	principal, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, "", "", err)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{subprotocol}})
	if err != nil {
		return // Accept answered
	}
	if c.Subprotocol() != subprotocol {
		c.Close(websocket.StatusPolicyViolation, "subprotocol "+subprotocol+" required")
		return
	}
	c.SetReadLimit(int64(s.opts.MaxBodySize) + frameHeaderSize)
	ctx, cancel := s.connContext(r.Context()) // a hijacked connection outlives http.Server.Close
	conn := &wsConn{s: s, c: c, principal: principal, ctx: ctx, cursors: map[*Stream]*cursor{}}
	defer func() {
		cancel()
		conn.wg.Wait()
		c.CloseNow()
	}()
	conn.readLoop()
}

// wsConn is one WebSocket connection of a Server.
type wsConn struct {
	s         *Server
	c         *websocket.Conn
	principal string
	ctx       context.Context
	wg        sync.WaitGroup

	mu      sync.Mutex
	cursors map[*Stream]*cursor // the streams followed here
}

func (conn *wsConn) readLoop() {
	var buf bytes.Buffer
	for {
		typ, rd, err := conn.c.Reader(conn.ctx)
		if err != nil {
			return // closed, or over the read limit (closed with 1009, the WebSocket form of 4.13)
		}
		if typ != websocket.MessageBinary {
			conn.c.Close(websocket.StatusUnsupportedData, "UAMP messages are binary")
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(rd); err != nil {
			return
		}
		fr := frameReader{msg: buf.Bytes(), max: conn.s.opts.MaxBodySize}
		for {
			rec, err := fr.next()
			if err != nil {
				code, status := envelope.CodeBadRequest, websocket.StatusProtocolError
				if errors.Is(err, errRecordTooLarge) {
					code, status = envelope.CodePayloadTooLarge, websocket.StatusMessageTooBig
				}
				conn.sendError("", envelope.NewError(code, "", err))
				conn.c.Close(status, "malformed record")
				return
			}
			if rec == nil {
				break
			}
			conn.handle(rec)
		}
	}
}

// handle acts on one envelope record.
func (conn *wsConn) handle(rec []byte) {
	e, err := conn.s.open(conn.ctx, conn.principal, rec)
	if err == nil {
		var res result
		res, err = conn.s.dispatch(conn.ctx, e)
		switch {
		case err != nil:
		case res.started:
			err = conn.follow(res.stream, 0)
		case e.Intent == envelope.IntentProgress && !conn.following(res.stream):
			err = conn.follow(res.stream, res.resume)
		}
	}
	if err != nil {
		replyTo := ""
		if e != nil {
			replyTo = e.ID
		}
		conn.sendError(replyTo, err)
	}
}

func (conn *wsConn) sendError(replyTo string, err error) {
	b := appendFrame(nil, conn.s.errorEnvelope(conn.principal, replyTo, envelope.AsError(err)))
	ctx, cancel := context.WithTimeout(conn.ctx, 10*time.Second)
	defer cancel()
	conn.c.Write(ctx, websocket.MessageBinary, b)
}

func (conn *wsConn) following(st *Stream) bool {
	conn.mu.Lock()
	defer conn.mu.Unlock()
	return conn.cursors[st] != nil
}

// follow attaches st from delta_seq from to this connection and starts
// its writer.
func (conn *wsConn) follow(st *Stream, from int64) error {
	cur, err := st.attach(from)
	if err != nil {
		return err
	}
	conn.mu.Lock()
	conn.cursors[st] = cur
	conn.mu.Unlock()
	conn.wg.Add(1)
	go conn.write(cur)
	return nil
}

// write sends the deltas of one stream, batched, until its final delta,
// a takeover or the end of the connection.
func (conn *wsConn) write(cur *cursor) {
	defer conn.wg.Done()
	defer func() {
		cur.detach()
		conn.mu.Lock()
		if conn.cursors[cur.s] == cur {
			delete(conn.cursors, cur.s)
		}
		conn.mu.Unlock()
	}()
	buf := make([]byte, 0, maxWSBatch+4<<10)
	for {
		var final bool
		var err error
		buf, final, err = cur.read(conn.ctx, buf[:0], maxWSBatch, nil, wsFrame)
		if err != nil {
			return
		}
		if len(buf) > 0 {
			if err := conn.c.Write(conn.ctx, websocket.MessageBinary, buf); err != nil {
				return
			}
		}
		if final {
			return
		}
	}
}

func wsFrame(dst []byte, _ int64, delta []byte) []byte { return appendFrame(dst, delta) }
