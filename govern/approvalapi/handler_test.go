package approvalapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/agentry-dev/agentry/internal/approverkey"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// fixture is a real governor (memory journal, alice trusted), one open
// run, and the API over it.
type fixture struct {
	g       *govern.Governor
	journal *failingJournal
	run     *govern.Run
	alice   *approverkey.Key // in the keyring
	mallory *approverkey.Key // not in the keyring
	srv     *httptest.Server
	client  *approvalapi.Client
	logs    *syncBuffer
	calls   atomic.Int32 // tool runs
}

func newFixture(t *testing.T, opts approvalapi.Options) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{journal: &failingJournal{Journal: govern.NewMemoryJournal()}, logs: &syncBuffer{}}
	auditJournal(t, f.journal)
	var err error
	if f.alice, err = approverkey.Generate("alice"); err != nil {
		t.Fatal(err)
	}
	if f.mallory, err = approverkey.Generate("mallory"); err != nil {
		t.Fatal(err)
	}
	kr := govern.NewKeyring()
	if _, err := kr.Add("alice", f.alice.Public()); err != nil {
		t.Fatal(err)
	}
	f.g, err = govern.New(ctx, &govern.Options{Journal: f.journal, Keyring: kr,
		Rollbacks: map[string]govern.RollbackFunc{"refund.cancel": func(context.Context, govern.RollbackAction) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	f.run, err = f.g.Start(ctx, &govern.RunOptions{Identity: govern.Identity{AgentID: "agent:a", OwnerID: "org:x", ControlClass: govern.HumanSupervised}})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, f.run.Envelope())
	opts.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	f.srv = httptest.NewServer(approvalapi.NewHandler(f.g, &opts))
	t.Cleanup(f.srv.Close)
	f.client = &approvalapi.Client{BaseURL: f.srv.URL, BearerToken: opts.BearerToken}
	return f
}

var refund = govern.ToolSpec{Name: "refund", Tier: govern.WriteHighRisk, Rollback: func(_ context.Context, c govern.Call) (*govern.RollbackAction, error) {
	return &govern.RollbackAction{Type: "refund.cancel", Target: c.ID}, nil
}}

// invoke calls the refund tool under the governor and checks on the wire
// what the call returned.
func (f *fixture) invoke(t *testing.T, callID string) (*govern.Invocation, error) {
	t.Helper()
	inv, err := f.run.Invoke(context.Background(), refund, govern.Call{ID: callID, Args: map[string]any{"amount": 5, "order": callID}},
		func(context.Context) (any, error) {
			f.calls.Add(1)
			return map[string]any{"refunded": 5}, nil
		})
	checkInvoke(t, inv, err)
	return inv, err
}

// request drives a real write_high_risk call to an approval request.
func (f *fixture) request(t *testing.T, callID string) govern.ApprovalRequest {
	t.Helper()
	_, err := f.invoke(t, callID)
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) {
		t.Fatalf("Invoke(%s): %v, want ApprovalRequired", callID, err)
	}
	req, err := f.g.Approval(context.Background(), ge.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func (f *fixture) sign(t *testing.T, k *approverkey.Key, req govern.ApprovalRequest) string {
	t.Helper()
	tok, err := approvalapi.Sign(k.Approver, k.Private, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// decisions counts the approval_decided records in the journal.
func (f *fixture) decisions(t *testing.T) int {
	t.Helper()
	n := 0
	for rec, err := range f.journal.Records(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == recordkind.ApprovalDecided {
			n++
		}
	}
	return n
}

func (f *fixture) status(t *testing.T, id string) string {
	t.Helper()
	a, err := f.g.Approval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a.Status
}

// failingJournal fails the appends of approval decisions when fail is set.
type failingJournal struct {
	govern.Journal
	fail atomic.Bool
}

func (j *failingJournal) Append(ctx context.Context, sync bool, recs ...*govern.Record) error {
	for _, r := range recs {
		if j.fail.Load() && r.Kind == recordkind.ApprovalDecided {
			return errors.New("disk on fire at /var/lib/agentry")
		}
	}
	return j.Journal.Append(ctx, sync, recs...)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUAICP_5_3_ListGetApprove(t *testing.T) {
	f := newFixture(t, approvalapi.Options{})
	ctx := context.Background()
	r1, r2 := f.request(t, "c1"), f.request(t, "c2")

	list, err := f.client.List(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	// Oldest first; requests of the same millisecond are ordered by ID.
	if len(list) != 2 || list[0].ID == list[1].ID || (list[0].ID != r1.ID && list[0].ID != r2.ID) || (list[1].ID != r1.ID && list[1].ID != r2.ID) ||
		list[0].Status != govern.StatusPending || list[1].Status != govern.StatusPending {
		t.Fatalf("List = %+v", list)
	}
	got, err := f.client.Get(ctx, r1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Binding() != r1.Binding() || got.Tool != "refund" || got.Tier != govern.WriteHighRisk ||
		got.Requester.AgentID != "agent:a" || got.Rollback == nil || got.Rollback.Type != "refund.cancel" || string(got.Args) != `{"amount":5,"order":"c1"}` {
		t.Errorf("Get = %+v", got)
	}

	dec, err := f.client.Approve(ctx, r1.ID, f.sign(t, f.alice, got))
	if err != nil {
		t.Fatal(err)
	}
	if dec.Status != govern.StatusApproved || dec.Decision == nil || dec.Decision.Approver != "alice" || !dec.Decision.Approved ||
		dec.Decision.TokenID == "" || dec.Decision.Token != "" {
		t.Errorf("Approve = %+v %+v", dec, dec.Decision)
	}
	if f.status(t, r1.ID) != govern.StatusApproved || f.decisions(t) != 1 {
		t.Errorf("the governor did not record the approval")
	}
	if list, _ := f.client.List(ctx, false); len(list) != 1 || list[0].ID != r2.ID {
		t.Errorf("pending after approval = %+v", list)
	}
	all, err := f.client.List(ctx, true)
	if err != nil || len(all) != 2 {
		t.Fatalf("List(all) = %+v, %v", all, err)
	}
	for _, a := range all {
		if a.ID == r1.ID && (a.Status != govern.StatusApproved || a.Decision.Token != "") || a.ID == r2.ID && a.Status != govern.StatusPending {
			t.Errorf("List(all): %s %s %+v", a.ID, a.Status, a.Decision)
		}
	}

	// The approved call now runs, exactly once.
	for range 2 {
		if _, err := f.invoke(t, "c1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
}

func TestUAICP_5_3_Deny(t *testing.T) {
	f := newFixture(t, approvalapi.Options{})
	ctx := context.Background()
	r1 := f.request(t, "c1")
	dec, err := f.client.Deny(ctx, r1.ID, "bob", "refunds are frozen")
	if err != nil {
		t.Fatal(err)
	}
	if dec.Status != govern.StatusDenied || dec.Decision.Approver != "bob" || dec.Decision.Approved || dec.Decision.Reason != "refunds are frozen" {
		t.Errorf("Deny = %+v %+v", dec, dec.Decision)
	}
	if _, err := f.invoke(t, "c1"); !errors.Is(err, govern.ApprovalDenied) {
		t.Errorf("Invoke after denial: %v, want ApprovalDenied", err)
	}
	if f.calls.Load() != 0 {
		t.Error("the denied call ran")
	}
	var rec govern.Record
	for r, err := range f.journal.Records(ctx, 1) {
		if err == nil && r.Kind == recordkind.ApprovalDecided {
			rec = r
		}
	}
	if rec.Actor.ID != "bob" || rec.Actor.Kind != govern.ActorHuman {
		t.Errorf("denial recorded as %+v", rec.Actor)
	}
}

// An approval token that fails verification is refused with its reason
// code, and nothing is recorded.
func TestUAICP_5_3_InvalidTokenRefused(t *testing.T) {
	f := newFixture(t, approvalapi.Options{})
	ctx := context.Background()
	r1, r2 := f.request(t, "c1"), f.request(t, "c2")
	self, _ := approverkey.Generate("agent:a")
	if _, err := f.g.Keyring().Add("agent:a", self.Public()); err != nil {
		t.Fatal(err)
	}
	expired, err := govern.SignApproval(f.alice.Private, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "j1",
		IssuedAt: time.Now().Add(-time.Hour).Unix(), Expiry: time.Now().Add(-time.Minute).Unix(), Binding: r1.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"untrusted key": f.sign(t, f.mallory, r1),
		"other request": f.sign(t, f.alice, r2),
		"self-approval": f.sign(t, self, r1),
		"expired":       expired,
		"not a token":   "hello",
		"edited signature": func() string {
			tok := f.sign(t, f.alice, r1)
			return tok[:len(tok)-4] + "AAAA"
		}(),
	} {
		_, err := f.client.Approve(ctx, r1.ID, tok)
		var ae *approvalapi.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != "APPROVAL_INVALID" || !errors.Is(err, govern.ApprovalInvalid) {
			t.Errorf("%s: %v, want 403 APPROVAL_INVALID", name, err)
			continue
		}
		if !strings.HasPrefix(ae.Message, "approval token refused: ") {
			t.Errorf("%s: message %q", name, ae.Message)
		}
	}
	if f.status(t, r1.ID) != govern.StatusPending || f.decisions(t) != 0 {
		t.Errorf("a refused token was recorded")
	}
	// The request can still be approved properly.
	if _, err := f.client.Approve(ctx, r1.ID, f.sign(t, f.alice, r1)); err != nil {
		t.Fatal(err)
	}
}

func TestUAICP_5_3_DecidedOnce(t *testing.T) {
	f := newFixture(t, approvalapi.Options{})
	ctx := context.Background()
	r1 := f.request(t, "c1")
	if _, err := f.client.Approve(ctx, r1.ID, f.sign(t, f.alice, r1)); err != nil {
		t.Fatal(err)
	}
	for name, decide := range map[string]func() error{
		"approve again": func() error { _, err := f.client.Approve(ctx, r1.ID, f.sign(t, f.alice, r1)); return err },
		"deny after":    func() error { _, err := f.client.Deny(ctx, r1.ID, "bob", ""); return err },
	} {
		err := decide()
		var ae *approvalapi.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != "ALREADY_DECIDED" || !errors.Is(err, govern.ErrAlreadyDecided) {
			t.Errorf("%s: %v, want 409 ALREADY_DECIDED", name, err)
		}
	}
	if f.decisions(t) != 1 || f.status(t, r1.ID) != govern.StatusApproved {
		t.Error("the second decision changed the record")
	}
}

// Concurrent approvals of one request: exactly one wins.
func TestConcurrentApprovals(t *testing.T) {
	f := newFixture(t, approvalapi.Options{})
	r1 := f.request(t, "c1")
	var ok, conflict atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		tok := f.sign(t, f.alice, r1)
		wg.Go(func() {
			_, err := f.client.Approve(context.Background(), r1.ID, tok)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, govern.ErrAlreadyDecided):
				conflict.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || conflict.Load() != 7 || f.decisions(t) != 1 {
		t.Errorf("%d approved, %d conflicts, %d records", ok.Load(), conflict.Load(), f.decisions(t))
	}
}

type answer struct {
	status int
	header http.Header
	code   string
	msg    string
}

func do(t *testing.T, method, url, contentType, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode >= 300 {
		var b struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		if err := d.Decode(&b); err != nil || b.Error.Code == "" || b.Error.Message == "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: error body %q (%s), %v", method, url, data, resp.Header.Get("Content-Type"), err)
		}
		a.code, a.msg = b.Error.Code, b.Error.Message
	}
	return a
}

func TestErrorAnswers(t *testing.T) {
	f := newFixture(t, approvalapi.Options{MaxBodyBytes: 512})
	r1 := f.request(t, "c1")
	one := f.srv.URL + "/v1/approvals/" + r1.ID
	const js = "application/json"
	deny := `{"decision":"deny","approver":"bob"}`

	for name, body := range map[string]string{
		"empty":                 "",
		"array":                 `[]`,
		"string":                `"deny"`,
		"null":                  `null`,
		"invalid JSON":          `{"decision":`,
		"unknown member":        `{"decision":"deny","approver":"bob","comment":"x"}`,
		"member case":           `{"Decision":"deny","approver":"bob"}`,
		"duplicate member":      `{"decision":"approve","decision":"deny","approver":"bob"}`,
		"decision not string":   `{"decision":true,"approver":"bob"}`,
		"approver not string":   `{"decision":"deny","approver":{"name":"bob"}}`,
		"reason null":           `{"decision":"deny","approver":"bob","reason":null}`,
		"no decision":           `{"approver":"bob"}`,
		"bad decision":          `{"decision":"maybe","approver":"bob"}`,
		"approve without token": `{"decision":"approve"}`,
		"approve empty token":   `{"decision":"approve","token":""}`,
		"approve with approver": `{"decision":"approve","token":"x.y.z","approver":"bob"}`,
		"deny without approver": `{"decision":"deny"}`,
		"deny empty approver":   `{"decision":"deny","approver":""}`,
		"deny with token":       `{"decision":"deny","approver":"bob","token":"x.y.z"}`,
		"approver control":      `{"decision":"deny","approver":"bob\u0000"}`,
		"two values":            deny + deny,
		"trailing garbage":      deny + `x`,
		"invalid UTF-8":         `{"decision":"deny","approver":"b` + "\xff" + `"}`,
	} {
		if a := do(t, "POST", one, js, body); a.status != http.StatusBadRequest || a.code != "BAD_REQUEST" {
			t.Errorf("%s: %d %s %q, want 400 BAD_REQUEST", name, a.status, a.code, a.msg)
		}
	}
	if f.status(t, r1.ID) != govern.StatusPending || f.decisions(t) != 0 {
		t.Fatal("a malformed body decided the request")
	}

	for _, c := range []struct {
		name, method, url, ctype, body string
		status                         int
		code, allow                    string
	}{
		{"bad status", "GET", f.srv.URL + "/v1/approvals?status=bogus", "", "", 400, "BAD_REQUEST", ""},
		{"two statuses", "GET", f.srv.URL + "/v1/approvals?status=all&status=pending", "", "", 400, "BAD_REQUEST", ""},
		{"get unknown", "GET", f.srv.URL + "/v1/approvals/00000000-0000-4000-8000-000000000000", "", "", 404, "NOT_FOUND", ""},
		{"decide unknown", "POST", f.srv.URL + "/v1/approvals/nope", js, deny, 404, "NOT_FOUND", ""},
		{"unknown route", "GET", f.srv.URL + "/v1/other", "", "", 404, "NOT_FOUND", ""},
		{"trailing slash", "GET", f.srv.URL + "/v1/approvals/", "", "", 404, "NOT_FOUND", ""},
		{"not JSON", "POST", one, "text/plain", deny, 415, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"no content type", "POST", one, "", deny, 415, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"too large", "POST", one, js, `{"decision":"deny","approver":"bob","reason":"` + strings.Repeat("x", 600) + `"}`, 413, "PAYLOAD_TOO_LARGE", ""},
		{"delete one", "DELETE", one, "", "", 405, "METHOD_NOT_ALLOWED", "GET, HEAD, POST"},
		{"put one", "PUT", one, js, deny, 405, "METHOD_NOT_ALLOWED", "GET, HEAD, POST"},
		{"post list", "POST", f.srv.URL + "/v1/approvals", js, deny, 405, "METHOD_NOT_ALLOWED", "GET, HEAD"},
	} {
		a := do(t, c.method, c.url, c.ctype, c.body)
		if a.status != c.status || a.code != c.code || a.header.Get("Allow") != c.allow {
			t.Errorf("%s: %d %s (Allow %q) %q, want %d %s (Allow %q)", c.name, a.status, a.code, a.header.Get("Allow"), a.msg, c.status, c.code, c.allow)
		}
	}
	if a := do(t, "POST", one, "application/json; charset=utf-8", deny); a.status != http.StatusOK {
		t.Errorf("JSON with a charset: %d %s", a.status, a.msg)
	}
}

// A body over the limit without a Content-Length (chunked) is cut off too.
func TestChunkedBodyOverLimit(t *testing.T) {
	f := newFixture(t, approvalapi.Options{MaxBodyBytes: 64})
	r1 := f.request(t, "c1")
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, `{"decision":"deny","approver":"bob","reason":"`+strings.Repeat("x", 200)+`"}`)
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/approvals/"+r1.ID, pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
	if f.status(t, r1.ID) != govern.StatusPending {
		t.Error("a cut-off body decided the request")
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	f := newFixture(t, approvalapi.Options{})
	r1 := f.request(t, "c1")
	f.journal.fail.Store(true)
	_, err := f.client.Deny(context.Background(), r1.ID, "bob", "")
	var ae *approvalapi.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError || ae.Code != "INTERNAL" || strings.Contains(ae.Message, "disk") {
		t.Fatalf("err = %v, want a bare 500", err)
	}
	if !strings.Contains(f.logs.String(), "disk on fire") {
		t.Errorf("the cause was not logged: %s", f.logs.String())
	}
}

func TestBearerAuth(t *testing.T) {
	f := newFixture(t, approvalapi.Options{BearerToken: "s3cret"})
	ctx := context.Background()
	r1 := f.request(t, "c1")
	list := f.srv.URL + "/v1/approvals"
	for name, hdr := range map[string][]string{
		"none":       nil,
		"wrong":      {"Authorization", "Bearer s3cre"},
		"longer":     {"Authorization", "Bearer s3cret2"},
		"basic":      {"Authorization", "Basic czNjcmV0"},
		"lower case": {"Authorization", "bearer s3cret"},
	} {
		a := do(t, "GET", list, "", "", hdr...)
		if a.status != http.StatusUnauthorized || a.code != "UNAUTHORIZED" || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: %d %s, WWW-Authenticate %q", name, a.status, a.code, a.header.Get("WWW-Authenticate"))
		}
	}
	// Every route is behind it, a decision too.
	if a := do(t, "POST", list+"/"+r1.ID, "application/json", `{"decision":"deny","approver":"bob"}`); a.status != http.StatusUnauthorized {
		t.Errorf("unauthenticated denial: %d", a.status)
	}
	if f.status(t, r1.ID) != govern.StatusPending {
		t.Fatal("an unauthenticated denial was recorded")
	}
	noToken := &approvalapi.Client{BaseURL: f.srv.URL}
	if _, err := noToken.List(ctx, false); err == nil || err.(*approvalapi.Error).Code != "UNAUTHORIZED" {
		t.Errorf("client without token: %v", err)
	}
	if l, err := f.client.List(ctx, false); err != nil || len(l) != 1 {
		t.Errorf("client with token: %v, %v", l, err)
	}
	if _, err := f.client.Deny(ctx, r1.ID, "bob", "no"); err != nil {
		t.Errorf("authenticated denial: %v", err)
	}
}

func TestClientAgainstForeignServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>upstream down</html>")
	}))
	defer srv.Close()
	c := &approvalapi.Client{BaseURL: srv.URL + "/"}
	_, err := c.List(context.Background(), false)
	var ae *approvalapi.Error
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "" || !strings.Contains(ae.Message, "upstream down") {
		t.Errorf("err = %#v", err)
	}
	if _, err := c.Get(context.Background(), ""); err == nil {
		t.Error("Get with an empty ID")
	}
}

// While the journal cannot be reached the API answers 503 with
// Retry-After and the code UNAVAILABLE, never 500.
func TestHandlerJournalUnavailable(t *testing.T) {
	j := &journalfixture.Outage{Journal: govern.NewMemoryJournal()}
	g, err := govern.New(context.Background(), &govern.Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(approvalapi.NewHandler(g, &approvalapi.Options{}))
	defer srv.Close()
	j.Down.Store(true)
	for _, path := range []string{"/v1/approvals", "/v1/approvals/a1"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"UNAVAILABLE"`) {
			t.Errorf("GET %s with the journal down: %d %q %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
}
