package uampconformance

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/discovery"
)

// longContent is echoed back as many chunks (the echo agent sends at
// most a few hundred bytes a chunk), so that streams outlast small
// windows.
var longContent = strings.Repeat("UAMP conformance: Grüße, 🙂 — ", 120)

// wait bounds the wait for a delta that is due.
const wait = 5 * time.Second

func (r *runner) run(ctx context.Context) {
	timed := func(f func(ctx context.Context)) {
		t := r.opts.Timeout
		if t <= 0 {
			t = 15 * time.Second
		}
		ctx, cancel := context.WithTimeout(ctx, t)
		defer cancel()
		f(ctx)
	}
	timed(r.checkDiscovery)
	timed(r.checkTLSOnly)
	if r.to == "" {
		why := "no agent to address: discovery failed and Options.To is empty"
		for _, c := range []struct{ name, clause string }{
			{"http/415-media-type", clauseMediaType}, {"http/413-body-limit", clauseTooLarge},
			{"auth/401-no-client-certificate", clauseAuthN}, {"auth/401-no-sig", clauseIntegrity}, {"auth/401-unsigned", clauseIntegrity},
			{"auth/401-tampered", clauseIntegrity}, {"auth/401-unknown-key", clauseIntegrity},
			{"auth/403-from-not-principal", clauseAuthZ}, {"auth/replay", clauseReplay},
			{"echo/sse", clauseEchoSSE}, {"echo/websocket", clauseEchoWS}, {"stream/window", clauseWindow},
			{"stream/resume", clauseResume}, {"stream/resume-gap-4.09", clauseResumeGap}, {"stream/cancel", clauseCancel},
			{"stream/sequence", clauseSequencing},
		} {
			r.skip(c.name, c.clause, "", why)
		}
		return
	}
	timed(r.checkMediaType)
	timed(r.checkBodyLimit)
	timed(r.checkAuthentication)
	timed(r.checkFromIsPrincipal)
	timed(r.checkReplay)
	timed(func(ctx context.Context) { r.checkEcho(ctx, false, "echo/sse", clauseEchoSSE) })
	timed(func(ctx context.Context) { r.checkEcho(ctx, true, "echo/websocket", clauseEchoWS) })
	timed(r.checkWindow)
	timed(r.checkResume)
	timed(r.checkResumeGap)
	timed(r.checkCancel)
	want := "every delta of every stream read: delta_seq 0, 1, 2, … once each, its stream's stream_id, nothing after the final delta"
	switch {
	case len(r.seqProblems) > 0:
		r.fail("stream/sequence", clauseSequencing, want, strings.Join(r.seqProblems, "; "))
	case r.streamsRead == 0:
		r.skip("stream/sequence", clauseSequencing, want, "no stream was read")
	default:
		r.pass("stream/sequence", clauseSequencing, want)
	}
}

// checkDiscovery fetches and verifies the hub and the manifest; the hub
// names the agent under test and its keys verify error envelopes.
func (r *runner) checkDiscovery(ctx context.Context) {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: r.conf.Clone()}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	wantHub := "GET " + discovery.HubPath + ": a hub document whose signature verifies (by did:web, or the trust anchors given) and lists the server's manifest"
	wantManifest := "GET " + discovery.ManifestPath + ": a compact JWS, media type " + envelope.ManifestMediaType + ", verified with the hub's keys, of a uamp/1.x manifest"
	d, err := discovery.Discover(ctx, r.base, &discovery.ClientOptions{HTTPClient: hc, Trust: r.opts.Trust})
	if err != nil {
		r.fail("discovery/hub", clauseHub, wantHub, err.Error())
		r.skip("discovery/manifest", clauseManifest, wantManifest, "the hub did not verify")
		return
	}
	r.pass("discovery/hub", clauseHub, wantHub)
	r.keys = d.Keys
	if r.to == "" {
		r.to = d.Hub.DID
	}
	if kb := d.Manifest.Limits.MaxBodyKB; kb > 0 && kb<<10 < envelope.MaxEnvelopeSize {
		r.limit = int(kb << 10)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.Hub.Manifests[0].URL, nil)
	resp, err := hc.Do(req)
	if err != nil {
		r.fail("discovery/manifest", clauseManifest, wantManifest, err.Error())
		return
	}
	resp.Body.Close()
	switch ct := resp.Header.Get("Content-Type"); {
	case !strings.HasPrefix(ct, envelope.ManifestMediaType):
		r.fail("discovery/manifest", clauseManifest, wantManifest, fmt.Sprintf("Content-Type %q", ct))
	case !strings.HasPrefix(d.Manifest.Agent, "uamp/1."):
		r.fail("discovery/manifest", clauseManifest, wantManifest, fmt.Sprintf("agent %q", d.Manifest.Agent))
	default:
		r.pass("discovery/manifest", clauseManifest, wantManifest)
	}
}

// checkTLSOnly: a TLS 1.2 handshake fails, plain HTTP gets no UAMP.
func (r *runner) checkTLSOnly(ctx context.Context) {
	u, _ := url.Parse(r.base)
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	want := "a TLS 1.2 handshake is refused"
	d := tls.Dialer{Config: &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true, ServerName: u.Hostname()}} // the protocol version is under test, not the certificate
	conn, err := d.DialContext(ctx, "tcp", host)
	if err == nil {
		v := conn.(*tls.Conn).ConnectionState().Version
		conn.Close()
		r.fail("transport/tls12-refused", clauseTLS, want, fmt.Sprintf("handshake completed with version %#x", v))
	} else {
		r.pass("transport/tls12-refused", clauseTLS, want)
	}

	want = "plain HTTP to the UAMP endpoint is not served (no 202)"
	hc := &http.Client{Timeout: 5 * time.Second}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+host+pathMessages, strings.NewReader("{}"))
	req.Header.Set("Content-Type", mediaType)
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			r.fail("transport/plain-http-refused", clauseTLS, want, fmt.Sprintf("HTTP %d over plain HTTP", resp.StatusCode))
			return
		}
	}
	r.pass("transport/plain-http-refused", clauseTLS, want)
}

func (r *runner) checkMediaType(ctx context.Context) {
	b, _ := json.Marshal(r.ask("media type", 0))
	x, err := r.post(ctx, r.h2, "application/json", b)
	r.check("http/415-media-type", clauseMediaType,
		"a signed ask sent as application/json is refused: HTTP 415, error envelope 4.15",
		r.refusal(ctx, x, err, http.StatusUnsupportedMediaType, envelope.CodeUnsupportedMediaType))
}

func (r *runner) checkBodyLimit(ctx context.Context) {
	pad := r.limit + 1 - len(`{"pad":""}`)
	body := []byte(`{"pad":"` + strings.Repeat("a", pad) + `"}`)
	x, err := r.post(ctx, r.h2, mediaType, body)
	r.check("http/413-body-limit", clauseTooLarge,
		fmt.Sprintf("an envelope of %d bytes (the limit + 1) is refused: HTTP 413, error envelope 4.13", len(body)),
		r.refusal(ctx, x, err, http.StatusRequestEntityTooLarge, envelope.CodePayloadTooLarge))
}

func (r *runner) checkAuthentication(ctx context.Context) {
	b, _ := json.Marshal(r.ask("no certificate", 0))
	x, err := r.post(ctx, r.anon, mediaType, b)
	r.check("auth/401-no-client-certificate", clauseAuthN,
		"a signed ask without a client certificate (or bearer token) is refused: HTTP 401, 4.01",
		r.refusal(ctx, x, err, http.StatusUnauthorized, envelope.CodeUnauthenticated))

	// An envelope without sig is well formed but for it: unauthenticated,
	// not malformed (docs/spec-notes/uamp.md, "Error codes").
	x, err = r.send(ctx, envelope.New(r.from, []string{r.to}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "no sig"}))
	r.check("auth/401-no-sig", clauseIntegrity,
		"an ask without sig is refused: HTTP 401, 4.01",
		r.refusal(ctx, x, err, http.StatusUnauthorized, envelope.CodeUnauthenticated))

	unsigned := envelope.New(r.from, []string{r.to}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "unsigned"})
	unsigned.Sig = "unsigned"
	x, err = r.send(ctx, unsigned)
	r.check("auth/401-unsigned", clauseIntegrity,
		`an ask whose sig is not a JWS ("unsigned") is refused: HTTP 401, 4.01`,
		r.refusal(ctx, x, err, http.StatusUnauthorized, envelope.CodeUnauthenticated))

	tampered := r.ask("tampered", 0)
	tampered.Body.Content += "!"
	x, err = r.send(ctx, tampered)
	r.check("auth/401-tampered", clauseIntegrity,
		"a signed ask whose body.content changed after signing is refused: HTTP 401, 4.01",
		r.refusal(ctx, x, err, http.StatusUnauthorized, envelope.CodeUnauthenticated))

	want := "an ask signed by a key the server does not know is refused: HTTP 401, 4.01"
	kid := "uamp-conformance-unknown"
	if strings.HasPrefix(r.from, "did:") {
		kid = r.from + "#uamp-conformance-unknown"
	}
	stranger, err := envelope.GenerateKey(envelope.EdDSA, kid)
	if err != nil {
		r.fail("auth/401-unknown-key", clauseIntegrity, want, err.Error())
		return
	}
	unknown := envelope.New(r.from, []string{r.to}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "unknown key"})
	envelope.Sign(unknown, stranger)
	x, err = r.send(ctx, unknown)
	r.check("auth/401-unknown-key", clauseIntegrity, want, r.refusal(ctx, x, err, http.StatusUnauthorized, envelope.CodeUnauthenticated))
}

// checkFromIsPrincipal sends, under the suite's certificate, an envelope
// whose signature verifies but whose from is someone else. That needs a
// key with a bare kid (trusted for any sender): a kid that is a DID URL
// signs for its DID only.
func (r *runner) checkFromIsPrincipal(ctx context.Context) {
	want := "a correctly signed ask whose from is not the authenticated principal is refused: HTTP 403, 4.03"
	if did, _, ok := strings.Cut(r.opts.Key.KID(), "#"); ok && strings.HasPrefix(did, "did:") {
		r.skip("auth/403-from-not-principal", clauseAuthZ, want, "the key's kid is a DID URL, so it signs for "+did+" only: use a key with a bare kid")
		return
	}
	other := "did:web:someone-else.invalid"
	if other == r.from {
		other = "did:web:someone-else-2.invalid"
	}
	e := r.envelope(envelope.IntentAsk, "not me", func(e *envelope.Envelope) { e.From = other })
	x, err := r.send(ctx, e)
	r.check("auth/403-from-not-principal", clauseAuthZ, want, r.refusal(ctx, x, err, http.StatusForbidden, envelope.CodeUnauthorized))
}

func (r *runner) checkReplay(ctx context.Context) {
	want := "the same signed ask sent twice: the first accepted (202), the second refused with an error envelope (4.01)"
	req := r.ask("replay", 0)
	loc, err := r.open(ctx, req)
	if err != nil {
		r.fail("auth/replay", clauseReplay, want, err.Error())
		return
	}
	defer r.drain(ctx, req, loc)
	x, err := r.send(ctx, req)
	r.check("auth/replay", clauseReplay, want, r.refusal(ctx, x, err, http.StatusUnauthorized, envelope.CodeUnauthenticated))
}

// drain reads a stream to its end, ACKing as it goes, so that the server
// releases it; failures are of no interest here.
func (r *runner) drain(ctx context.Context, req *envelope.Envelope, loc string) {
	s, _, err := r.follow(ctx, loc, "", -1, &sequence{r: &runner{}, streamID: streamIDOf(req)})
	if err != nil || s == nil {
		return
	}
	defer s.close()
	for {
		d, ok, err := s.next(wait)
		if err != nil || !ok {
			return
		}
		r.send(ctx, r.control(req, envelope.IntentProgress, d.Seq))
		if d.Type.Final() {
			return
		}
	}
}

func streamIDOf(req *envelope.Envelope) string {
	if req.StreamID != "" {
		return req.StreamID
	}
	bare, _ := envelope.ParseID(req.ID)
	return "str-" + bare
}

// checkEcho asks the echo agent for a long reply with a window of 4
// through messaging.Client, which ACKs every 2 deltas and refuses a gap
// (4.09).
func (r *runner) checkEcho(ctx context.Context, b bool, name, clause string) {
	want := "an ask (delta_window 4) is answered with chunk deltas {\"content\"} that reassemble body.content, then done, ACKed every 2 deltas"
	c, err := messaging.NewClient(r.base, &messaging.ClientOptions{Key: r.opts.Key, WebSocket: b, TLS: r.conf, ServerKeys: r.keys, AckEvery: 2})
	if err != nil {
		r.fail(name, clause, want, err.Error())
		return
	}
	defer c.CloseIdleConnections()
	req := envelope.New(r.from, []string{r.to}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: longContent})
	req.DeltaWindow = 4
	reply, err := c.Ask(ctx, req)
	if err != nil {
		r.fail(name, clause, want, err.Error())
		return
	}
	var text strings.Builder
	n := 0
	var last *envelope.Delta
	for d, err := range reply.Deltas() {
		if err != nil {
			r.fail(name, clause, want, fmt.Sprintf("after %d deltas: %v", n, err))
			return
		}
		n++
		last = d
		if d.Type == envelope.DeltaChunk {
			var p struct {
				Content *string `json:"content"`
			}
			if json.Unmarshal(d.Payload, &p) != nil || p.Content == nil {
				r.fail(name, clause, want, fmt.Sprintf("chunk %d without a string content: %s", d.Seq, d.Payload))
				return
			}
			text.WriteString(*p.Content)
		}
	}
	switch {
	case last == nil || last.Type != envelope.DeltaDone:
		r.fail(name, clause, want, "the stream did not end with done")
	case text.String() != longContent:
		r.fail(name, clause, want, fmt.Sprintf("the chunks reassemble %d bytes that differ from the %d sent", text.Len(), len(longContent)))
	case n <= 4:
		r.fail(name, clause, want, fmt.Sprintf("%d deltas: too few to pass a window of 4 (the echo agent should chunk its reply)", n))
	default:
		r.pass(name, clause, want)
	}
}

// checkWindow reads a stream with delta_window 2 without ACKing: two
// deltas arrive and then nothing, until an ACK lets the next one come.
func (r *runner) checkWindow(ctx context.Context) {
	const name = "stream/window"
	want := "with delta_window 2 and no ACK, deltas 0 and 1 arrive and no third; after an ACK of 1, delta 2 arrives"
	req := r.ask(longContent, 2)
	loc, err := r.open(ctx, req)
	if err != nil {
		r.fail(name, clauseWindow, want, err.Error())
		return
	}
	s, x, err := r.follow(ctx, loc, "", -1, r.sequence(req))
	if err == nil && x != nil {
		err = errors.New(x.String())
	}
	if err != nil {
		r.fail(name, clauseWindow, want, "GET stream: "+err.Error())
		return
	}
	defer s.close()
	for i := range 2 {
		d, ok, err := s.next(wait)
		switch {
		case err != nil:
			r.fail(name, clauseWindow, want, err.Error())
			return
		case !ok:
			r.fail(name, clauseWindow, want, fmt.Sprintf("delta %d did not arrive within %v", i, wait))
			return
		case d.Type.Final():
			r.skip(name, clauseWindow, want, fmt.Sprintf("the stream ended within the window (%s at %d)", d.Type, d.Seq))
			return
		}
	}
	if d, ok, err := s.next(time.Second); ok {
		r.fail(name, clauseWindow, want, fmt.Sprintf("a third delta (%v, %v) arrived with 2 un-ACKed", describe(d), err))
		return
	}
	if x, err := r.send(ctx, r.control(req, envelope.IntentProgress, 1)); err != nil || x.status != http.StatusAccepted {
		r.fail(name, clauseWindow, want, fmt.Sprintf("the ACK of delta 1 was not accepted: %v %v", x, err))
		return
	}
	d, ok, err := s.next(wait)
	if err != nil || !ok {
		r.fail(name, clauseWindow, want, fmt.Sprintf("after the ACK of 1 no delta came within %v (%v)", wait, err))
		return
	}
	r.pass(name, clauseWindow, want)
	r.readToEnd(ctx, req, s, d)
}

func describe(d *envelope.Delta) string {
	if d == nil {
		return "none"
	}
	return fmt.Sprintf("delta %d %s", d.Seq, d.Type)
}

// readToEnd reads s to its final delta, ACKing every delta (d is one
// already read), and ACKs the final one, which releases the stream.
func (r *runner) readToEnd(ctx context.Context, req *envelope.Envelope, s *stream, d *envelope.Delta) (final *envelope.Delta, err error) {
	for {
		if d != nil {
			r.send(ctx, r.control(req, envelope.IntentProgress, d.Seq))
			if d.Type.Final() {
				return d, nil
			}
		}
		var ok bool
		d, ok, err = s.next(wait)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("no delta within %v", wait)
		}
	}
}

// checkResume drops the connection after three deltas and resumes with
// Last-Event-ID: 2.
func (r *runner) checkResume(ctx context.Context) {
	const name = "stream/resume"
	want := "after a dropped connection, GET with Last-Event-ID: 2 continues at delta 3, and the stream completes with nothing lost or repeated"
	req := r.ask(longContent, 8)
	loc, err := r.open(ctx, req)
	if err != nil {
		r.fail(name, clauseResume, want, err.Error())
		return
	}
	seq := r.sequence(req)
	s, x, err := r.follow(ctx, loc, "", -1, seq)
	if err == nil && x != nil {
		err = errors.New(x.String())
	}
	if err != nil {
		r.fail(name, clauseResume, want, "GET stream: "+err.Error())
		return
	}
	for i := range 3 {
		d, ok, err := s.next(wait)
		if err != nil || !ok || d.Type.Final() {
			s.close()
			r.fail(name, clauseResume, want, fmt.Sprintf("delta %d: %s, %v", i, describe(d), err))
			return
		}
	}
	s.close() // the connection drops
	seq.resumeAt(3)
	s, x, err = r.follow(ctx, loc, "", 2, seq)
	if err == nil && x != nil {
		err = errors.New(x.String())
	}
	if err != nil {
		r.fail(name, clauseResume, want, "resuming: "+err.Error())
		return
	}
	defer s.close()
	final, err := r.readToEnd(ctx, req, s, nil)
	switch {
	case err != nil:
		r.fail(name, clauseResume, want, err.Error())
	case final.Type != envelope.DeltaDone:
		r.fail(name, clauseResume, want, "the resumed stream ended with "+string(final.Type))
	default:
		r.pass(name, clauseResume, want)
	}
}

// checkResumeGap moves a window-2 stream past delta 1 and asks to resume
// after delta 0: the server must refuse (4.09) rather than skip.
func (r *runner) checkResumeGap(ctx context.Context) {
	const name = "stream/resume-gap-4.09"
	want := "a resume from a delta the server no longer holds (Last-Event-ID: 0 after 6 deltas with window 2) is refused: HTTP 409, 4.09"
	req := r.ask(longContent, 2)
	loc, err := r.open(ctx, req)
	if err != nil {
		r.fail(name, clauseResumeGap, want, err.Error())
		return
	}
	defer r.send(ctx, r.control(req, envelope.IntentCancel, 0))
	s, x, err := r.follow(ctx, loc, "", -1, r.sequence(req))
	if err == nil && x != nil {
		err = errors.New(x.String())
	}
	if err != nil {
		r.fail(name, clauseResumeGap, want, "GET stream: "+err.Error())
		return
	}
	for i := range 6 {
		d, ok, err := s.next(wait)
		if err != nil || !ok || d.Type.Final() {
			s.close()
			r.fail(name, clauseResumeGap, want, fmt.Sprintf("delta %d: %s, %v", i, describe(d), err))
			return
		}
		if d.Seq%2 == 1 {
			r.send(ctx, r.control(req, envelope.IntentProgress, d.Seq))
		}
	}
	s.close()
	_, x, err = r.follow(ctx, loc, "", 0, &sequence{r: &runner{}, streamID: streamIDOf(req)})
	if err == nil && x == nil {
		err = errors.New("the server resumed from delta 1, which a window of 2 cannot still hold")
	}
	r.check(name, clauseResumeGap, want, r.refusal(ctx, x, err, http.StatusConflict, envelope.CodeMissingDeltaSeq))
}

// checkCancel cancels a stream whose producer waits on its window: the
// stream ends with a cancel delta, and a second cancel is refused.
func (r *runner) checkCancel(ctx context.Context) {
	const name = "stream/cancel"
	want := "a cancel mid-stream is accepted (202) and the stream ends with a cancel delta; a second cancel is refused: HTTP 409, 4.09"
	req := r.ask(longContent, 2)
	loc, err := r.open(ctx, req)
	if err != nil {
		r.fail(name, clauseCancel, want, err.Error())
		return
	}
	s, x, err := r.follow(ctx, loc, "", -1, r.sequence(req))
	if err == nil && x != nil {
		err = errors.New(x.String())
	}
	if err != nil {
		r.fail(name, clauseCancel, want, "GET stream: "+err.Error())
		return
	}
	defer s.close()
	for i := range 2 {
		d, ok, err := s.next(wait)
		if err != nil || !ok || d.Type.Final() {
			r.fail(name, clauseCancel, want, fmt.Sprintf("delta %d: %s, %v", i, describe(d), err))
			return
		}
	}
	if x, err := r.send(ctx, r.control(req, envelope.IntentCancel, 0)); err != nil || x.status != http.StatusAccepted {
		r.fail(name, clauseCancel, want, fmt.Sprintf("the cancel was not accepted: %v %v", x, err))
		return
	}
	// The cancel delta travels within the window like any other: make
	// room for it.
	r.send(ctx, r.control(req, envelope.IntentProgress, 1))
	final, err := r.readToEnd(ctx, req, s, nil)
	if err == nil && final.Type != envelope.DeltaCancel {
		err = fmt.Errorf("the stream ended with %s", describe(final))
	}
	if err != nil {
		r.fail(name, clauseCancel, want, err.Error())
		return
	}
	x, err = r.send(ctx, r.control(req, envelope.IntentCancel, 0))
	r.check(name, clauseCancel, want, r.refusal(ctx, x, err, http.StatusConflict, envelope.CodeMissingDeltaSeq))
}
