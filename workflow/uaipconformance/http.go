package uaipconformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// maxBody bounds the response bodies the suite reads.
const maxBody = 4 << 20

// exchange is one request and what the server answered.
type exchange struct {
	method, path string
	status       int
	header       http.Header
	body         []byte
	err          error // transport failure
}

// send makes one request. body nil sends no body; a session ID sets the
// X-Session-Id header.
func (r *runner) send(ctx context.Context, method, path, session string, body []byte) *exchange {
	x := &exchange{method: method, path: path}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		x.err = err
		return x
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	if r.opts.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+r.opts.BearerToken)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		x.err = err
		return x
	}
	defer resp.Body.Close()
	x.status, x.header = resp.StatusCode, resp.Header
	x.body, x.err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	r.seen = append(r.seen, x)
	return x
}

// post sends v encoded as JSON.
func (r *runner) post(ctx context.Context, path, session string, v any) *exchange {
	b, err := json.Marshal(v)
	if err != nil {
		return &exchange{method: http.MethodPost, path: path, err: err}
	}
	return r.send(ctx, http.MethodPost, path, session, b)
}

// execute posts an /execute request for the suite's workflow.
func (r *runner) execute(ctx context.Context, session string, fields map[string]any) *exchange {
	body := map[string]any{"workflow_name": r.wf}
	for k, v := range fields {
		body[k] = v
	}
	return r.post(ctx, "/execute", session, body)
}

// isJSON reports whether the response's media type is application/json
// (or a +json type).
func (x *exchange) isJSON() bool {
	mt, _, err := mime.ParseMediaType(x.header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// object decodes the body as a JSON object.
func (x *exchange) object() (map[string]any, bool) {
	if x.err != nil {
		return nil, false
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(x.body))
	dec.UseNumber()
	if dec.Decode(&m) != nil || m == nil || dec.More() {
		return nil, false
	}
	return m, true
}

// detail returns the error body's detail and whether it is a string in a
// JSON object.
func (x *exchange) detail() (string, bool) {
	m, ok := x.object()
	if !ok {
		return "", false
	}
	d, ok := m["detail"].(string)
	return d, ok
}

// String describes the response for a Result's Got.
func (x *exchange) String() string {
	if x.err != nil && x.status == 0 {
		return fmt.Sprintf("%s %s: transport error: %v", x.method, x.path, x.err)
	}
	ct := x.header.Get("Content-Type")
	if ct == "" {
		ct = "no Content-Type"
	}
	return fmt.Sprintf("HTTP %d (%s) %s", x.status, ct, snippet(x.body))
}

// snippet quotes the start of a body.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "empty body"
	}
	const max = 160
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}
