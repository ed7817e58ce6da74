package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/telemetry"
)

// Webhook is an HTTP endpoint implementing a task; NewWebhookFunc turns
// it into a TaskFunc.
//
// Each call sends the TaskRequest as JSON, {"session_id", "workflow",
// "stage", "task", "args", "state"}, and expects a 2xx answer holding a
// JSON object {"result": …, "state_updates": {…}} (both optional, other
// fields ignored; 204 No Content means no result and no updates). Other
// answers become *Error:
//   - 4xx (but 408 and 429): ErrTaskFailed (422), its detail the
//     answer's JSON "detail" or its plain text, so an agent can see why
//     and adjust its call;
//   - 5xx, 408, 429, transport errors, per-attempt timeouts, redirects,
//     invalid or oversized (over 1 MiB) 2xx bodies: ErrTaskUnavailable
//     (502), whose detail names the task and never the URL.
//
// Idempotent calls are retried after transport errors, timeouts, 408,
// 429 and 5xx, with exponential backoff and jitter (250 ms doubling up to
// 5 s) or the answer's Retry-After when it asks for 10 s or less; a longer
// Retry-After, or a wait that would overrun ctx, ends the retries at once.
// The whole call, retries included, is bounded by ctx: the engine's task
// timeout.
type Webhook struct {
	// URL is the http or https URL called. Credentials in it are sent as
	// basic authentication and never shown in errors.
	URL string
	// Method is POST (the default), PUT or PATCH.
	Method string
	// Header holds extra request headers (Authorization, say).
	Header http.Header
	// Timeout bounds each attempt; 0 means 30 seconds.
	Timeout time.Duration
	// Retries is how many times an idempotent call is retried; 0 means 2,
	// a negative value none.
	Retries int
	// Idempotent allows retries; set Task.Idempotent alike.
	Idempotent bool
	// Client sends the requests; nil uses a shared client with bounded
	// dial, TLS and idle timeouts that does not follow redirects.
	Client *http.Client
	// Logger receives failed attempts; nil uses slog.Default().
	Logger *slog.Logger
}

const (
	defaultWebhookTimeout = 30 * time.Second
	defaultWebhookRetries = 2
	maxWebhookResponse    = 1 << 20
	maxWebhookDetail      = 1000 // bytes of a 4xx detail passed on
	webhookBackoff        = 250 * time.Millisecond
	maxWebhookBackoff     = 5 * time.Second
	maxRetryAfter         = 10 * time.Second
)

var webhookClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone() // proxy from environment, 30 s dial, 10 s TLS handshake
	t.MaxIdleConnsPerHost = 16
	t.ResponseHeaderTimeout = 0 // each attempt's context bounds it
	t.MaxResponseHeaderBytes = 64 << 10
	return &http.Client{
		Transport: t,
		// A redirected POST would turn into a GET; a webhook answers itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}()

type webhook struct {
	url        string
	method     string
	header     http.Header
	timeout    time.Duration
	retries    int
	idempotent bool
	client     *http.Client
	logger     *slog.Logger
	sleep      func(ctx context.Context, d time.Duration) error
}

// NewWebhookFunc returns a TaskFunc calling h (see Webhook). It checks h:
// an absolute http or https URL, a known method, valid headers. Later
// changes to h do not affect the function.
func NewWebhookFunc(h *Webhook) (TaskFunc, error) {
	wh, err := newWebhook(h)
	if err != nil {
		return nil, err
	}
	return wh.run, nil
}

func newWebhook(h *Webhook) (*webhook, error) {
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("webhook URL must be an absolute http or https URL")
	}
	wh := &webhook{url: u.String(), method: h.Method, header: h.Header.Clone(), timeout: h.Timeout,
		retries: h.Retries, idempotent: h.Idempotent, client: h.Client, logger: h.Logger, sleep: sleepCtx}
	switch wh.method {
	case "":
		wh.method = http.MethodPost
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil, fmt.Errorf("webhook method must be POST, PUT or PATCH, not %q", h.Method)
	}
	for k, vs := range wh.header {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("invalid webhook header name %q", k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return nil, fmt.Errorf("webhook header %s has an invalid value", k)
			}
		}
	}
	switch {
	case wh.timeout < 0:
		return nil, errors.New("webhook timeout must not be negative")
	case wh.timeout == 0:
		wh.timeout = defaultWebhookTimeout
	}
	switch {
	case !wh.idempotent || wh.retries < 0:
		wh.retries = 0
	case wh.retries == 0:
		wh.retries = defaultWebhookRetries
	}
	if wh.client == nil {
		wh.client = webhookClient
	}
	return wh, nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= 0x80 || !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attemptError is a failed attempt: the error to report and whether
// another attempt may succeed.
type attemptError struct {
	err        *Error
	retryable  bool
	retryAfter time.Duration // asked by the server; 0 if not
	log        string        // what went wrong, for the operator
}

func (h *webhook) run(ctx context.Context, req *TaskRequest) (*TaskResponse, error) {
	body, err := json.Marshal(webhookRequest(req))
	if err != nil {
		return nil, fmt.Errorf("encoding the webhook request: %w", err)
	}
	logger := h.logger
	if logger == nil {
		logger = slog.Default()
	}
	for attempt := 0; ; attempt++ {
		resp, fail := h.attempt(ctx, req.Task, body)
		if ctx.Err() != nil {
			return nil, ctx.Err() // the engine reports its own timeout or the caller's cancellation
		}
		if fail == nil {
			return resp, nil
		}
		if errors.Is(fail.err, ErrTaskUnavailable) { // a 4xx is the task's answer, not a fault
			logger.WarnContext(ctx, "workflow: webhook call failed", "workflow", req.Workflow, "task", req.Task,
				"attempt", attempt+1, "problem", fail.log)
		}
		if !fail.retryable || attempt >= h.retries {
			return nil, fail.err
		}
		wait := fail.retryAfter
		if wait == 0 {
			d := maxWebhookBackoff
			if attempt < 8 { // larger shifts overflow
				d = min(webhookBackoff<<attempt, maxWebhookBackoff)
			}
			wait = d/2 + rand.N(d/2+1) // jitter
		}
		if wait > maxRetryAfter {
			return nil, fail.err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, fail.err
		}
		if err := h.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// webhookRequest is the request body: the TaskRequest, with args and state
// always objects.
func webhookRequest(req *TaskRequest) *TaskRequest {
	r := *req
	if r.Args == nil {
		r.Args = map[string]any{}
	}
	if r.State == nil {
		r.State = map[string]any{}
	}
	return &r
}

func (h *webhook) attempt(ctx context.Context, task string, body []byte) (*TaskResponse, *attemptError) {
	unavailable := func(retryable bool, detail, log string) *attemptError {
		return &attemptError{err: newError(ErrTaskUnavailable, fmt.Sprintf("Task '%s' is unavailable: %s", task, detail)),
			retryable: retryable, log: log}
	}
	actx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, h.method, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, unavailable(false, "its webhook is misconfigured", err.Error())
	}
	for k, vs := range h.header {
		hreq.Header[http.CanonicalHeaderKey(k)] = vs
	}
	telemetry.Inject(actx, hreq.Header)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if hreq.Header.Get("User-Agent") == "" {
		hreq.Header.Set("User-Agent", "agentry-uaip-webhook")
	}
	res, err := h.client.Do(hreq)
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return nil, unavailable(true, fmt.Sprintf("its webhook did not answer within %s", h.timeout), err.Error())
		}
		return nil, unavailable(true, "its webhook could not be reached", err.Error())
	}
	defer func() {
		io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // lets the connection be reused
		res.Body.Close()
	}()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxWebhookResponse+1))
	status := fmt.Sprintf("HTTP %d", res.StatusCode)
	switch {
	case err != nil:
		if actx.Err() != nil && ctx.Err() == nil {
			return nil, unavailable(true, fmt.Sprintf("its webhook did not answer within %s", h.timeout), err.Error())
		}
		return nil, unavailable(true, "its webhook's answer was cut short", err.Error())
	case res.StatusCode == http.StatusRequestTimeout, res.StatusCode == http.StatusTooManyRequests, res.StatusCode >= 500:
		f := unavailable(true, "its webhook answered "+status, status)
		f.retryAfter = retryAfter(res.Header.Get("Retry-After"))
		return nil, f
	case res.StatusCode >= 400:
		detail := errorDetail(res.Header.Get("Content-Type"), data)
		if detail == "" {
			detail = strings.TrimSpace(fmt.Sprintf("%s %s", status, http.StatusText(res.StatusCode)))
		}
		return nil, &attemptError{err: newError(ErrTaskFailed, fmt.Sprintf("Task '%s' failed: %s", task, detail))}
	case res.StatusCode == http.StatusNoContent:
		return &TaskResponse{}, nil
	case res.StatusCode < 200 || res.StatusCode >= 300:
		return nil, unavailable(false, "its webhook answered "+status, status)
	case len(data) > maxWebhookResponse:
		return nil, unavailable(false, "its webhook's answer is larger than 1 MiB", "answer larger than 1 MiB")
	}
	resp, err := decodeWebhookResponse(data)
	if err != nil {
		return nil, unavailable(false, "its webhook's answer is invalid: "+err.Error(), err.Error())
	}
	return resp, nil
}

// decodeWebhookResponse reads {"result": …, "state_updates": {…}}: one
// JSON object, nothing after it.
func decodeWebhookResponse(data []byte) (*TaskResponse, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out struct {
		Result       any             `json:"result"`
		StateUpdates json.RawMessage `json:"state_updates"`
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&out); err != nil {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	resp := &TaskResponse{Result: out.Result}
	if len(out.StateUpdates) > 0 && !bytes.Equal(out.StateUpdates, []byte("null")) {
		if out.StateUpdates[0] != '{' {
			return nil, errors.New("state_updates is not an object")
		}
		if err := json.Unmarshal(out.StateUpdates, &resp.StateUpdates); err != nil {
			return nil, errors.New("state_updates is not an object")
		}
	}
	return resp, nil
}

// errorDetail extracts the reason of a 4xx answer: a JSON "detail" (a
// string, or other JSON shown compactly) or plain text; "" if neither.
func errorDetail(contentType string, data []byte) string {
	var detail string
	var body struct {
		Detail json.RawMessage `json:"detail"`
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case json.Unmarshal(data, &body) == nil && len(body.Detail) > 0 && string(body.Detail) != "null":
		if json.Unmarshal(body.Detail, &detail) != nil {
			var b bytes.Buffer
			if json.Compact(&b, body.Detail) == nil {
				detail = b.String()
			}
		}
	case mt == "text/plain", mt == "" && utf8.Valid(data) && !bytes.HasPrefix(bytes.TrimSpace(data), []byte("<")):
		detail = string(data)
	}
	return clip(detail, maxWebhookDetail)
}

// clip makes s one printable line of at most n bytes.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if s < 0 {
			return 0
		}
		if s > int(time.Hour/time.Second) {
			return time.Hour
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
