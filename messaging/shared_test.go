package messaging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/google/go-cmp/cmp"
)

// replicas starts n Servers answering with h that keep their streams in
// one shared store, as replicas of one service behind a load balancer.
// A producer's lease runs lease (renewed four times as often).
func replicas(t *testing.T, h Handler, n int, store streamlog.Store, lease time.Duration) []*testEnv {
	t.Helper()
	var envs []*testEnv
	for range n {
		env := newTestEnv(t, h, &Options{Streams: store})
		sh := env.srv.shared
		sh.terms.Lease, sh.heartbeat, sh.poll = lease, lease/4, 20*time.Millisecond
		envs = append(envs, env)
	}
	return envs
}

// sseClient is a raw SSE consumer of a test env: it POSTs signed
// envelopes and reads GET /v1/stream/{id}.
type sseClient struct {
	t  *testing.T
	hc *http.Client
}

func newSSEClient(t *testing.T, env *testEnv) *sseClient {
	return &sseClient{t: t, hc: env.rawClient(&env.clientCert.TLS)}
}

// post POSTs e, signed by the client, to env; it returns the status and
// the refusal (nil for 202).
func (c *sseClient) post(env *testEnv, e *envelope.Envelope) (int, *envelope.Error) {
	c.t.Helper()
	status, _, werr := env.post(c.t, c.hc, mediaType, signed(c.t, e, env.clientKey))
	return status, werr
}

// ack POSTs the ACK of request reqID up to seq to env.
func (c *sseClient) ack(env *testEnv, reqID string, seq int64) {
	c.t.Helper()
	e := envelope.New(clientDID, []string{serverDID}, envelope.IntentProgress, envelope.Body{Type: "text/plain"})
	e.ReplyTo, e.Ext = reqID, map[string]any{"ack_seq": float64(seq)}
	if status, werr := c.post(env, e); status != http.StatusAccepted {
		c.t.Fatalf("ACK %d: %d %+v", seq, status, werr)
	}
}

// streamed is what a GET of a stream delivered.
type streamed struct {
	status int
	err    *envelope.Error // the refusal, when not 200
	deltas []*envelope.Delta
	raw    []string
	ids    []string
}

// get reads GET /v1/stream/{id} from env after lastID ("" for none),
// until the final delta, n deltas (n > 0) or the end of the response.
func (c *sseClient) get(env *testEnv, id, lastID string, n int) streamed {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.hs.URL+pathStream+url.PathEscape(id), nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	got := streamed{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		got.err = env.errorBody(c.t, b)
		return got
	}
	dec := sse.NewDecoder(resp.Body)
	for n <= 0 || len(got.deltas) < n {
		ev, err := dec.Next()
		if err != nil {
			if ctx.Err() != nil {
				c.t.Fatalf("stream %s: nothing more within %v after %d deltas", id, patience, len(got.deltas))
			}
			return got // the server ended the response
		}
		d, err := envelope.DecodeDelta(ev.Data)
		if err != nil {
			c.t.Fatalf("delta %q: %v", ev.Data, err)
		}
		got.deltas = append(got.deltas, d)
		got.raw = append(got.raw, string(ev.Data))
		got.ids = append(got.ids, ev.ID)
		if d.Type.Final() {
			break
		}
	}
	return got
}

func seqs(ds []*envelope.Delta) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.Seq)
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s < to; s++ {
		out = append(out, s)
	}
	return out
}

// askFor returns a signed-to-be ask with stream_id id and window window.
func askFor(id string, window int) *envelope.Envelope {
	e := ask("")
	e.StreamID, e.DeltaWindow = id, window
	return e
}

// TestUAMP_5_ResumeOnAnotherServer: a consumer reads the first window of
// a stream from the Server producing it, drops, resumes with
// Last-Event-ID on another Server and gets exactly the remaining deltas
// in order, ACKing through that Server (which frees the producer on the
// first); the same bytes wherever read. The final ACK releases the
// stream on every Server.
func TestUAMP_5_ResumeOnAnotherServer(t *testing.T) {
	const n = 12 // chunks, then done: delta_seq 0 to 12
	h := newCounter(n)
	envs := replicas(t, h, 2, streamlog.NewMemory(), sharedLease)
	a, b := envs[0], envs[1]
	c := newSSEClient(t, a)
	req := askFor("s-resume", 4)
	if status, werr := c.post(a, req); status != http.StatusAccepted {
		t.Fatalf("ask: %d %+v", status, werr)
	}
	first := c.get(a, "s-resume", "", 4) // the window: the producer waits for an ACK
	if diff := cmp.Diff(seqRange(0, 4), seqs(first.deltas)); diff != "" {
		t.Fatalf("from a: %d %+v (-want +got)\n%s", first.status, first.err, diff)
	}
	// Resumed on b after delta 1: 2 and 3 as a sent them, then the rest as
	// the ACKs sent through b let a produce them.
	var rest streamed
	last := "1"
	for _, n := range []int{2, 4, 4, 1} { // up to the end of each window
		got := c.get(b, "s-resume", last, n)
		if got.status != http.StatusOK || len(got.deltas) != n {
			t.Fatalf("resume on b after %s: %d %+v, %d deltas", last, got.status, got.err, len(got.deltas))
		}
		rest.deltas, rest.raw = append(rest.deltas, got.deltas...), append(rest.raw, got.raw...)
		last = got.ids[n-1]
		c.ack(b, req.ID, got.deltas[n-1].Seq)
	}
	if diff := cmp.Diff(seqRange(2, n+1), seqs(rest.deltas)); diff != "" {
		t.Fatalf("resumed on b (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(first.raw[2:4], rest.raw[:2]); diff != "" {
		t.Errorf("deltas 2 and 3 differ between a and b (-a +b)\n%s", diff)
	}
	for i, d := range rest.deltas[:n-2] {
		var p struct{ I int }
		if json.Unmarshal(d.Payload, &p); d.Type != envelope.DeltaChunk || p.I != i+2 {
			t.Fatalf("delta %d: %s %s", d.Seq, d.Type, d.Payload)
		}
	}
	if rest.deltas[n-2].Type != envelope.DeltaDone {
		t.Fatalf("final delta %s", rest.deltas[n-2].Type)
	}
	if err := h.waitEnded(t); err != nil {
		t.Fatal(err)
	}
	// The final ACK (through b) released the stream: neither holds it.
	if got := c.get(b, "s-resume", "", 0); got.status != http.StatusNotFound || got.err.Code != envelope.CodeMissingDeltaSeq {
		t.Errorf("b after the final ACK: %d %+v", got.status, got.err)
	}
}

// roundRobin is a load balancer in front of Servers: each request goes
// to the next.
type roundRobin struct {
	next  atomic.Int64
	hosts []string
	rt    http.RoundTripper
}

func (l *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = l.hosts[(l.next.Add(1)-1)%int64(len(l.hosts))]
	return l.rt.RoundTrip(r)
}

// TestUAMP_5_ClientBehindLoadBalancer: a Client whose requests alternate
// between two Servers — the ask on one, its GET and every other ACK on
// the other, every resume after a cut on either — reads every delta of
// a stream once, in order.
func TestUAMP_5_ClientBehindLoadBalancer(t *testing.T) {
	const n = 300
	h := newCounter(n)
	envs := replicas(t, h, 2, streamlog.NewMemory(), sharedLease)
	lb := &roundRobin{rt: envs[0].rawClient(&envs[0].clientCert.TLS).Transport}
	for _, env := range envs {
		u, _ := url.Parse(env.hs.URL)
		lb.hosts = append(lb.hosts, u.Host)
	}
	client := envs[0].client(t, false, &ClientOptions{Transport: lb})
	req := ask("")
	req.DeltaWindow = 16
	reply, err := client.Ask(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	idx, last := collect(t, reply, func(d *envelope.Delta) {
		if d.Seq == 100 || d.Seq == 211 {
			for _, env := range envs {
				env.conns.dropAll()
			}
		}
	})
	checkSequence(t, idx, n)
	if last.Type != envelope.DeltaDone || last.Seq != n {
		t.Fatalf("final %+v", last)
	}
	if err := h.waitEnded(t); err != nil {
		t.Fatal(err)
	}
}

// cuttable is a shared store one Server can be cut off from: then every
// call of that Server fails, as for a replica whose process died or
// whose database connection is gone.
type cuttable struct {
	streamlog.Store
	cut atomic.Bool
}

var errCut = errors.New("the store is out of reach")

func (c *cuttable) err() error {
	if c.cut.Load() {
		return errCut
	}
	return nil
}

func (c *cuttable) Create(ctx context.Context, h streamlog.Head, t streamlog.Terms) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.Create(ctx, h, t)
}

func (c *cuttable) Append(ctx context.Context, k streamlog.Key, first int64, d [][]byte, final bool, keep int, t streamlog.Terms) (streamlog.Head, error) {
	if err := c.err(); err != nil {
		return streamlog.Head{}, err
	}
	return c.Store.Append(ctx, k, first, d, final, keep, t)
}

func (c *cuttable) Renew(ctx context.Context, k streamlog.Key, t streamlog.Terms) (streamlog.Head, error) {
	if err := c.err(); err != nil {
		return streamlog.Head{}, err
	}
	return c.Store.Renew(ctx, k, t)
}

func (c *cuttable) Head(ctx context.Context, k streamlog.Key) (streamlog.Head, error) {
	if err := c.err(); err != nil {
		return streamlog.Head{}, err
	}
	return c.Store.Head(ctx, k)
}

func (c *cuttable) Request(ctx context.Context, owner, id string) (streamlog.Head, error) {
	if err := c.err(); err != nil {
		return streamlog.Head{}, err
	}
	return c.Store.Request(ctx, owner, id)
}

func (c *cuttable) Read(ctx context.Context, k streamlog.Key, from int64, limit int) ([][]byte, streamlog.Head, error) {
	if err := c.err(); err != nil {
		return nil, streamlog.Head{}, err
	}
	return c.Store.Read(ctx, k, from, limit)
}

func (c *cuttable) Ack(ctx context.Context, k streamlog.Key, seq int64) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.Ack(ctx, k, seq)
}

func (c *cuttable) Cancel(ctx context.Context, k streamlog.Key) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.Cancel(ctx, k)
}

func (c *cuttable) EndDead(ctx context.Context, k streamlog.Key, seq int64, d []byte, linger time.Duration) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.EndDead(ctx, k, seq, d, linger)
}

func (c *cuttable) Delete(ctx context.Context, k streamlog.Key) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.Delete(ctx, k)
}

func (c *cuttable) Sweep(ctx context.Context) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.Sweep(ctx)
}

// TestUAMP_5_ProducerDied: the Server producing a stream is cut off from
// the store mid-stream (its lease is no longer renewed). A consumer that
// resumes on another Server gets the stored deltas, then the error delta
// 5.02 (not retryable) that says the producer died — the same delta on
// a second resume; a cancel through that Server is refused with 5.02 too
// until then, and 4.09 after.
func TestUAMP_5_ProducerDied(t *testing.T) {
	mem := streamlog.NewMemory()
	cutA := &cuttable{Store: mem}
	h := newCounter(-1)
	a := replicas(t, h, 1, cutA, 300*time.Millisecond)[0]
	b := replicas(t, Echo, 1, mem, 300*time.Millisecond)[0]
	c := newSSEClient(t, a)
	req := askFor("s-died", 4)
	if status, werr := c.post(a, req); status != http.StatusAccepted {
		t.Fatalf("ask: %d %+v", status, werr)
	}
	// b reads the window from the store: a stored it.
	stored := c.get(b, "s-died", "", 4)
	if diff := cmp.Diff(seqRange(0, 4), seqs(stored.deltas)); diff != "" {
		t.Fatalf("from b (-want +got)\n%s", diff)
	}
	cutA.cut.Store(true) // a dies, as far as the store can tell
	got := c.get(b, "s-died", "1", 0)
	if diff := cmp.Diff(seqRange(2, 5), seqs(got.deltas)); diff != "" {
		t.Fatalf("resumed on b after a died (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(stored.raw[2:], got.raw[:2]); diff != "" {
		t.Errorf("stored deltas differ (-first +second)\n%s", diff)
	}
	end := got.deltas[2]
	var werr envelope.Error
	if err := json.Unmarshal(end.Payload, &werr); err != nil || end.Type != envelope.DeltaError || werr.Code != "5.02" || werr.Retry ||
		!strings.Contains(werr.Message, "lost its producer") || !strings.Contains(werr.Message, "after 4 deltas") {
		t.Fatalf("the end of a stream whose producer died: %s %s", end.Type, end.Payload)
	}
	// Every consumer reads that same end.
	again := c.get(b, "s-died", "3", 0)
	if len(again.raw) != 1 || again.raw[0] != got.raw[2] {
		t.Errorf("second resume: %q, want %q", again.raw, got.raw[2])
	}
	cancel := envelope.New(clientDID, []string{serverDID}, envelope.IntentCancel, envelope.Body{Type: "text/plain"})
	cancel.ReplyTo = req.ID
	if status, werr := c.post(b, cancel); status != http.StatusConflict || werr.Code != envelope.CodeMissingDeltaSeq {
		t.Errorf("cancel of the ended stream: %d %+v", status, werr)
	}
	// a, cut off, serves its own consumer from memory only; its handler
	// goes on until that consumer leaves.
	c.ack(a, req.ID, 3)
	if got := c.get(a, "s-died", "3", 2); len(got.deltas) != 2 || got.deltas[0].Seq != 4 || got.deltas[0].Type != envelope.DeltaChunk {
		t.Errorf("a after the cut: %+v", got.deltas)
	}
}

// lapsing is a shared store in which one Server's lease lapses although
// the Server runs: its renewals reach nothing (a producer stalled, or cut
// off from the database and back).
type lapsing struct{ streamlog.Store }

func (l lapsing) Renew(ctx context.Context, k streamlog.Key, _ streamlog.Terms) (streamlog.Head, error) {
	return l.Store.Head(ctx, k)
}

// TestUAMP_5_ProducerFenced: a producer whose lease lapsed while it ran
// is ended by the Server a consumer resumes on (5.02); the producer
// learns it at its next look at the store and its handler is cancelled,
// rather than produce deltas nobody can read.
func TestUAMP_5_ProducerFenced(t *testing.T) {
	mem := streamlog.NewMemory()
	h := newCounter(-1)
	a := replicas(t, h, 1, lapsing{mem}, 300*time.Millisecond)[0]
	b := replicas(t, Echo, 1, mem, 300*time.Millisecond)[0]
	c := newSSEClient(t, a)
	if status, werr := c.post(a, askFor("s-fenced", 2)); status != http.StatusAccepted {
		t.Fatalf("ask: %d %+v", status, werr)
	}
	got := c.get(b, "s-fenced", "", 0)
	if diff := cmp.Diff(seqRange(0, 3), seqs(got.deltas)); diff != "" || got.deltas[2].Type != envelope.DeltaError {
		t.Fatalf("from b (-want +got)\n%s\n%q", diff, got.raw)
	}
	if err := h.waitEnded(t); !errors.Is(err, errTakenOver) {
		t.Fatalf("the fenced producer ended with %v", err)
	}
}

// TestUAMP_5_ProducerDiedBeforeResume: a resume on another Server after
// the producer died, where nothing stored is left to deliver, gets the
// 5.02 end at once; one past what was stored is refused with 5.02 (HTTP
// 502); a cancel through it with 5.02 too.
func TestUAMP_5_ProducerDiedBeforeResume(t *testing.T) {
	mem := streamlog.NewMemory()
	cutA := &cuttable{Store: mem}
	a := replicas(t, newCounter(-1), 1, cutA, 300*time.Millisecond)[0]
	b := replicas(t, Echo, 1, mem, 300*time.Millisecond)[0]
	c := newSSEClient(t, a)
	req := askFor("s-gone", 2)
	if status, werr := c.post(a, req); status != http.StatusAccepted {
		t.Fatalf("ask: %d %+v", status, werr)
	}
	if got := c.get(b, "s-gone", "", 2); len(got.deltas) != 2 {
		t.Fatalf("from b: %+v", got.deltas)
	}
	cutA.cut.Store(true)
	waitFor(t, func() bool {
		h, err := mem.Head(context.Background(), streamlog.Key{Owner: clientDID, ID: "s-gone"})
		return err == nil && !h.Alive
	})
	cancel := envelope.New(clientDID, []string{serverDID}, envelope.IntentCancel, envelope.Body{Type: "text/plain"})
	cancel.ReplyTo = req.ID
	if status, werr := c.post(b, cancel); status != http.StatusBadGateway || werr.Code != "5.02" || werr.Retry {
		t.Errorf("cancel of a stream whose producer died: %d %+v", status, werr)
	}
	if got := c.get(b, "s-gone", "2", 0); got.status != http.StatusBadGateway || got.err.Code != "5.02" {
		t.Errorf("resume past what was stored: %d %+v", got.status, got.err)
	}
	got := c.get(b, "s-gone", "1", 0)
	if len(got.deltas) != 1 || got.deltas[0].Seq != 2 || got.deltas[0].Type != envelope.DeltaError {
		t.Fatalf("resume at the end of what was stored: %+v", got.deltas)
	}
}

// TestUAMP_5_CancelThroughAnotherServer: a cancel POSTed to a Server
// that does not hold the request reaches its producer through the
// store: the handler's context ends and the stream ends with a cancel
// delta, read on either Server; a second cancel is refused (4.09).
func TestUAMP_5_CancelThroughAnotherServer(t *testing.T) {
	h := newCounter(-1)
	envs := replicas(t, h, 2, streamlog.NewMemory(), sharedLease)
	a, b := envs[0], envs[1]
	c := newSSEClient(t, a)
	req := askFor("s-cancel", 2)
	if status, werr := c.post(a, req); status != http.StatusAccepted {
		t.Fatalf("ask: %d %+v", status, werr)
	}
	if got := c.get(b, "s-cancel", "", 2); len(got.deltas) != 2 {
		t.Fatalf("from b: %+v", got.deltas)
	}
	cancel := envelope.New(clientDID, []string{serverDID}, envelope.IntentCancel, envelope.Body{Type: "text/plain"})
	cancel.ReplyTo = req.ID
	if status, werr := c.post(b, cancel); status != http.StatusAccepted {
		t.Fatalf("cancel through b: %d %+v", status, werr)
	}
	if err := h.waitEnded(t); !errors.Is(err, errCancelled) {
		t.Fatalf("the producer on a ended with %v", err)
	}
	c.ack(b, req.ID, 1) // room for the cancel delta
	got := c.get(b, "s-cancel", "1", 0)
	if len(got.deltas) != 1 || got.deltas[0].Type != envelope.DeltaCancel || got.deltas[0].Seq != 2 {
		t.Fatalf("after the cancel, b reads %+v", got.deltas)
	}
	cancel = envelope.New(clientDID, []string{serverDID}, envelope.IntentCancel, envelope.Body{Type: "text/plain"})
	cancel.ReplyTo = req.ID
	if status, werr := c.post(b, cancel); status != http.StatusConflict || werr.Code != envelope.CodeMissingDeltaSeq || werr.Retry {
		t.Errorf("second cancel: %d %+v", status, werr)
	}
}

// TestUAMP_5_SharedStreamIDs: a requester's stream_id names one stream
// across the Servers: a second ask with it through another Server is
// refused (4.09), and a resume outside the kept deltas too.
func TestUAMP_5_SharedStreamIDs(t *testing.T) {
	envs := replicas(t, newCounter(-1), 2, streamlog.NewMemory(), sharedLease)
	a, b := envs[0], envs[1]
	c := newSSEClient(t, a)
	if status, werr := c.post(a, askFor("s-1", 2)); status != http.StatusAccepted {
		t.Fatalf("ask: %d %+v", status, werr)
	}
	if status, werr := c.post(b, askFor("s-1", 2)); status != http.StatusConflict || werr.Code != envelope.CodeMissingDeltaSeq || werr.Retry {
		t.Errorf("the same stream_id through b: %d %+v", status, werr)
	}
	if got := c.get(b, "s-1", "", 2); len(got.deltas) != 2 {
		t.Fatalf("from b: %+v", got.deltas)
	}
	for _, last := range []string{"400", "x"} {
		if got := c.get(b, "s-1", last, 0); got.status == http.StatusOK {
			t.Errorf("Last-Event-ID %s on b: %d %+v", last, got.status, got.deltas)
		}
	}
	if got := c.get(b, "s-other", "", 0); got.status != http.StatusNotFound {
		t.Errorf("an unknown stream on b: %d", got.status)
	}
	// Another requester cannot read it.
	other := b.rawClient(&otherCert.TLS)
	resp, err := other.Get(b.hs.URL + pathStream + "s-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("another requester's GET on b: %d", resp.StatusCode)
	}
}

// TestUAMP_5_SharedStoreDown: when the store cannot record a new
// stream, the ask is refused with 5.04 (retry later), not served
// unresumable.
func TestUAMP_5_SharedStoreDown(t *testing.T) {
	store := &cuttable{Store: streamlog.NewMemory()}
	env := replicas(t, Echo, 1, store, sharedLease)[0]
	store.cut.Store(true)
	c := newSSEClient(t, env)
	if status, werr := c.post(env, ask("x")); status != http.StatusServiceUnavailable || werr.Code != envelope.CodeBusy {
		t.Errorf("ask with the store down: %d %+v", status, werr)
	}
	if env.srv.streams() != 0 {
		t.Errorf("%d streams held after a refused ask", env.srv.streams())
	}
}

// TestUAMP_5_SharedWindow: with a shared store the producer still never
// has more than delta_window deltas un-ACKed (§5), and its consumer on
// the same Server still reads every delta in order.
func TestUAMP_5_SharedWindow(t *testing.T) {
	h := newCounter(500)
	env := replicas(t, h, 1, streamlog.NewMemory(), sharedLease)[0]
	req := ask("")
	req.DeltaWindow = 8
	reply, err := env.client(t, false, nil).Ask(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	idx, last := collect(t, reply, nil)
	checkSequence(t, idx, 500)
	if last.Type != envelope.DeltaDone {
		t.Fatalf("final %s", last.Type)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.window != 8 || h.maxAhead > 8 || h.maxAhead < 1 {
		t.Fatalf("window %d, most un-ACKed %d", h.window, h.maxAhead)
	}
}

// FuzzStoredDelta: whatever storedDelta accepts goes out as exactly one
// SSE event whose id is the delta_seq and whose data is the delta.
func FuzzStoredDelta(f *testing.F) {
	f.Add([]byte(`{"delta_seq":3,"stream_id":"s-1","ts":"2026-01-01T00:00:00.000Z","type":"chunk","payload":{"i":3}}`), int64(3))
	f.Add([]byte(`{"delta_seq":3,"stream_id":"s-1","ts":"2026-01-01T00:00:00.000Z","type":"chunk",`+"\n"+`"payload":{}}`), int64(3))
	f.Add([]byte(`{"delta_seq":3,"stream_id":"s-1","ts":"2026-01-01T00:00:00Z","type":"done"}`+"\n\ndata: x"), int64(3))
	f.Add([]byte(`{"delta_seq":4,"stream_id":"s-1","ts":"2026-01-01T00:00:00.000Z","type":"chunk"}`), int64(3))
	f.Add([]byte(`{"delta_seq":3,"stream_id":"s-2","ts":"2026-01-01T00:00:00.000Z","type":"chunk"}`), int64(3))
	f.Add([]byte(`{"delta_seq":3 ,"stream_id":"s-1","ts":"2026-01-01T00:00:00.000Z","type":"chunk","payload":{"a":"\u2028"}}`), int64(3))
	f.Fuzz(func(t *testing.T, b []byte, seq int64) {
		d, err := storedDelta(b, "s-1", seq)
		if err != nil {
			return
		}
		if d.Seq != seq || d.StreamID != "s-1" {
			t.Fatalf("accepted %+v for delta_seq %d of s-1", d, seq)
		}
		dec := sse.NewDecoder(bytes.NewReader(sseFrame(nil, seq, b)))
		ev, err := dec.Next()
		if err != nil || ev.ID != fmt.Sprint(seq) || !bytes.Equal(ev.Data, b) {
			t.Fatalf("event %+v, %v: want id %d, data %q", ev, err, seq, b)
		}
		if ev, err := dec.Next(); err != io.EOF {
			t.Fatalf("a second event %+v, %v", ev, err)
		}
	})
}
