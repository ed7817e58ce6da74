package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// hookServer is an httptest server answering with the next of its
// handlers at each request (the last one repeats), counting requests.
type hookServer struct {
	*httptest.Server
	mu       sync.Mutex
	handlers []http.HandlerFunc
	requests []*recordedRequest
}

type recordedRequest struct {
	method string
	header http.Header
	body   map[string]any
}

func newHookServer(t *testing.T, handlers ...http.HandlerFunc) *hookServer {
	t.Helper()
	s := &hookServer{handlers: handlers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := &recordedRequest{method: r.Method, header: r.Header.Clone()}
		json.Unmarshal(b, &rec.body)
		s.mu.Lock()
		i := min(len(s.requests), len(s.handlers)-1)
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		s.handlers[i](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *hookServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func reply(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func okJSON(body string) http.HandlerFunc { return reply(200, "application/json", body) }

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// inMemoryClient answers with the next of handlers at each request (the
// last one repeats) without a network, for tests in a synctest bubble,
// where time stands still while a request is served.
func inMemoryClient(handlers ...http.HandlerFunc) *http.Client {
	n := 0
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		handlers[min(n, len(handlers)-1)](rec, r)
		n++
		return rec.Result(), nil
	})}
}

// testWebhook returns a webhook whose waits are recorded, not slept.
func testWebhook(t *testing.T, h *Webhook) (*webhook, *[]time.Duration) {
	t.Helper()
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
	wh, err := newWebhook(h)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	wh.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return wh, &waits
}

var testRequest = &TaskRequest{SessionID: "s-1", Workflow: "shop", Stage: "cart", Task: "add_to_cart",
	Args: map[string]any{"product_id": "SKU-001"}, State: map[string]any{"user.email": "a@b.c"}}

func wantError(t *testing.T, err error, kind error, status int, detail string) {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) || !errors.Is(err, kind) {
		t.Fatalf("err = %v, want an *Error wrapping %v", err, kind)
	}
	if we.Status != status || we.Detail != detail {
		t.Errorf("got %d %q, want %d %q", we.Status, we.Detail, status, detail)
	}
}

func TestWebhookSuccess(t *testing.T) {
	srv := newHookServer(t, okJSON(`{"result": {"items": 2}, "state_updates": {"cart": {"SKU-001": 1}, "old": null}, "extra": "ignored"}`))
	wh, _ := testWebhook(t, &Webhook{URL: srv.URL + "/hook", Header: http.Header{"Authorization": {"Bearer tok"}}})
	resp, err := wh.run(context.Background(), testRequest)
	if err != nil {
		t.Fatal(err)
	}
	want := &TaskResponse{Result: map[string]any{"items": 2.0},
		StateUpdates: map[string]any{"cart": map[string]any{"SKU-001": 1.0}, "old": nil}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	rec := srv.requests[0]
	wantBody := map[string]any{"session_id": "s-1", "workflow": "shop", "stage": "cart", "task": "add_to_cart",
		"args": map[string]any{"product_id": "SKU-001"}, "state": map[string]any{"user.email": "a@b.c"}}
	if diff := cmp.Diff(wantBody, rec.body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if rec.method != "POST" || rec.header.Get("Authorization") != "Bearer tok" || rec.header.Get("Content-Type") != "application/json" {
		t.Errorf("request: %s %v", rec.method, rec.header)
	}
}

func TestWebhookNoContent(t *testing.T) {
	srv := newHookServer(t, reply(http.StatusNoContent, "", ""))
	wh, _ := testWebhook(t, &Webhook{URL: srv.URL})
	resp, err := wh.run(context.Background(), &TaskRequest{Task: "t"})
	if err != nil || resp.Result != nil || resp.StateUpdates != nil {
		t.Errorf("run = %+v, %v; want an empty response", resp, err)
	}
}

func TestWebhookClientError(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		detail  string
	}{
		{"json detail", reply(409, "application/json", `{"detail": "SKU-001 is out of stock"}`), "Task 'add_to_cart' failed: SKU-001 is out of stock"},
		{"structured detail", reply(422, "application/json", `{"detail": [{"loc": ["body", "quantity"], "msg": "too many"}]}`),
			`Task 'add_to_cart' failed: [{"loc":["body","quantity"],"msg":"too many"}]`},
		{"text", reply(400, "text/plain; charset=utf-8", "quantity must be\npositive\n"), "Task 'add_to_cart' failed: quantity must be positive"},
		{"html", reply(404, "text/html", "<html><body>Not here</body></html>"), "Task 'add_to_cart' failed: HTTP 404 Not Found"},
		{"json without detail", reply(403, "application/json", `{"error": "nope"}`), "Task 'add_to_cart' failed: HTTP 403 Forbidden"},
		{"long text", reply(400, "text/plain", strings.Repeat("é", 2000)), "Task 'add_to_cart' failed: " + strings.Repeat("é", 498) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newHookServer(t, tt.handler)
			wh, waits := testWebhook(t, &Webhook{URL: srv.URL, Idempotent: true})
			_, err := wh.run(context.Background(), testRequest)
			wantError(t, err, ErrTaskFailed, 422, tt.detail)
			if srv.count() != 1 || len(*waits) != 0 {
				t.Errorf("%d requests, waits %v; a 4xx is not retried", srv.count(), *waits)
			}
		})
	}
}

func TestWebhookServerErrorRetries(t *testing.T) {
	fail := reply(503, "text/plain", "down")
	t.Run("idempotent recovers", func(t *testing.T) {
		srv := newHookServer(t, fail, reply(500, "", ""), okJSON(`{"result": "ok"}`))
		wh, waits := testWebhook(t, &Webhook{URL: srv.URL, Idempotent: true})
		resp, err := wh.run(context.Background(), testRequest)
		if err != nil || resp.Result != "ok" {
			t.Fatalf("run = %+v, %v", resp, err)
		}
		if srv.count() != 3 || len(*waits) != 2 {
			t.Fatalf("%d requests, waits %v; want 3 and 2", srv.count(), *waits)
		}
		// Backoff with jitter: 250 ms then 500 ms, each between half and all of it.
		for i, base := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond} {
			if w := (*waits)[i]; w < base/2 || w > base {
				t.Errorf("wait %d = %v, want in [%v, %v]", i, w, base/2, base)
			}
		}
	})
	t.Run("idempotent gives up", func(t *testing.T) {
		srv := newHookServer(t, fail)
		u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1)
		wh, waits := testWebhook(t, &Webhook{URL: u, Idempotent: true, Retries: 4})
		_, err := wh.run(context.Background(), testRequest)
		wantError(t, err, ErrTaskUnavailable, 502, "Task 'add_to_cart' is unavailable: its webhook answered HTTP 503")
		if srv.count() != 5 || len(*waits) != 4 {
			t.Errorf("%d requests, %d waits; want 5 and 4", srv.count(), len(*waits))
		}
		if (*waits)[3] > 5*time.Second {
			t.Errorf("wait %v beyond the 5 s cap", (*waits)[3])
		}
	})
	t.Run("many retries", func(t *testing.T) {
		srv := newHookServer(t, fail)
		wh, waits := testWebhook(t, &Webhook{URL: srv.URL, Idempotent: true, Retries: 70})
		wh.run(context.Background(), testRequest)
		for i, w := range *waits {
			if w <= 0 || w > 5*time.Second {
				t.Fatalf("wait %d = %v, want in (0, 5s]", i, w)
			}
		}
	})
	t.Run("not idempotent", func(t *testing.T) {
		srv := newHookServer(t, fail)
		wh, _ := testWebhook(t, &Webhook{URL: srv.URL, Retries: 3})
		_, err := wh.run(context.Background(), testRequest)
		wantError(t, err, ErrTaskUnavailable, 502, "Task 'add_to_cart' is unavailable: its webhook answered HTTP 503")
		if srv.count() != 1 {
			t.Errorf("%d requests, want 1", srv.count())
		}
	})
	t.Run("retries disabled", func(t *testing.T) {
		srv := newHookServer(t, fail)
		wh, _ := testWebhook(t, &Webhook{URL: srv.URL, Idempotent: true, Retries: -1})
		wh.run(context.Background(), testRequest)
		if srv.count() != 1 {
			t.Errorf("%d requests, want 1", srv.count())
		}
	})
}

func TestWebhookRetryAfter(t *testing.T) {
	limited := func(after string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", after)
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}
	t.Run("seconds", func(t *testing.T) {
		srv := newHookServer(t, limited("3"), okJSON(`{}`))
		wh, waits := testWebhook(t, &Webhook{URL: srv.URL, Idempotent: true})
		if _, err := wh.run(context.Background(), testRequest); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]time.Duration{3 * time.Second}, *waits); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
	})
	t.Run("date", func(t *testing.T) {
		// In a bubble the clock starts on a whole second and stands still
		// while the answer comes: the wait is exactly the 4 s to the date.
		synctest.Test(t, func(t *testing.T) {
			hc := inMemoryClient(limited(time.Now().Add(4*time.Second).UTC().Format(http.TimeFormat)), okJSON(`{}`))
			wh, waits := testWebhook(t, &Webhook{URL: "http://hook.example/", Client: hc, Idempotent: true})
			if _, err := wh.run(t.Context(), testRequest); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]time.Duration{4 * time.Second}, *waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("too long", func(t *testing.T) {
		srv := newHookServer(t, limited("120"), okJSON(`{}`))
		wh, waits := testWebhook(t, &Webhook{URL: srv.URL, Idempotent: true})
		_, err := wh.run(context.Background(), testRequest)
		wantError(t, err, ErrTaskUnavailable, 502, "Task 'add_to_cart' is unavailable: its webhook answered HTTP 429")
		if srv.count() != 1 || len(*waits) != 0 {
			t.Errorf("%d requests, waits %v: a Retry-After beyond 10 s ends the retries", srv.count(), *waits)
		}
	})
	t.Run("beyond the deadline", func(t *testing.T) {
		// In a bubble, so that the 2 s left are 2 s however slow the
		// first request: over a network a loaded machine can spend them.
		synctest.Test(t, func(t *testing.T) {
			hc := inMemoryClient(limited("5"), okJSON(`{}`))
			wh, waits := testWebhook(t, &Webhook{URL: "http://hook.example/", Client: hc, Idempotent: true})
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err := wh.run(ctx, testRequest)
			wantError(t, err, ErrTaskUnavailable, 502, "Task 'add_to_cart' is unavailable: its webhook answered HTTP 429")
			if len(*waits) != 0 {
				t.Errorf("waited %v past the deadline", *waits)
			}
		})
	})
}

func TestWebhookTimeout(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	t.Run("attempt", func(t *testing.T) {
		// In a bubble: over a network a loaded machine can spend the 50 ms
		// before a request reaches the server, which then counts one.
		synctest.Test(t, func(t *testing.T) {
			sent := 0
			hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent++
				<-r.Context().Done()
				return nil, r.Context().Err()
			})}
			wh, _ := testWebhook(t, &Webhook{URL: "http://hook.example/", Client: hc, Timeout: 50 * time.Millisecond, Idempotent: true, Retries: 1})
			start := time.Now()
			_, err := wh.run(t.Context(), testRequest)
			wantError(t, err, ErrTaskUnavailable, 502, "Task 'add_to_cart' is unavailable: its webhook did not answer within 50ms")
			if sent != 2 {
				t.Errorf("%d requests, want 2 (a timeout is retried)", sent)
			}
			if d := time.Since(start); d != 2*50*time.Millisecond {
				t.Errorf("two attempts took %v, want 2 × 50ms", d)
			}
		})
	})
	t.Run("engine deadline", func(t *testing.T) {
		srv := newHookServer(t, hang)
		wh, _ := testWebhook(t, &Webhook{URL: srv.URL})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := wh.run(ctx, testRequest)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's error for the engine to report", err)
		}
	})
}

func TestWebhookInvalidResponse(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		detail  string
	}{
		{"not json", okJSON(`result: 1`), "its webhook's answer is invalid: not a JSON object"},
		{"array", okJSON(`[1, 2]`), "its webhook's answer is invalid: not a JSON object"},
		{"null", okJSON(`null`), "its webhook's answer is invalid: not a JSON object"},
		{"empty", okJSON(``), "its webhook's answer is invalid: not a JSON object"},
		{"truncated", okJSON(`{"result": 1`), "its webhook's answer is invalid: not a JSON object"},
		{"trailing data", okJSON(`{"result": 1} {"result": 2}`), "its webhook's answer is invalid: data after the JSON object"},
		{"state_updates array", okJSON(`{"result": 1, "state_updates": [1]}`), "its webhook's answer is invalid: state_updates is not an object"},
		{"state_updates string", okJSON(`{"state_updates": "x"}`), "its webhook's answer is invalid: state_updates is not an object"},
		{"oversized", okJSON(`{"result": "` + strings.Repeat("x", 1<<20) + `"}`), "its webhook's answer is larger than 1 MiB"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, "its webhook answered HTTP 302"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newHookServer(t, tt.handler)
			wh, _ := testWebhook(t, &Webhook{URL: srv.URL, Idempotent: true})
			_, err := wh.run(context.Background(), testRequest)
			wantError(t, err, ErrTaskUnavailable, 502, "Task 'add_to_cart' is unavailable: "+tt.detail)
			if srv.count() != 1 {
				t.Errorf("%d requests: an invalid answer is not retried", srv.count())
			}
		})
	}
}

func TestWebhookUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1)
	srv.Close()
	wh, waits := testWebhook(t, &Webhook{URL: url, Idempotent: true})
	_, err := wh.run(context.Background(), testRequest)
	wantError(t, err, ErrTaskUnavailable, 502, "Task 'add_to_cart' is unavailable: its webhook could not be reached")
	if len(*waits) != 2 {
		t.Errorf("waits %v, want 2 retries", *waits)
	}
}

func TestWebhookLogsFailures(t *testing.T) {
	var logs strings.Builder
	srv := newHookServer(t, reply(500, "", ""))
	u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1)
	wh, _ := testWebhook(t, &Webhook{URL: u, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	wh.run(context.Background(), testRequest)
	if !strings.Contains(logs.String(), "task=add_to_cart") || !strings.Contains(logs.String(), "HTTP 500") {
		t.Errorf("log = %q", logs.String())
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Errorf("log shows the password: %q", logs.String())
	}
}

func TestNewWebhookFuncChecks(t *testing.T) {
	tests := []struct {
		name string
		hook Webhook
		want string
	}{
		{"ftp", Webhook{URL: "ftp://h/x"}, "absolute http or https URL"},
		{"relative", Webhook{URL: "/hook"}, "absolute http or https URL"},
		{"no host", Webhook{URL: "http:///x"}, "absolute http or https URL"},
		{"GET", Webhook{URL: "http://h/", Method: "GET"}, `method must be POST, PUT or PATCH, not "GET"`},
		{"header name", Webhook{URL: "http://h/", Header: http.Header{"Bad Name": {"x"}}}, `invalid webhook header name "Bad Name"`},
		{"header value", Webhook{URL: "http://h/", Header: http.Header{"X-A": {"a\r\nB: c"}}}, "webhook header X-A has an invalid value"},
		{"timeout", Webhook{URL: "http://h/", Timeout: -time.Second}, "timeout must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewWebhookFunc(&tt.hook)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestWebhookThroughEngine checks the mapping the peer sees: the engine
// passes the webhook's *Error through.
func TestWebhookThroughEngine(t *testing.T) {
	srv := newHookServer(t, reply(409, "application/json", `{"detail": "Out of stock"}`))
	run, err := NewWebhookFunc(&Webhook{URL: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w := &Workflow{Name: "w", InitialStage: "s", Stages: map[string]*Stage{"s": {Tasks: map[string]*Task{
		"buy": {Description: "Buys.", Run: run}}}}}
	e := NewEngine(&webhookTestStore{}, &EngineOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := e.Register(w); err != nil {
		t.Fatal(err)
	}
	s, err := e.Initialize(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Execute(context.Background(), s.ID, &ExecuteRequest{WorkflowName: "w", Action: ActionMethodCall, Task: "buy"})
	wantError(t, err, ErrTaskFailed, 422, "Task 'buy' failed: Out of stock")
}

type webhookTestStore struct {
	mu sync.Mutex
	s  *Session
}

func (st *webhookTestStore) Create(_ context.Context, s *Session) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s = s.Clone()
	return nil
}

func (st *webhookTestStore) Get(context.Context, string) (*Session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.s == nil {
		return nil, ErrSessionNotFound
	}
	return st.s.Clone(), nil
}

func (st *webhookTestStore) Update(ctx context.Context, s *Session) error { return st.Create(ctx, s) }

func (st *webhookTestStore) Delete(context.Context, string) error { return nil }

func (st *webhookTestStore) DeleteExpired(context.Context, time.Time) (int, error) { return 0, nil }

// FuzzWebhookAnswer feeds arbitrary bodies to the decoders of webhook
// answers: no panics, accepted answers are JSON values, details are one
// short printable line.
func FuzzWebhookAnswer(f *testing.F) {
	for _, s := range []string{`{"result": 1, "state_updates": {"a": null}}`, `{"detail": "x"}`, `{"detail": [1]}`,
		`[1]`, `null`, `{"result": 1} x`, "text\x00\n", "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if resp, err := decodeWebhookResponse(data); err == nil {
			if _, err := json.Marshal(resp); err != nil {
				t.Errorf("accepted answer does not marshal: %v", err)
			}
		}
		for _, ct := range []string{"", "text/plain", "application/json"} {
			d := errorDetail(ct, data)
			if len(d) > maxWebhookDetail || !utf8.ValidString(d) || strings.ContainsFunc(d, unicode.IsControl) {
				t.Errorf("detail %q", d)
			}
		}
	})
}
