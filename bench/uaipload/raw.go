package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// rawConn is a minimal HTTP/1.1 keep-alive client for one connection: it
// writes pre-formatted requests and parses just enough of the response
// (status, Content-Length or chunked body). It spends far less CPU per
// request than net/http's client, so on a machine whose CPUs the load
// generator shares with the server, more of them are left to the server —
// the same for the bare baseline and for agentry.
type rawConn struct {
	addr string
	host string
	c    net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte
}

func newRawConn(target string) (*rawConn, string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, "", err
	}
	rc := &rawConn{addr: u.Host, host: u.Host}
	return rc, u.RequestURI(), rc.dial()
}

func (rc *rawConn) dial() error {
	c, err := net.DialTimeout("tcp", rc.addr, 5*time.Second)
	if err != nil {
		return err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	rc.c, rc.br = c, bufio.NewReaderSize(c, 32<<10)
	return nil
}

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

// post sends a JSON POST and returns the status and body (valid until the
// next call). A broken connection is redialled once.
func (rc *rawConn) post(path, session string, body []byte) (int, []byte, error) {
	rc.req = rc.req[:0]
	rc.req = append(rc.req, "POST "...)
	rc.req = append(rc.req, path...)
	rc.req = append(rc.req, " HTTP/1.1\r\nHost: "...)
	rc.req = append(rc.req, rc.host...)
	rc.req = append(rc.req, "\r\nContent-Type: application/json\r\n"...)
	if session != "" {
		rc.req = append(rc.req, "X-Session-Id: "...)
		rc.req = append(rc.req, session...)
		rc.req = append(rc.req, "\r\n"...)
	}
	rc.req = append(rc.req, "Content-Length: "...)
	rc.req = strconv.AppendInt(rc.req, int64(len(body)), 10)
	rc.req = append(rc.req, "\r\n\r\n"...)
	rc.req = append(rc.req, body...)
	for attempt := 0; ; attempt++ {
		if rc.c == nil {
			if err := rc.dial(); err != nil {
				return 0, nil, err
			}
		}
		status, resp, keep, err := rc.roundTrip()
		if err == nil {
			if !keep {
				rc.close()
			}
			return status, resp, nil
		}
		rc.close()
		if attempt == 1 {
			return 0, nil, err
		}
	}
}

func (rc *rawConn) roundTrip() (status int, body []byte, keepAlive bool, err error) {
	if _, err = rc.c.Write(rc.req); err != nil {
		return 0, nil, false, err
	}
	line, err := rc.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, keepAlive := -1, false, true
	for {
		h, err := rc.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			keepAlive = !bytes.EqualFold(v, []byte("close"))
		}
	}
	rc.body = rc.body[:0]
	switch {
	case chunked:
		for {
			sz, err := rc.br.ReadSlice('\n')
			if err != nil {
				return 0, nil, false, err
			}
			n, err := strconv.ParseInt(string(bytes.TrimSpace(sz)), 16, 64)
			if err != nil || n < 0 || n > 1<<20 {
				return 0, nil, false, errors.New("bad chunk size")
			}
			if n == 0 {
				if _, err := rc.br.ReadSlice('\n'); err != nil {
					return 0, nil, false, err
				}
				return status, rc.body, keepAlive, nil
			}
			start := len(rc.body)
			rc.body = append(rc.body, make([]byte, n)...)
			if _, err := io.ReadFull(rc.br, rc.body[start:]); err != nil {
				return 0, nil, false, err
			}
			if _, err := rc.br.Discard(2); err != nil {
				return 0, nil, false, err
			}
		}
	case length >= 0:
		if length > 1<<20 {
			return 0, nil, false, errors.New("response too large")
		}
		if cap(rc.body) < length {
			rc.body = make([]byte, length)
		}
		rc.body = rc.body[:length]
		if _, err := io.ReadFull(rc.br, rc.body); err != nil {
			return 0, nil, false, err
		}
		return status, rc.body, keepAlive, nil
	}
	return 0, nil, false, errors.New("response without a length")
}
