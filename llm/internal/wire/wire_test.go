package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/llm"
)

// testKey is the API key of the test clients; no error may contain it.
const testKey = "sk-test-0123456789-SECRET"

// server is an httptest server that counts requests and records the last
// one's headers and body.
type server struct {
	*httptest.Server
	calls  atomic.Int32
	mu     sync.Mutex
	header http.Header
	body   []string // every request's body, in order
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.header = r.Header.Clone()
		s.body = append(s.body, string(body))
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) lastHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header
}

func (s *server) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.body...)
}

// reply answers with a status, headers and body.
func reply(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// hang blocks until the request ends, after sending the given chunk (none
// when empty) with headers.
func hang(first string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if first != "" {
			io.WriteString(w, first)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}
}

func newClient(s *server) *Client {
	return &Client{
		Provider: "test",
		Config: llm.ProviderConfig{
			BaseURL:    s.URL,
			APIKey:     llm.StaticKey(testKey),
			HTTPClient: s.Client(),
		},
		Authorize: func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
	}
}

// wantCode fails unless err is an *llm.Error with code whose text, and its
// causes' text, does not contain the API key.
func wantCode(t *testing.T, err error, code llm.ErrorCode) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	if e.Code != code || !errors.Is(err, code) {
		t.Errorf("code %s (%v), want %s", e.Code, err, code)
	}
	if e.Provider != "test" {
		t.Errorf("provider %q, want test", e.Provider)
	}
	noKey(t, err)
	return e
}

func noKey(t *testing.T, err error) {
	t.Helper()
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v", err), testKey) {
			t.Errorf("error text contains the API key: %v", err)
		}
	}
}

func TestURL(t *testing.T) {
	c := &Client{DefaultBaseURL: "https://api.example.com/"}
	if got, want := c.URL("/v1/messages"), "https://api.example.com/v1/messages"; got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
	c.Config.BaseURL = "http://proxy/base//"
	if got, want := c.URL("/v1/messages"), "http://proxy/base/v1/messages"; got != want {
		t.Errorf("URL with Config.BaseURL = %q, want %q", got, want)
	}
}

func TestHeadersPrecedence(t *testing.T) {
	s := newServer(t, reply(200, `{}`))
	c := newClient(s)
	c.Headers = map[string]string{ // the provider's own
		"X-Provider": "p", "X-Shared": "provider", "Authorization": "provider", "Accept": "application/x-ndjson",
	}
	c.Authorize = func(h http.Header, key string) {
		h.Set("Authorization", "Bearer "+key)
		h.Set("X-Shared", "authorize")
	}
	c.Config.Headers = map[string]string{"x-shared": "config", "X-User": "u"}
	if _, err := c.PostJSON(context.Background(), "/v1/x", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	h := s.lastHeader()
	want := map[string]string{
		"Authorization": "Bearer " + testKey, // Authorize wins over the provider
		"X-Shared":      "config",            // Config.Headers win over both
		"X-Provider":    "p",
		"X-User":        "u",
		"Accept":        "application/x-ndjson", // the provider's win over the default
		"Content-Type":  "application/json",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = strings.Join(h.Values(k), ",")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`{"a":1}`}, s.bodies()); diff != "" {
		t.Errorf("body mismatch (-want +got):\n%s", diff)
	}

	// The caller's headers win over Authorize too (e.g. a gateway's auth).
	c.Config.Headers = map[string]string{"Authorization": "Bearer gateway"}
	if _, err := c.PostJSON(context.Background(), "/v1/x", nil); err != nil {
		t.Fatal(err)
	}
	if got := s.lastHeader().Get("Authorization"); got != "Bearer gateway" {
		t.Errorf("Authorization = %q, want the caller's", got)
	}
}

func TestDefaultHeaders(t *testing.T) {
	s := newServer(t, reply(200, "data: x\n\n"))
	c := newClient(s)
	rc, err := c.Open(context.Background(), http.MethodGet, "/v1/models", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	h := s.lastHeader()
	if got := h.Get("Accept"); got != "text/event-stream" {
		t.Errorf("stream Accept = %q", got)
	}
	if got := h.Get("Content-Type"); got != "" {
		t.Errorf("Content-Type without a body = %q", got)
	}
	if _, err := c.PostJSON(context.Background(), "/", struct{}{}); err != nil {
		t.Fatal(err)
	}
	if got := s.lastHeader().Get("Accept"); got != "application/json" {
		t.Errorf("Accept = %q", got)
	}
}

func TestRequestBodyNotEncodable(t *testing.T) {
	s := newServer(t, reply(200, `{}`))
	_, err := newClient(s).PostJSON(context.Background(), "/", func() {})
	wantCode(t, err, llm.InvalidRequest)
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestMissingKey(t *testing.T) {
	t.Setenv("TEST_API_KEY", "")
	s := newServer(t, reply(200, `{}`))
	c := newClient(s)
	c.Config.APIKey = nil

	_, err := c.PostJSON(context.Background(), "/", nil)
	e := wantCode(t, err, llm.AuthenticationFailed)
	if !strings.Contains(e.Message, "TEST_API_KEY") {
		t.Errorf("message %q does not name the environment variable", e.Message)
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d requests sent without a key", n)
	}

	c.KeyOptional = true
	if _, err := c.PostJSON(context.Background(), "/", nil); err != nil {
		t.Fatalf("optional key: %v", err)
	}
	if got := s.lastHeader().Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q without a key", got)
	}

	t.Setenv("TEST_API_KEY", "from-env")
	if _, err := c.PostJSON(context.Background(), "/", nil); err != nil {
		t.Fatal(err)
	}
	if got := s.lastHeader().Get("Authorization"); got != "Bearer from-env" {
		t.Errorf("Authorization = %q, want the environment's key", got)
	}
}

func TestKeyStrategyFailure(t *testing.T) {
	s := newServer(t, reply(200, `{}`))
	c := newClient(s)
	c.Config.APIKey = llm.KeyFunc(func(context.Context) (string, error) { return "", errors.New("vault down") })
	_, err := c.PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.AuthenticationFailed)
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestStatusCodes(t *testing.T) {
	tests := []struct {
		status int
		code   llm.ErrorCode
	}{
		{400, llm.InvalidRequest},
		{401, llm.AuthenticationFailed},
		{402, llm.QuotaExceeded},
		{403, llm.AuthenticationFailed},
		{404, llm.ModelNotFound},
		{405, llm.InvalidRequest},
		{408, llm.Timeout},
		{409, llm.InvalidRequest},
		{413, llm.ContextLengthExceeded},
		{422, llm.InvalidRequest},
		{429, llm.RateLimited},
		{451, llm.ContentFiltered},
		{500, llm.ProviderError},
		{502, llm.ProviderError},
		{503, llm.ProviderError},
		{418, llm.InvalidRequest},
		{529, llm.ProviderError}, // Anthropic's "overloaded"
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			s := newServer(t, reply(tt.status, ` {"error":"nope"} `))
			_, err := newClient(s).PostJSON(context.Background(), "/", nil)
			e := wantCode(t, err, tt.code)
			if e.StatusCode != tt.status {
				t.Errorf("StatusCode = %d", e.StatusCode)
			}
			want := `{"error":"nope"}`
			if tt.status == 404 { // a body that is not the vendor's: a wrong base URL
				want = "nothing is served at " + s.URL + `/ ({"error":"nope"}): check the base URL`
			}
			if e.Message != want {
				t.Errorf("Message = %q, want %q", e.Message, want)
			}
			if n := s.calls.Load(); n != 1 {
				t.Errorf("%d requests, want 1 (no strategy)", n)
			}
		})
	}
}

// A 404 the vendor did not word (no error of its shape: a path nothing
// serves) names the URL and says to check the base URL, with the
// provider's hint; one the vendor worded keeps its message.
func TestNotFoundWithoutVendorErrorNamesTheURL(t *testing.T) {
	s := newServer(t, reply(404, "404 page not found\n"))
	c := newClient(s)
	c.BaseURLHint = "OpenAI-compatible servers usually serve under /v1"
	c.ParseError = func(int, []byte) (string, llm.ErrorCode) { return "", "" }
	_, err := c.PostJSON(context.Background(), "/chat/completions?key=secret", nil)
	e := wantCode(t, err, llm.ModelNotFound) // UPP: 404 is MODEL_NOT_FOUND
	want := "nothing is served at " + s.URL + "/chat/completions (404 page not found): check the base URL; OpenAI-compatible servers usually serve under /v1"
	if e.Message != want {
		t.Errorf("Message = %q, want %q", e.Message, want)
	}
	c.ParseError = func(int, []byte) (string, llm.ErrorCode) { return "the model `x` does not exist", "" }
	_, err = c.PostJSON(context.Background(), "/chat/completions", nil)
	if e := wantCode(t, err, llm.ModelNotFound); e.Message != "the model `x` does not exist" {
		t.Errorf("vendor 404: Message = %q", e.Message)
	}
}

// A request that gets no response names the URL it tried and the cause,
// in words.
func TestNetworkErrorNamesTheURLAndCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	c := &Client{Provider: "test", Config: llm.ProviderConfig{BaseURL: "http://user:pw@" + addr + "/v1"}, KeyOptional: true}
	_, err = c.PostJSON(context.Background(), "/chat/completions?key=secret", nil)
	e := wantCode(t, err, llm.NetworkError)
	want := "cannot reach http://user:xxxxx@" + addr + "/v1/chat/completions: connection refused"
	if e.Message != want || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Message = %q, want %q (cause %v)", e.Message, want, e.Cause)
	}
}

func TestErrorMessage(t *testing.T) {
	long := "x" + strings.Repeat("é", 400) // 801 bytes: byte 500 is inside a rune
	tests := []struct {
		name      string
		body      string
		parse     func(int, []byte) (string, llm.ErrorCode)
		wantMsg   string
		wantCode  llm.ErrorCode
		wantValid bool
	}{
		{name: "empty body is the status text", body: "", wantMsg: "Bad Request", wantCode: llm.InvalidRequest},
		{name: "long body is cut on a rune", body: long, wantMsg: "x" + strings.Repeat("é", 249) + "…", wantCode: llm.InvalidRequest},
		{name: "ParseError refines message and code", body: `{"error":{"message":"prompt is too long"}}`,
			parse: func(status int, body []byte) (string, llm.ErrorCode) {
				if status != 400 || !bytes.Contains(body, []byte("too long")) {
					return "", ""
				}
				return "prompt is too long", llm.ContextLengthExceeded
			},
			wantMsg: "prompt is too long", wantCode: llm.ContextLengthExceeded},
		{name: "ParseError without result keeps body and code", body: "plain",
			parse:   func(int, []byte) (string, llm.ErrorCode) { return "", "" },
			wantMsg: "plain", wantCode: llm.InvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, reply(400, tt.body))
			c := newClient(s)
			c.ParseError = tt.parse
			_, err := c.PostJSON(context.Background(), "/", nil)
			e := wantCode(t, err, tt.wantCode)
			if e.Message != tt.wantMsg {
				t.Errorf("Message = %q, want %q", e.Message, tt.wantMsg)
			}
			if !utf8.ValidString(e.Message) {
				t.Errorf("Message is not valid UTF-8: %q", e.Message)
			}
		})
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid key %s"}`, r.Header.Get("Authorization"))
	}
	t.Run("body echoes the key", func(t *testing.T) {
		s := newServer(t, echo)
		_, err := newClient(s).PostJSON(context.Background(), "/", nil)
		wantCode(t, err, llm.AuthenticationFailed)
	})
	t.Run("ParseError echoes the key", func(t *testing.T) {
		s := newServer(t, echo)
		c := newClient(s)
		c.ParseError = func(_ int, body []byte) (string, llm.ErrorCode) { return string(body), "" }
		_, err := c.PostJSON(context.Background(), "/", nil)
		wantCode(t, err, llm.AuthenticationFailed)
	})
	t.Run("network error", func(t *testing.T) {
		s := newServer(t, echo)
		s.Close()
		_, err := newClient(s).PostJSON(context.Background(), "/", nil)
		wantCode(t, err, llm.NetworkError)
	})
	t.Run("timeout", func(t *testing.T) {
		s := newServer(t, hang(""))
		c := newClient(s)
		c.Config.Timeout = 20 * time.Millisecond
		_, err := c.PostJSON(context.Background(), "/", nil)
		wantCode(t, err, llm.Timeout)
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header []string
		want   time.Duration
	}{
		{"absent", nil, 0},
		{"seconds", []string{"Retry-After", "7"}, 7 * time.Second},
		{"seconds with spaces", []string{"Retry-After", " 2 "}, 2 * time.Second},
		{"fractional seconds", []string{"Retry-After", "1.5"}, 1500 * time.Millisecond},
		{"zero", []string{"Retry-After", "0"}, 0},
		{"negative", []string{"Retry-After", "-3"}, 0},
		{"HTTP date", []string{"Retry-After", "Sun, 01 Jun 2025 12:00:30 GMT"}, 30 * time.Second},
		{"HTTP date in the past", []string{"Retry-After", "Sun, 01 Jun 2025 11:59:00 GMT"}, 0},
		{"RFC 850 date", []string{"Retry-After", "Sunday, 01-Jun-25 12:01:00 GMT"}, time.Minute},
		{"garbage", []string{"Retry-After", "soon"}, 0},
		{"NaN", []string{"Retry-After", "NaN"}, 0},
		{"infinity", []string{"Retry-After", "Inf"}, 0},
		{"huge is capped, not negative", []string{"Retry-After", "1e30"}, time.Duration(1<<63 - 1)},
		{"retry-after-ms", []string{"Retry-After-Ms", "250"}, 250 * time.Millisecond},
		{"retry-after-ms lower case", []string{"retry-after-ms", "1.5"}, 1500 * time.Microsecond},
		{"retry-after-ms wins", []string{"Retry-After-Ms", "250", "Retry-After", "7"}, 250 * time.Millisecond},
		{"invalid retry-after-ms falls back", []string{"Retry-After-Ms", "x", "Retry-After", "7"}, 7 * time.Second},
		{"zero retry-after-ms falls back", []string{"Retry-After-Ms", "0", "Retry-After", "7"}, 7 * time.Second},
		{"NaN retry-after-ms falls back", []string{"Retry-After-Ms", "NaN", "Retry-After", "7"}, 7 * time.Second},
		{"huge retry-after-ms is capped", []string{"Retry-After-Ms", "1e300"}, time.Duration(1<<63 - 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i < len(tt.header); i += 2 {
				h.Set(tt.header[i], tt.header[i+1])
			}
			if got := RetryAfter(h, now); got != tt.want {
				t.Errorf("RetryAfter(%v) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

func TestStatusRetryAfter(t *testing.T) {
	// In a bubble the clock starts on a whole second and stands still
	// while the reply is read, so an HTTP date gives exactly 7 s too.
	synctest.Test(t, func(t *testing.T) {
		for _, header := range [][]string{
			{"Retry-After", "7"},
			{"Retry-After", time.Now().Add(7*time.Second + 500*time.Millisecond).UTC().Format(http.TimeFormat)},
			{"retry-after-ms", "7000"},
		} {
			c := fakeClient(func(r *http.Request) (*http.Response, error) {
				rec := httptest.NewRecorder()
				reply(429, "slow down", header...)(rec, r)
				return rec.Result(), nil
			})
			_, err := c.PostJSON(t.Context(), "/", nil)
			if e := wantCode(t, err, llm.RateLimited); e.RetryAfter != 7*time.Second {
				t.Errorf("%v: RetryAfter = %v, want 7s", header, e.RetryAfter)
			}
		}
	})
}

// failThen answers failures with the given status, then 200 with body.
func failThen(failures int, status int, body string, header ...string) http.HandlerFunc {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if int(n.Add(1)) <= failures {
			reply(status, "try again", header...)(w, r)
			return
		}
		reply(200, body)(w, r)
	}
}

func TestRetryToSuccess(t *testing.T) {
	// The server asks for an hour; RetryAfterMax caps it at a millisecond.
	s := newServer(t, failThen(2, 503, `{"ok":true}`, "Retry-After", "3600"))
	c := newClient(s)
	c.Config.RetryStrategy = llm.LinearBackoff{Delay: time.Millisecond}
	c.Config.RetryAfterMax = time.Millisecond
	// Were the hour not capped, the context would end the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := c.PostJSON(ctx, "/", map[string]string{"q": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"ok":true}` {
		t.Errorf("body = %q", got)
	}
	if n := s.calls.Load(); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
	// Every attempt sends the whole body again.
	if diff := cmp.Diff([]string{`{"q":"hi"}`, `{"q":"hi"}`, `{"q":"hi"}`}, s.bodies()); diff != "" {
		t.Errorf("bodies mismatch (-want +got):\n%s", diff)
	}
}

func TestRetryStream(t *testing.T) {
	s := newServer(t, failThen(1, 429, "data: ok\n\n"))
	c := newClient(s)
	c.Config.RetryStrategy = llm.LinearBackoff{Delay: time.Millisecond}
	rc, err := c.Open(context.Background(), http.MethodPost, "/", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil || string(data) != "data: ok\n\n" {
		t.Errorf("ReadAll = %q, %v", data, err)
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}

func TestNoRetryWithoutStrategy(t *testing.T) {
	s := newServer(t, failThen(1, 503, `{}`))
	_, err := newClient(s).PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.ProviderError)
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestNoRetryForFinalCodes(t *testing.T) {
	for _, status := range []int{400, 401, 404} {
		s := newServer(t, failThen(1, status, `{}`))
		c := newClient(s)
		c.Config.RetryStrategy = llm.LinearBackoff{Delay: time.Millisecond}
		_, err := c.PostJSON(context.Background(), "/", nil)
		wantCode(t, err, CodeForStatus(status))
		if n := s.calls.Load(); n != 1 {
			t.Errorf("HTTP %d: %d attempts, want 1", status, n)
		}
	}
}

func TestRetriesExhausted(t *testing.T) {
	s := newServer(t, reply(500, "down"))
	c := newClient(s)
	c.Config.RetryStrategy = llm.LinearBackoff{MaxRetries: 2, Delay: time.Millisecond}
	_, err := c.PostJSON(context.Background(), "/", nil)
	e := wantCode(t, err, llm.ProviderError)
	if e.StatusCode != 500 || e.Message != "down" {
		t.Errorf("error = %v, want the last attempt's", e)
	}
	if n := s.calls.Load(); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

func TestHeaderTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := fakeClient(func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, context.Cause(r.Context())
		})
		c.Config.Timeout = 50 * time.Millisecond
		start := time.Now()
		_, err := c.PostJSON(t.Context(), "/", nil)
		e := wantCode(t, err, llm.Timeout)
		if !strings.Contains(e.Message, "50ms") {
			t.Errorf("message %q does not give the timeout", e.Message)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("timed out after %v, want 50ms", d)
		}
	})
}

// roundTripFunc is an http.RoundTripper, for tests that run in a synctest
// bubble or need a body no real connection delivers quickly.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func fakeClient(rt roundTripFunc) *Client {
	return &Client{Provider: "test", DefaultBaseURL: "http://fake", Config: llm.ProviderConfig{
		APIKey: llm.StaticKey(testKey), HTTPClient: &http.Client{Transport: rt}}}
}

func okResponse(r *http.Request, body io.Reader) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: -1, Body: io.NopCloser(body), Request: r}
}

// chanBody is a response body fed from chunks until they are closed; it
// fails with the request context's cause when that ends, as a real
// connection does.
type chanBody struct {
	ctx     context.Context
	chunks  chan string
	pending string
}

func (b *chanBody) Read(p []byte) (int, error) {
	if b.pending == "" {
		select {
		case s, ok := <-b.chunks:
			if !ok {
				return 0, io.EOF
			}
			b.pending = s
		case <-b.ctx.Done():
			return 0, context.Cause(b.ctx)
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func TestHeaderTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		c := fakeClient(func(r *http.Request) (*http.Response, error) {
			if calls.Add(1) == 1 {
				<-r.Context().Done()
				return nil, context.Cause(r.Context())
			}
			return okResponse(r, strings.NewReader("{}")), nil
		})
		c.Config.Timeout = 50 * time.Millisecond
		c.Config.RetryStrategy = llm.LinearBackoff{Delay: time.Second}
		start := time.Now()
		if _, err := c.PostJSON(t.Context(), "/", nil); err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
		if d, want := time.Since(start), 50*time.Millisecond+time.Second; d != want {
			t.Errorf("took %v, want the timeout then the strategy's delay: %v", d, want)
		}
	})
}

func TestIdleTimeout(t *testing.T) {
	// In a bubble: over a real connection the headers themselves can take
	// longer than the 50 ms under load, a header timeout and not the idle
	// one this test is about.
	synctest.Test(t, func(t *testing.T) {
		chunks := make(chan string, 1)
		chunks <- "data: first\n\n"
		c := fakeClient(func(r *http.Request) (*http.Response, error) {
			return okResponse(r, &chanBody{ctx: r.Context(), chunks: chunks}), nil
		})
		c.Config.Timeout = 50 * time.Millisecond
		rc, err := c.Open(t.Context(), http.MethodPost, "/", nil, true)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		start := time.Now()
		data, err := io.ReadAll(rc)
		if string(data) != "data: first\n\n" {
			t.Errorf("read %q before the stall", data)
		}
		e := wantCode(t, err, llm.Timeout)
		if !strings.Contains(e.Message, "idle") {
			t.Errorf("message %q does not say the stream was idle", e.Message)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("timed out after %v, want 50ms", d)
		}
	})
}

func TestIdleTimerRestartsOnData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 50 * time.Millisecond
		chunks := make(chan string)
		c := fakeClient(func(r *http.Request) (*http.Response, error) {
			return okResponse(r, &chanBody{ctx: r.Context(), chunks: chunks}), nil
		})
		c.Config.Timeout = timeout
		rc, err := c.Open(t.Context(), http.MethodPost, "/", nil, true)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		go func() {
			// Ten chunks 40 ms apart: 400 ms in all, never 50 ms idle;
			// then a stall.
			for range 10 {
				time.Sleep(40 * time.Millisecond)
				chunks <- "x"
			}
		}()
		start := time.Now()
		data, err := io.ReadAll(rc)
		if string(data) != "xxxxxxxxxx" {
			t.Errorf("read %q, want all ten chunks", data)
		}
		wantCode(t, err, llm.Timeout)
		if d, want := time.Since(start), 10*40*time.Millisecond+timeout; d != want {
			t.Errorf("timed out after %v, want %v", d, want)
		}
	})
}

func TestNoIdleTimeoutWithoutStream(t *testing.T) {
	// Once the headers came, a non-streamed body may take longer than
	// Timeout: only the caller's context bounds it.
	synctest.Test(t, func(t *testing.T) {
		chunks := make(chan string)
		c := fakeClient(func(r *http.Request) (*http.Response, error) {
			return okResponse(r, &chanBody{ctx: r.Context(), chunks: chunks}), nil
		})
		c.Config.Timeout = 50 * time.Millisecond
		go func() {
			chunks <- `{"a":`
			time.Sleep(time.Second)
			chunks <- `1}`
			close(chunks)
		}()
		got, err := c.PostJSON(t.Context(), "/", nil)
		if err != nil || string(got) != `{"a":1}` {
			t.Errorf("PostJSON = %q, %v", got, err)
		}
	})
}

func TestCallerCancels(t *testing.T) {
	t.Run("waiting for headers", func(t *testing.T) {
		arrived := make(chan struct{})
		s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-arrived; cancel() }()
		_, err := newClient(s).PostJSON(ctx, "/", nil)
		wantCode(t, err, llm.Cancelled)
	})
	t.Run("reading the body", func(t *testing.T) {
		arrived := make(chan struct{})
		s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"partial":`)
			w.(http.Flusher).Flush()
			close(arrived)
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-arrived; cancel() }()
		_, err := newClient(s).PostJSON(ctx, "/", nil)
		wantCode(t, err, llm.Cancelled)
	})
	t.Run("reading a stream", func(t *testing.T) {
		s := newServer(t, hang("data: first\n\n"))
		ctx, cancel := context.WithCancel(context.Background())
		c := newClient(s)
		rc, err := c.Open(ctx, http.MethodPost, "/", nil, true)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		buf := make([]byte, 64)
		if _, err := rc.Read(buf); err != nil {
			t.Fatal(err)
		}
		cancel()
		_, err = io.ReadAll(rc)
		wantCode(t, c.ReadError(ctx, err), llm.Cancelled)
	})
	t.Run("deadline", func(t *testing.T) {
		s := newServer(t, hang(""))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		_, err := newClient(s).PostJSON(ctx, "/", nil)
		wantCode(t, err, llm.Timeout)
	})
	t.Run("before the request", func(t *testing.T) {
		s := newServer(t, reply(200, "{}"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := newClient(s).PostJSON(ctx, "/", nil)
		wantCode(t, err, llm.Cancelled)
	})
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestOversizedBody(t *testing.T) {
	// An in-memory body: a real connection is slower and tests nothing more.
	var closed atomic.Bool
	c := fakeClient(func(r *http.Request) (*http.Response, error) {
		body := struct {
			io.Reader
			io.Closer
		}{zeros{}, closerFunc(func() error { closed.Store(true); return nil })}
		return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: -1, Body: body, Request: r}, nil
	})
	c.MaxResponse = 1 << 20
	_, err := c.PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.InvalidResponse)
	if !closed.Load() {
		t.Error("body not closed")
	}
}

func TestOversizedBodyRejectedByContentLength(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2048")
		w.Write(bytes.Repeat([]byte("x"), 2048))
	})
	c := newClient(s)
	c.MaxResponse = 1024
	_, err := c.PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.InvalidResponse)
}

func TestRetryDelayFromBody(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(429)
		io.WriteString(w, `{"retryDelay":"7s"}`)
	})
	c := newClient(s)
	c.RetryDelay = func(body []byte) time.Duration {
		if bytes.Contains(body, []byte(`"7s"`)) {
			return 7 * time.Second
		}
		return 0
	}
	_, err := c.PostJSON(context.Background(), "/", nil)
	e := wantCode(t, err, llm.RateLimited)
	if e.RetryAfter != 7*time.Second {
		t.Errorf("RetryAfter = %v, want 7s from the body", e.RetryAfter)
	}
}

func TestKeyOptionalStillFailsABrokenStrategy(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	c := newClient(s)
	c.KeyOptional = true
	c.Config.APIKey = llm.KeyFunc(func(context.Context) (string, error) { return "", errors.New("vault down") })
	_, err := c.PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.AuthenticationFailed)
	c.Config.APIKey = nil
	if _, err := c.PostJSON(context.Background(), "/", nil); err != nil {
		t.Errorf("optional key, none configured: %v", err)
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func TestBodyAtTheLimit(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), 1<<10)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		for range 1 << 10 {
			w.Write(chunk)
		}
	})
	got, err := newClient(s).PostJSON(context.Background(), "/", nil)
	if err != nil || len(got) != 1<<20 {
		t.Errorf("PostJSON = %d bytes, %v; want 1 MiB", len(got), err)
	}
}

// countRetries retries without delay, counting its calls.
type countRetries struct{ n atomic.Int32 }

func (c *countRetries) OnRetry(_ *llm.Error, attempt int) (time.Duration, bool) {
	c.n.Add(1)
	return 0, attempt <= 2
}

func TestNetworkError(t *testing.T) {
	s := newServer(t, reply(200, "{}"))
	s.Close()
	c := newClient(s)
	_, err := c.PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.NetworkError)

	strategy := &countRetries{}
	c.Config.RetryStrategy = strategy
	_, err = c.PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.NetworkError)
	if n := strategy.n.Load(); n != 3 {
		t.Errorf("strategy consulted %d times, want 3 (two retries, then give up)", n)
	}
}

func TestInvalidURL(t *testing.T) {
	c := &Client{Provider: "test", Config: llm.ProviderConfig{BaseURL: "http://bad host", APIKey: llm.StaticKey(testKey)}}
	_, err := c.PostJSON(context.Background(), "/", nil)
	wantCode(t, err, llm.InvalidRequest)
}

func TestReadError(t *testing.T) {
	c := &Client{Provider: "test"}
	own := llm.NewError(llm.Timeout, "test", "idle", nil)
	if got := c.ReadError(context.Background(), fmt.Errorf("wrapped: %w", own)); got != own {
		t.Errorf("ReadError did not keep the *llm.Error: %v", got)
	}
	wantCode(t, c.ReadError(context.Background(), io.ErrUnexpectedEOF), llm.NetworkError)
}

func TestLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []string
		err  error // io.EOF unless set
	}{
		{name: "LF", in: "a\nb\n", want: []string{"a", "b"}},
		{name: "CRLF", in: "a\r\nb\r\n", want: []string{"a", "b"}},
		{name: "blank lines are skipped", in: "\n\na\n\r\n\nb\n\n", want: []string{"a", "b"}},
		{name: "whitespace-only lines are skipped", in: " \t\na\n \r\n", want: []string{"a"}},
		{name: "inner spaces are kept", in: "  a b \n", want: []string{"  a b "}},
		{name: "final line without newline", in: "a\nb", want: []string{"a", "b"}},
		{name: "final line with CR only", in: "a\r", want: []string{"a"}},
		{name: "only a line without newline", in: `{"done":true}`, want: []string{`{"done":true}`}},
		{name: "empty input", in: ""},
		{name: "line at the limit", in: "abcd\nefgh\r\n", max: 4, want: []string{"abcd", "efgh"}},
		{name: "line over the limit", in: "ab\nabcde\n", max: 4, want: []string{"ab"}, err: ErrLineTooLong},
		{name: "line with CR over the limit", in: "abcde\r\n", max: 4, err: ErrLineTooLong},
		{name: "final line over the limit", in: "abcde", max: 4, err: ErrLineTooLong},
		{name: "final line one over the limit", in: "abcd\nabcdef", max: 5, want: []string{"abcd"}, err: ErrLineTooLong},
		{name: "line longer than the buffer", in: strings.Repeat("x", 200<<10) + "\n", max: 1 << 20,
			want: []string{strings.Repeat("x", 200<<10)}},
		{name: "line longer than the buffer over the limit", in: strings.Repeat("x", 200<<10) + "\n", max: 100 << 10,
			err: ErrLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 20
			}
			wantErr := tt.err
			if wantErr == nil {
				wantErr = io.EOF
			}
			for name, r := range map[string]io.Reader{
				"whole":    strings.NewReader(tt.in),
				"one byte": iotest.OneByteReader(strings.NewReader(tt.in)),
			} {
				got, err := readLines(r, max)
				if diff := cmp.Diff(tt.want, got); diff != "" || err != wantErr {
					t.Errorf("%s reads: err %v, want %v; lines (-want +got):\n%s", name, err, wantErr, diff)
				}
			}
		})
	}
}

func TestLinesReadError(t *testing.T) {
	errBoom := errors.New("boom")
	got, err := readLines(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(errBoom)), 100)
	if !errors.Is(err, errBoom) || !cmp.Equal(got, []string{"a"}) {
		t.Errorf("lines %q, err %v; want [a] and the read error", got, err)
	}
}

// readLines returns the lines of r until an error, which is returned too.
func readLines(r io.Reader, max int) ([]string, error) {
	l := NewLines(r, max)
	var out []string
	for {
		line, err := l.Next()
		if err != nil {
			return out, err
		}
		out = append(out, string(line))
	}
}

func FuzzLines(f *testing.F) {
	for _, s := range []string{"a\nb\n", "a\r\nb", "\n\n \r\n", "abcde\n", "abcd\r\n", "x\r\r\n", "{\"a\":1}\n{\"b\":2}"} {
		f.Add([]byte(s), uint8(4))
	}
	f.Fuzz(func(t *testing.T, in []byte, max uint8) {
		limit := int(max) + 1
		got, err := readLines(bytes.NewReader(in), limit)
		if err != io.EOF && err != ErrLineTooLong {
			t.Fatalf("unexpected error %v", err)
		}
		for _, line := range got {
			if len(line) > limit {
				t.Fatalf("line of %d bytes over the %d limit", len(line), limit)
			}
			if strings.ContainsRune(line, '\n') || strings.TrimSpace(line) == "" || strings.HasSuffix(line, "\r") {
				t.Fatalf("bad line %q", line)
			}
		}
		// The reference: split on LF; a line over the limit without its
		// CRLF or LF ends the input; trailing CRs are dropped and blank
		// lines skipped.
		var want []string
		wantErr := io.EOF
		for _, line := range strings.Split(string(in), "\n") {
			if len(strings.TrimSuffix(line, "\r")) > limit {
				wantErr = ErrLineTooLong
				break
			}
			if line = strings.TrimRight(line, "\r"); strings.TrimSpace(line) != "" {
				want = append(want, line)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" || err != wantErr {
			t.Fatalf("err %v, want %v; lines differ from the reference (-want +got):\n%s", err, wantErr, diff)
		}
		oneByte, oneErr := readLines(iotest.OneByteReader(bytes.NewReader(in)), limit)
		if oneErr != err || !cmp.Equal(got, oneByte) {
			t.Fatalf("one-byte reads give %q, %v; whole reads %q, %v", oneByte, oneErr, got, err)
		}
	})
}
