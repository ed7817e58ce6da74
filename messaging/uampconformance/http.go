package uampconformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/messaging"
)

// The HTTP binding's endpoint for envelopes and its media type (UAMP 1.0
// §7, §11 and Appendix C.1), as the spec writes them: the suite checks a
// server against the spec, not against package messaging.
const (
	pathMessages = "/v1/messages"
	mediaType    = "application/uamp+json;v=1"
)

type runner struct {
	opts   Options
	base   string
	report *Report

	from string
	conf *tls.Config  // verifies the server, presents the client certificate
	h2   *http.Client // HTTP/2 with the client certificate
	anon *http.Client // HTTP/2 without a client certificate

	to    string               // the agent under test
	keys  envelope.KeyResolver // the hub's keys: verify error envelopes (nil: unverified)
	limit int                  // the server's body limit

	streamsRead int      // raw streams whose sequence was checked
	seqProblems []string // what those streams did wrong
}

func (r *runner) add(res result) { r.report.Results = append(r.report.Results, res) }

func (r *runner) pass(name, clause, want string) {
	r.add(result{Name: name, Clause: clause, Passed: true, Expectation: want})
}

func (r *runner) fail(name, clause, want, got string) {
	r.add(result{Name: name, Clause: clause, Expectation: want, Got: got})
}

func (r *runner) skip(name, clause, want, why string) {
	r.add(result{Name: name, Clause: clause, Skipped: true, Expectation: want, Got: why})
}

// check passes when err is nil and fails with err's text otherwise.
func (r *runner) check(name, clause, want string, err error) {
	if err != nil {
		r.fail(name, clause, want, err.Error())
		return
	}
	r.pass(name, clause, want)
}

func (r *runner) setup() error {
	u, err := url.Parse(r.base)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q is not an https:// URL", r.opts.BaseURL)
	}
	if r.opts.Key == nil {
		return errors.New("no signing key")
	}
	r.from = r.opts.From
	if r.from == "" {
		r.from = "did:web:uamp-conformance.invalid"
		if did, _, ok := strings.Cut(r.opts.Key.KID(), "#"); ok && strings.HasPrefix(did, "did:") {
			r.from = did
		}
	}
	var cert tls.Certificate
	if r.opts.Certificate != nil {
		cert = *r.opts.Certificate
	} else if cert, err = messaging.KeyCertificate(r.opts.Key, r.from, time.Hour); err != nil {
		return err
	}
	r.conf = &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: r.opts.RootCAs, Certificates: []tls.Certificate{cert}}
	r.conf.InsecureSkipVerify = r.opts.InsecureSkipVerify
	anon := r.conf.Clone()
	anon.Certificates = nil
	r.h2, r.anon = h2Client(r.conf), h2Client(anon)
	r.to = r.opts.To
	r.limit = envelope.MaxEnvelopeSize
	return nil
}

func (r *runner) close() {
	r.h2.CloseIdleConnections()
	r.anon.CloseIdleConnections()
}

func h2Client(conf *tls.Config) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf.Clone(), Protocols: &p, ForceAttemptHTTP2: true,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second}}
}

// envelope returns a signed envelope from the suite to the agent.
func (r *runner) envelope(intent envelope.Intent, content string, edit func(e *envelope.Envelope)) *envelope.Envelope {
	e := envelope.New(r.from, []string{r.to}, intent, envelope.Body{Type: "text/plain", Content: content})
	if edit != nil {
		edit(e)
	}
	if err := envelope.Sign(e, r.opts.Key); err != nil {
		panic(err) // a key that cannot sign is refused by setup's KeyCertificate
	}
	return e
}

// ask returns a signed ask of content with window w.
func (r *runner) ask(content string, w int) *envelope.Envelope {
	return r.envelope(envelope.IntentAsk, content, func(e *envelope.Envelope) { e.DeltaWindow = w })
}

// control returns a signed ACK (progress with ext.ack_seq) or cancel of
// request req.
func (r *runner) control(req *envelope.Envelope, intent envelope.Intent, ackSeq int64) *envelope.Envelope {
	return r.envelope(intent, "", func(e *envelope.Envelope) {
		e.ReplyTo = req.ID
		if intent == envelope.IntentProgress {
			e.Ext = map[string]any{"ack_seq": float64(ackSeq)}
		}
	})
}

// exchange is one HTTP answer.
type exchange struct {
	status int
	header http.Header
	body   []byte
}

func (x *exchange) String() string {
	b := x.body
	if len(b) > 300 {
		b = append(b[:300:300], "…"...)
	}
	return fmt.Sprintf("HTTP %d %s", x.status, bytes.TrimSpace(b))
}

// post POSTs body to /v1/messages with content type ct over hc.
func (r *runner) post(ctx context.Context, hc *http.Client, ct string, body []byte) (*exchange, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+pathMessages, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ct)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, envelope.MaxEnvelopeSize))
	if err != nil {
		return nil, err
	}
	return &exchange{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// send POSTs an envelope with the UAMP media type and the client
// certificate.
func (r *runner) send(ctx context.Context, e *envelope.Envelope) (*exchange, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return r.post(ctx, r.h2, mediaType, b)
}

// open sends an ask and returns its stream's URL (202 + Location).
func (r *runner) open(ctx context.Context, req *envelope.Envelope) (string, error) {
	x, err := r.send(ctx, req)
	if err != nil {
		return "", err
	}
	loc := x.header.Get("Location")
	if x.status != http.StatusAccepted || loc == "" {
		return "", fmt.Errorf("the ask was not accepted with 202 and a Location: %s", x)
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("Location %q: %v", loc, err)
	}
	base, _ := url.Parse(r.base)
	return base.ResolveReference(u).String(), nil
}

// refusal checks an answer refusing a request: HTTP status want, and a
// body that is an error envelope whose code has that status (verified
// with the hub's keys when known). It returns nil or what is wrong.
func (r *runner) refusal(ctx context.Context, x *exchange, err error, status int, codes ...envelope.Code) error {
	if err != nil {
		return err
	}
	if x.status != status {
		return fmt.Errorf("want HTTP %d, got %s", status, x)
	}
	var env *envelope.Envelope
	if r.keys != nil {
		env, err = envelope.Open(ctx, x.body, r.keys)
	} else {
		env, err = envelope.Decode(x.body)
	}
	if err != nil {
		return fmt.Errorf("the body is not an error envelope signed by the server (%v): %s", err, x)
	}
	if env.Intent != envelope.IntentError {
		return fmt.Errorf("a %s envelope, not an error envelope: %s", env.Intent, x)
	}
	e, err := envelope.ParseErrorBody(env.Body)
	if err != nil {
		return fmt.Errorf("error body: %v: %s", err, x)
	}
	for _, c := range codes {
		if e.Code == c {
			return nil
		}
	}
	return fmt.Errorf("code %s, want %v: %s", e.Code, codes, x)
}

// stream is a raw SSE stream being read: its deltas arrive on ch.
type stream struct {
	resp   *http.Response
	ch     chan item
	cancel context.CancelFunc
	seq    *sequence
}

type item struct {
	d   *envelope.Delta
	err error
}

// follow GETs the stream at loc, from the delta after last (-1: from
// the start). A refusal is returned as an exchange.
func (r *runner) follow(ctx context.Context, loc, streamID string, last int64, seq *sequence) (*stream, *exchange, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := r.h2.Do(req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, envelope.MaxEnvelopeSize))
		return nil, &exchange{status: resp.StatusCode, header: resp.Header, body: b}, nil
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		cancel()
		resp.Body.Close()
		return nil, nil, fmt.Errorf("stream of Content-Type %q, want text/event-stream", ct)
	}
	s := &stream{resp: resp, ch: make(chan item, 256), cancel: cancel, seq: seq}
	go func() {
		defer close(s.ch)
		dec := sse.NewDecoder(resp.Body)
		dec.SetMaxEventSize(envelope.MaxDeltaSize)
		for {
			ev, err := dec.Next()
			if err != nil {
				s.ch <- item{err: err}
				return
			}
			d, err := envelope.DecodeDelta(ev.Data)
			if err == nil && ev.ID != strconv.FormatInt(d.Seq, 10) {
				err = fmt.Errorf("SSE id %q for delta_seq %d", ev.ID, d.Seq)
			}
			if err == nil {
				err = seq.accept(d)
			}
			s.ch <- item{d: d, err: err}
			if err != nil {
				return
			}
		}
	}()
	return s, nil, nil
}

// next returns the next delta, or ok false when none arrived within
// wait.
func (s *stream) next(wait time.Duration) (d *envelope.Delta, ok bool, err error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case it, open := <-s.ch:
		if !open {
			return nil, true, io.EOF
		}
		return it.d, true, it.err
	case <-t.C:
		return nil, false, nil
	}
}

// close drops the connection.
func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
	for range s.ch {
	}
}

// sequence checks, client-side, that a stream's deltas are numbered
// from 0 without gaps or duplicates and name their stream.
type sequence struct {
	r        *runner
	streamID string
	next     int64
	final    bool
}

func (r *runner) sequence(req *envelope.Envelope) *sequence {
	id := req.StreamID
	if id == "" {
		bare, _ := envelope.ParseID(req.ID)
		id = "str-" + bare
	}
	r.streamsRead++
	return &sequence{r: r, streamID: id}
}

// resumeAt sets the next delta_seq expected (a resumed stream).
func (q *sequence) resumeAt(seq int64) { q.next = seq }

func (q *sequence) accept(d *envelope.Delta) error {
	var problem string
	switch {
	case d.StreamID != q.streamID:
		problem = fmt.Sprintf("a delta of stream %q on stream %q", d.StreamID, q.streamID)
	case q.final:
		problem = fmt.Sprintf("delta %d after the final delta", d.Seq)
	case d.Seq != q.next:
		problem = fmt.Sprintf("stream %s: delta_seq %d where %d was due (a gap or a duplicate)", q.streamID, d.Seq, q.next)
	}
	if problem != "" {
		q.r.seqProblems = append(q.r.seqProblems, problem)
		return envelope.NewError(envelope.CodeMissingDeltaSeq, problem, nil)
	}
	q.next++
	q.final = d.Type.Final()
	return nil
}
