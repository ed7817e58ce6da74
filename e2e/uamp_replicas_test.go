package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// uampPeer is a UAMP requester talking raw HTTP/2 + SSE to the replicas
// of one service, as a client behind a load balancer would reach any of
// them.
type uampPeer struct {
	t    *testing.T
	hc   *http.Client
	key  *envelope.PrivateKey
	from string
	to   string // the service's DID
}

// post POSTs e, signed, to base; it returns the status and, for a
// refusal, the error its envelope carries.
func (p *uampPeer) post(base string, e *envelope.Envelope) (int, *envelope.Error) {
	p.t.Helper()
	if err := envelope.Sign(e, p.key); err != nil {
		p.t.Fatal(err)
	}
	b, _ := json.Marshal(e)
	resp, err := p.hc.Post(base+"/v1/messages", "application/uamp+json;v=1", bytes.NewReader(b))
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, p.refusal(body)
}

func (p *uampPeer) refusal(body []byte) *envelope.Error {
	p.t.Helper()
	e, err := envelope.Decode(body)
	if err != nil {
		p.t.Fatalf("not an error envelope: %q: %v", body, err)
	}
	werr, err := envelope.ParseErrorBody(e.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return werr
}

// ack POSTs to base the ACK of request reqID up to seq.
func (p *uampPeer) ack(base, reqID string, seq int64) {
	p.t.Helper()
	e := envelope.New(p.from, []string{p.to}, envelope.IntentProgress, envelope.Body{Type: "text/plain"})
	e.ReplyTo, e.Ext = reqID, map[string]any{"ack_seq": float64(seq)}
	if status, werr := p.post(base, e); status != http.StatusAccepted {
		p.t.Fatalf("ACK %d to %s: %d %+v", seq, base, status, werr)
	}
}

// delta is one SSE event of a stream.
type delta struct {
	id  string
	raw string
	d   *envelope.Delta
}

// follow reads GET base/v1/stream/{id} after lastID ("" for none), calling
// each on every delta until it returns false, the final delta or the end
// of the response. A refusal is returned with its status.
func (p *uampPeer) follow(base, id, lastID string, each func(delta) bool) (int, *envelope.Error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/stream/"+url.PathEscape(id), nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, p.refusal(body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev delta
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.raw = line[6:]
		case line == "" && ev.raw != "":
			d, err := envelope.DecodeDelta([]byte(ev.raw))
			if err != nil {
				p.t.Fatalf("delta %q: %v", ev.raw, err)
			}
			ev.d = d
			if !each(ev) || d.Type.Final() {
				return resp.StatusCode, nil
			}
			ev = delta{}
		}
	}
	if ctx.Err() != nil {
		p.t.Fatalf("stream %s on %s: nothing more within 90 s", id, base)
	}
	return resp.StatusCode, nil
}

// take reads n deltas of a stream (after lastID), then drops the
// connection.
func (p *uampPeer) take(base, id, lastID string, n int) []delta {
	p.t.Helper()
	var got []delta
	if status, werr := p.follow(base, id, lastID, func(d delta) bool {
		got = append(got, d)
		return len(got) < n
	}); status != http.StatusOK {
		p.t.Fatalf("GET stream %s on %s: %d %+v", id, base, status, werr)
	}
	if len(got) != n {
		p.t.Fatalf("GET stream %s on %s: %d deltas, want %d", id, base, len(got), n)
	}
	return got
}

func seqsOf(ds []delta) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.d.Seq)
	}
	return out
}

// uampService is what the replicas serving one UAMP DID share — one
// identity key (--uamp-key), one trusted client key — and a requester
// that reaches any of them, as behind a load balancer.
type uampService struct {
	serverKey, trust string
	did              string
	roots            *x509.CertPool
	peer             *uampPeer
}

func newUAMPService(t *testing.T) *uampService {
	t.Helper()
	dir := t.TempDir()
	u := &uampService{serverKey: filepath.Join(dir, "server.jwk"), trust: filepath.Join(dir, "client.pub.jwk"),
		did: "did:web:uamp.replicas.example", roots: x509.NewCertPool()}
	clientKey := filepath.Join(dir, "client.jwk")
	if code, _, errs := runCLI(t, "uamp", "keygen", "--out", u.serverKey); code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errs)
	}
	code, pub, errs := runCLI(t, "uamp", "keygen", "--out", clientKey)
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errs)
	}
	if err := os.WriteFile(u.trust, []byte(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(clientKey)
	key, err := envelope.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	const from = "did:web:e2e.example"
	cert, err := messaging.KeyCertificate(key, from, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetHTTP2(true)
	u.peer = &uampPeer{t: t, key: key, from: from, to: u.did, hc: &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: u.roots, Certificates: []tls.Certificate{cert}},
		Protocols:       &protos,
	}}}
	return u
}

// flags are the serve flags of a replica of the service.
func (u *uampService) flags() []string {
	return []string{"--uamp-key", u.serverKey, "--uamp-did", u.did, "--uamp-trust", u.trust}
}

// join checks that srv (started with flags and --data data) serves the
// service's DID, trusts its development certificate, and returns its
// UAMP URL.
func (u *uampService) join(t *testing.T, srv *server, data string) string {
	t.Helper()
	uampURL, gotDID := srv.uampURL(t)
	if gotDID != u.did {
		t.Fatalf("a replica serves as %s, want %s", gotDID, u.did)
	}
	pem, err := os.ReadFile(filepath.Join(data, "tls", "cert.pem"))
	if err != nil || !u.roots.AppendCertsFromPEM(pem) {
		t.Fatalf("a replica's certificate: %v", err)
	}
	return uampURL
}

// TestUAMP_5_StreamResumesOnAnyReplica: two `agentry serve` replicas on
// one PostgreSQL, serving one DID with one identity key (--uamp-did,
// --uamp-key). A stream opened on replica a (an ask to the echo agent,
// window 4, so that the producer waits for ACKs) is read for a window
// there, then resumed with Last-Event-ID on replica b, which delivers
// exactly the remaining deltas in order while the ACKs sent through b
// let a produce them. Then a second stream: replica a is killed
// (SIGKILL) mid-stream, and a resume on b gets the stored deltas and then
// the error delta 5.02 saying the producer died.
func TestUAMP_5_StreamResumesOnAnyReplica(t *testing.T) {
	base := os.Getenv("AGENTRY_TEST_POSTGRES")
	if base == "" {
		t.Skip("AGENTRY_TEST_POSTGRES is not set; set it to a PostgreSQL URL to run this test")
	}
	pg, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	store := freshSchema(t, base, pg.Host)
	svc := newUAMPService(t)
	start := func(node string) (*server, string) {
		data := t.TempDir()
		srv := startServer(t, append([]string{"--store", store, "--data", data, "--node", node}, svc.flags()...)...)
		return srv, svc.join(t, srv, data)
	}
	a, urlA := start("a")
	_, urlB := start("b")
	svc.check(t, a, urlA, urlB)
}

// check runs the service's checks on two live replicas a and b: one DID
// document (one key set); a stream opened on a resumed on b; a stream
// whose producer a is killed (SIGKILL) mid-stream resumed on b, which
// says the producer died. a is dead after.
func (u *uampService) check(t *testing.T, a *server, urlA, urlB string) {
	peer, did, from := u.peer, u.did, u.peer.from

	ask := func(id, content string) *envelope.Envelope {
		e := envelope.New(from, []string{did}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: content})
		e.StreamID, e.DeltaWindow = id, 4
		return e
	}
	// The echo agent answers in chunks of 256 bytes: 12 chunks and done,
	// delta_seq 0 to 12.
	content := strings.Repeat("Grüße über Replikate hinweg. ", 120)[:3072]
	chunks := func(ds []delta) string {
		var s strings.Builder
		for _, d := range ds {
			if d.d.Type == envelope.DeltaChunk {
				var p struct{ Content string }
				json.Unmarshal(d.d.Payload, &p)
				s.WriteString(p.Content)
			}
		}
		return s.String()
	}

	// Both replicas publish one DID document: one key set (--uamp-key).
	t.Run("OneKeySet", func(t *testing.T) { u.checkOneKeySet(t, urlA, urlB) })

	t.Run("ResumeOnTheOtherReplica", func(t *testing.T) {
		peer.t = t
		req := ask("e2e-resume", content)
		if status, werr := peer.post(urlA, req); status != http.StatusAccepted {
			t.Fatalf("ask on a: %d %+v", status, werr)
		}
		first := peer.take(urlA, "e2e-resume", "", 4) // a window: a waits for an ACK
		var rest []delta
		status, werr := peer.follow(urlB, "e2e-resume", first[1].id, func(d delta) bool {
			rest = append(rest, d)
			if (d.d.Seq+1)%2 == 0 && !d.d.Type.Final() {
				peer.ack(urlB, req.ID, d.d.Seq) // every 2 deltas, through b
			}
			return true
		})
		if status != http.StatusOK {
			t.Fatalf("resume on b: %d %+v", status, werr)
		}
		got := seqsOf(rest)
		want := []int64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		if !slices.Equal(got, want) {
			t.Fatalf("resumed on b after delta_seq 1: %v, want %v", got, want)
		}
		for i, d := range rest {
			if d.id != strconv.FormatInt(d.d.Seq, 10) || d.d.StreamID != "e2e-resume" {
				t.Errorf("delta %d: SSE id %q, stream %q", i, d.id, d.d.StreamID)
			}
		}
		if first[2].raw != rest[0].raw || first[3].raw != rest[1].raw {
			t.Errorf("deltas 2 and 3 differ between a and b:\n%s\n%s\n%s\n%s", first[2].raw, rest[0].raw, first[3].raw, rest[1].raw)
		}
		if got := chunks(first[:2]) + chunks(rest); got != content || rest[len(rest)-1].d.Type != envelope.DeltaDone {
			t.Errorf("echoed %d bytes of %d, last delta %s", len(got), len(content), rest[len(rest)-1].d.Type)
		}
		// The final ACK, through b, releases the stream on every replica's
		// view of the store.
		peer.ack(urlB, req.ID, 12)
		if status, werr := peer.follow(urlB, "e2e-resume", "", func(delta) bool { return true }); status != http.StatusNotFound || werr.Code != envelope.CodeMissingDeltaSeq {
			t.Errorf("b after the final ACK: %d %+v", status, werr)
		}
	})

	t.Run("ProducerKilled", func(t *testing.T) {
		peer.t = t
		req := ask("e2e-died", content)
		if status, werr := peer.post(urlA, req); status != http.StatusAccepted {
			t.Fatalf("ask on a: %d %+v", status, werr)
		}
		fromA := peer.take(urlA, "e2e-died", "", 4)
		stored := peer.take(urlB, "e2e-died", "", 4) // b reads them from the store
		for i := range 4 {
			if fromA[i].raw != stored[i].raw {
				t.Errorf("delta %d: a sent %s, b read %s", i, fromA[i].raw, stored[i].raw)
			}
		}
		a.kill(t)
		var got []delta
		if status, werr := peer.follow(urlB, "e2e-died", "1", func(d delta) bool { got = append(got, d); return true }); status != http.StatusOK {
			t.Fatalf("resume on b after a died: %d %+v", status, werr)
		}
		if seqs := seqsOf(got); !slices.Equal(seqs, []int64{2, 3, 4}) {
			t.Fatalf("resumed on b after a died: delta_seq %v, want [2 3 4]", seqs)
		}
		if got[0].raw != fromA[2].raw || got[1].raw != fromA[3].raw {
			t.Errorf("the stored deltas differ from what a sent")
		}
		end := got[2].d
		var werr envelope.Error
		if err := json.Unmarshal(end.Payload, &werr); err != nil || end.Type != envelope.DeltaError || werr.Code != "5.02" || werr.Retry || !strings.Contains(werr.Message, "lost its producer") {
			t.Fatalf("the end of the stream: %s %s", end.Type, end.Payload)
		}
		t.Logf("after SIGKILL: %s", got[2].raw)
		// Every later resume reads the same end.
		var again []delta
		peer.follow(urlB, "e2e-died", "3", func(d delta) bool { again = append(again, d); return true })
		if len(again) != 1 || again[0].raw != got[2].raw {
			t.Errorf("second resume: %v", seqsOf(again))
		}
	})
}

// checkOneKeySet checks that the replicas at urls publish one DID
// document's keys.
func (u *uampService) checkOneKeySet(t *testing.T, urls ...string) {
	t.Helper()
	var docs []string
	for _, raw := range urls {
		origin, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := u.peer.hc.Get("https://" + origin.Host + "/.well-known/did.json")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc struct {
			VerificationMethod []struct {
				PublicKeyJwk json.RawMessage `json:"publicKeyJwk"`
			} `json:"verificationMethod"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &doc) != nil || len(doc.VerificationMethod) == 0 {
			t.Fatalf("did.json of %s: %d %s", origin.Host, resp.StatusCode, b)
		}
		keys, _ := json.Marshal(doc.VerificationMethod)
		docs = append(docs, string(keys))
	}
	for i := 1; i < len(docs); i++ {
		if docs[i] != docs[0] {
			t.Errorf("the replicas publish different keys:\n%s\n%s", docs[0], docs[i])
		}
	}
}
