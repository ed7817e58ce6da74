// Package wire is the HTTP plumbing the LLM providers share: key
// resolution, headers, per-attempt and idle timeouts, retries, response
// size limits and the mapping of HTTP failures to *llm.Error.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/envname"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/llm"
)

// MaxResponseSize bounds a non-streamed response body.
const MaxResponseSize = 64 << 20

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 1 << 20

var defaultClient = &http.Client{Transport: http.DefaultTransport}

// Client sends one provider's requests.
type Client struct {
	Provider       string
	Config         llm.ProviderConfig
	DefaultBaseURL string
	// EnvKeys are the environment variables tried for the key when
	// Config.APIKey is nil; empty means <PROVIDER>_API_KEY.
	EnvKeys []string
	// KeyOptional lets requests go without a key when none is configured
	// and the environment has none (local servers). A configured key
	// strategy that fails is still an error.
	KeyOptional bool
	// StreamAccept is the Accept header of streamed requests; empty means
	// text/event-stream.
	StreamAccept string
	// MaxResponse bounds a non-streamed response body; 0 means
	// MaxResponseSize.
	MaxResponse int64
	// RetryDelay extracts a vendor's retry delay from an error body, for
	// vendors that put it there instead of a Retry-After header; it is
	// used only when the header gives none.
	RetryDelay func(body []byte) time.Duration
	// Authorize sets the key on a request (e.g. "Authorization: Bearer").
	Authorize func(h http.Header, key string)
	// Headers are the provider's own headers; Config.Headers win over them.
	Headers map[string]string
	// ParseError extracts the vendor's message from an error body and may
	// refine the status-derived code (e.g. context length); nil keeps the
	// body's first bytes as the message.
	ParseError func(status int, body []byte) (message string, code llm.ErrorCode)
	// BaseURLHint, when set, is added to the message of a 404 whose body
	// is not the vendor's error (a base URL that leads nowhere), e.g. that
	// OpenAI-compatible servers serve under /v1.
	BaseURLHint string
}

// URL joins the base URL and path.
func (c *Client) URL(path string) string {
	base := c.Config.BaseURL
	if base == "" {
		base = c.DefaultBaseURL
	}
	return strings.TrimRight(base, "/") + path
}

// PostJSON posts body as JSON and returns the whole response body, retrying
// as the configured strategy allows.
func (c *Client) PostJSON(ctx context.Context, path string, body any) ([]byte, error) {
	rc, err := c.Open(ctx, http.MethodPost, path, body, false)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	limit := c.MaxResponse
	if limit <= 0 {
		limit = MaxResponseSize
	}
	tooLarge := llm.NewError(llm.InvalidResponse, c.Provider, fmt.Sprintf("response exceeds %d bytes", limit), nil)
	if b, ok := rc.(*respBody); ok && b.length > limit {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, c.readError(ctx, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge
	}
	return data, nil
}

// Open sends a request with a JSON body (nil for none) and returns the
// response body of a 2xx answer. For a stream, the body enforces the idle
// timeout between reads. Retries cover only getting the response: once the
// body is returned, no retry happens.
func (c *Client) Open(ctx context.Context, method, path string, body any, stream bool) (io.ReadCloser, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, llm.NewError(llm.InvalidRequest, c.Provider, "cannot encode request body", err)
		}
	}
	return DoWithRetry(ctx, c.Config.RetryStrategy, c.Config.RetryAfterMax, c.Provider,
		func(ctx context.Context) (io.ReadCloser, error) { return c.attempt(ctx, method, path, payload, stream) })
}

var (
	errHeaderTimeout = errors.New("no response within the timeout")
	errIdleTimeout   = errors.New("stream idle longer than the timeout")
)

func (c *Client) timeout() time.Duration {
	if c.Config.Timeout > 0 {
		return c.Config.Timeout
	}
	return DefaultTimeout
}

func (c *Client) attempt(ctx context.Context, method, path string, payload []byte, stream bool) (io.ReadCloser, error) {
	key, err := ResolveKey(ctx, c.Config.APIKey, c.Provider, c.EnvKeys...)
	if err != nil && (!c.KeyOptional || c.Config.APIKey != nil) {
		return nil, err
	}
	actx, cancel := context.WithCancelCause(ctx)
	var reqBody io.Reader
	if payload != nil {
		reqBody = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, method, c.URL(path), reqBody)
	if err != nil {
		cancel(nil)
		return nil, llm.NewError(llm.InvalidRequest, c.Provider, "invalid request URL", err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if stream {
		accept := c.StreamAccept
		if accept == "" {
			accept = "text/event-stream"
		}
		req.Header.Set("Accept", accept)
	} else {
		req.Header.Set("Accept", "application/json")
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	if key != "" && c.Authorize != nil {
		c.Authorize(req.Header, key)
	}
	for k, v := range c.Config.Headers {
		req.Header.Set(k, v)
	}
	telemetry.Inject(ctx, req.Header) // the chat span's traceparent
	hc := c.Config.HTTPClient
	if hc == nil {
		hc = defaultClient
	}
	timeout := c.timeout()
	timer := time.AfterFunc(timeout, func() { cancel(errHeaderTimeout) })
	resp, err := hc.Do(req)
	if !timer.Stop() && err == nil { // the timeout fired as the headers came in
		resp.Body.Close()
		err = errHeaderTimeout
	}
	if err != nil {
		cause := context.Cause(actx)
		cancel(nil)
		return nil, c.transportError(ctx, cause, err, req.URL)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel(nil)
		defer resp.Body.Close()
		return nil, c.statusError(resp, key)
	}
	b := &respBody{rc: resp.Body, cancel: cancel, ctx: actx, provider: c.Provider, length: resp.ContentLength}
	if stream {
		b.idle = time.AfterFunc(timeout, func() { cancel(errIdleTimeout) })
		b.timeout = timeout
	}
	return b, nil
}

func (c *Client) transportError(ctx context.Context, cause, err error, u *url.URL) *llm.Error {
	switch {
	case ctx.Err() != nil:
		return llm.AsError(ctx.Err(), c.Provider, llm.Cancelled)
	case errors.Is(cause, errHeaderTimeout), errors.Is(err, errHeaderTimeout):
		return llm.NewError(llm.Timeout, c.Provider, fmt.Sprintf("no response from %s within %s", displayURL(u), c.timeout()), err)
	}
	return llm.NewError(llm.NetworkError, c.Provider, fmt.Sprintf("cannot reach %s: %s", displayURL(u), networkCause(err)), err)
}

// displayURL shows a request's URL without a password, query or fragment
// (where a key could be).
func displayURL(u *url.URL) string {
	if u == nil {
		return "the provider"
	}
	v := *u
	v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = "", false, "", ""
	return v.Redacted()
}

// networkCause names why a request got no response, in words: connection
// refused, no such host, or the failing operation's own error.
func networkCause(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host " + dns.Name
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the method and URL, said already
	}
	return err.Error()
}

func (c *Client) readError(ctx context.Context, err error) *llm.Error {
	var e *llm.Error
	if errors.As(err, &e) {
		return e
	}
	if ctx.Err() != nil {
		return llm.AsError(ctx.Err(), c.Provider, llm.Cancelled)
	}
	return llm.NewError(llm.NetworkError, c.Provider, "reading response failed", err)
}

// ReadError normalizes an error met while reading a response body.
func (c *Client) ReadError(ctx context.Context, err error) *llm.Error { return c.readError(ctx, err) }

func (c *Client) statusError(resp *http.Response, key string) *llm.Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if key != "" { // some vendors echo a rejected key; messages never hold one
		data = bytes.ReplaceAll(data, []byte(key), []byte("[REDACTED]"))
	}
	code := CodeForStatus(resp.StatusCode)
	msg := ""
	if c.ParseError != nil {
		var refined llm.ErrorCode
		msg, refined = c.ParseError(resp.StatusCode, data)
		if refined != "" {
			code = refined
		}
	}
	switch {
	case msg == "" && resp.StatusCode == http.StatusNotFound:
		// Not the vendor's answer about a model: nothing is served there.
		msg = fmt.Sprintf("nothing is served at %s (%s): check the base URL", displayURL(resp.Request.URL), clipBody(data, 100, "404 Not Found"))
		if c.BaseURLHint != "" {
			msg += "; " + c.BaseURLHint
		}
	case msg == "":
		msg = clipBody(data, 500, http.StatusText(resp.StatusCode))
	}
	e := llm.NewError(code, c.Provider, msg, nil)
	e.StatusCode = resp.StatusCode
	e.RetryAfter = RetryAfter(resp.Header, time.Now())
	if e.RetryAfter == 0 && c.RetryDelay != nil {
		e.RetryAfter = max(c.RetryDelay(data), 0)
	}
	return e
}

// clipBody returns an error body's text cut to about n bytes, or
// otherwise when it is empty.
func clipBody(data []byte, n int, otherwise string) string {
	msg := strings.TrimSpace(string(data))
	if len(msg) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	if msg == "" {
		return otherwise
	}
	return msg
}

// RetryAfter parses a Retry-After header (seconds or HTTP date), also
// honouring the retry-after-ms header some vendors send. 0 when absent or
// invalid.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			if d := duration(ms, time.Millisecond); d > 0 {
				return d
			}
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return duration(s, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// duration converts n units to a Duration: 0 unless n is positive and
// finite, and saturated rather than overflowing (a float conversion out of
// range gives a negative Duration).
func duration(n float64, unit time.Duration) time.Duration {
	if math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 {
		return 0
	}
	if d := n * float64(unit); d < math.MaxInt64 {
		return time.Duration(d)
	}
	return math.MaxInt64
}

// respBody is a response body that releases its attempt's context on Close and,
// for streams, fails with TIMEOUT when no bytes arrive for the timeout.
type respBody struct {
	rc       io.ReadCloser
	cancel   context.CancelCauseFunc
	ctx      context.Context
	provider string
	idle     *time.Timer
	timeout  time.Duration
	length   int64 // Content-Length, -1 when unknown
	once     sync.Once
}

func (b *respBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.idle != nil && n > 0 {
		b.idle.Reset(b.timeout)
	}
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); errors.Is(cause, errIdleTimeout) {
			return n, llm.NewError(llm.Timeout, b.provider, fmt.Sprintf("stream idle for %s", b.timeout), err)
		}
	}
	return n, err
}

func (b *respBody) Close() error {
	b.once.Do(func() {
		if b.idle != nil {
			b.idle.Stop()
		}
	})
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// Lines reads newline-delimited records (NDJSON), each at most max bytes
// without its LF or CRLF.
type Lines struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewLines returns a line reader over r.
func NewLines(r io.Reader, max int) *Lines {
	return &Lines{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// ErrLineTooLong reports a record longer than the limit.
var ErrLineTooLong = errors.New("line exceeds size limit")

// Next returns the next non-blank line (without its CR/LF); io.EOF at the
// end. A final line without a newline is returned too. The slice is valid
// until the next call.
func (l *Lines) Next() ([]byte, error) {
	for {
		l.buf = l.buf[:0]
		for {
			chunk, err := l.r.ReadSlice('\n')
			if len(l.buf)+len(chunk) > l.max+2 {
				return nil, ErrLineTooLong
			}
			l.buf = append(l.buf, chunk...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			if err == io.EOF && len(l.buf) == 0 {
				return nil, io.EOF
			}
			break
		}
		line := bytes.TrimSuffix(bytes.TrimSuffix(l.buf, []byte("\n")), []byte("\r"))
		if len(line) > l.max {
			return nil, ErrLineTooLong
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

// ModelOptions reads a ModelReference's Options as a provider's options
// type T: nil gives T's zero value; T and *T are accepted; anything else is
// INVALID_REQUEST.
func ModelOptions[T any](provider string, v any) (T, error) {
	var opts T
	switch o := v.(type) {
	case nil:
	case T:
		opts = o
	case *T:
		if o != nil {
			opts = *o
		}
	default:
		return opts, llm.NewError(llm.InvalidRequest, provider, fmt.Sprintf("model options are %T, want %T", v, opts), nil)
	}
	return opts, nil
}

// DefaultTimeout is the per-attempt timeout used when
// ProviderConfig.Timeout is 0.
const DefaultTimeout = 120 * time.Second

// ResolveKey returns the key for one request: from the strategy when set,
// else from the environment variables named (default: envname.APIKey(provider)).
// A missing or empty key is AUTHENTICATION_FAILED; the error never contains
// a key.
func ResolveKey(ctx context.Context, strategy llm.KeyStrategy, provider string, envNames ...string) (string, error) {
	if strategy != nil {
		k, err := strategy.Key(ctx)
		if err != nil {
			return "", llm.NewError(llm.AuthenticationFailed, provider, "API key strategy failed", err)
		}
		if k == "" {
			return "", llm.NewError(llm.AuthenticationFailed, provider, "API key strategy returned an empty key", nil)
		}
		return k, nil
	}
	if len(envNames) == 0 {
		envNames = []string{envname.APIKey(provider)}
	}
	for _, name := range envNames {
		if k := os.Getenv(name); k != "" {
			return k, nil
		}
	}
	return "", llm.NewError(llm.AuthenticationFailed, provider,
		"no API key: set "+strings.Join(envNames, " or ")+" or ProviderConfig.APIKey", nil)
}

// CodeForStatus maps an HTTP status to an error code: the UPP table
// (400 INVALID_REQUEST, 401/403 AUTHENTICATION_FAILED, 404 MODEL_NOT_FOUND,
// 429 RATE_LIMITED, 5xx PROVIDER_ERROR) extended as the reference
// implementation does (402 QUOTA_EXCEEDED, 408 TIMEOUT, 409/422
// INVALID_REQUEST, 413 CONTEXT_LENGTH_EXCEEDED, 451 CONTENT_FILTERED).
// Any other 4xx is INVALID_REQUEST; anything else is PROVIDER_ERROR.
func CodeForStatus(status int) llm.ErrorCode {
	switch status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity:
		return llm.InvalidRequest
	case http.StatusUnauthorized, http.StatusForbidden:
		return llm.AuthenticationFailed
	case http.StatusPaymentRequired:
		return llm.QuotaExceeded
	case http.StatusNotFound:
		return llm.ModelNotFound
	case http.StatusRequestTimeout:
		return llm.Timeout
	case http.StatusRequestEntityTooLarge:
		return llm.ContextLengthExceeded
	case http.StatusTooManyRequests:
		return llm.RateLimited
	case http.StatusUnavailableForLegalReasons:
		return llm.ContentFiltered
	}
	if status >= 400 && status < 500 {
		return llm.InvalidRequest
	}
	return llm.ProviderError
}

// requestGate is an optional interface of an llm.RetryStrategy: BeforeRequest is
// called before every attempt and returns how long to wait first (token
// buckets use it to pace requests).
type requestGate interface {
	BeforeRequest() time.Duration
}

// resetter is an optional interface of an llm.RetryStrategy: Reset is called
// after a request succeeds.
type resetter interface {
	Reset()
}

// DoWithRetry runs attempt until it succeeds, fails with a non-retryable
// error, or strategy gives up. Errors are normalized to *llm.Error attributed
// to provider. The provider's RetryAfter is capped at retryAfterMax (0
// means 1 hour). Waits end early, with CANCELLED or TIMEOUT, when ctx ends.
func DoWithRetry[T any](ctx context.Context, strategy llm.RetryStrategy, retryAfterMax time.Duration, provider string, attempt func(ctx context.Context) (T, error)) (T, error) {
	if retryAfterMax == 0 {
		retryAfterMax = time.Hour
	}
	gate, _ := strategy.(requestGate)
	for n := 1; ; n++ {
		if gate != nil {
			if err := sleep(ctx, gate.BeforeRequest()); err != nil {
				var zero T
				return zero, llm.AsError(err, provider, llm.Cancelled)
			}
		}
		v, err := attempt(ctx)
		if err == nil {
			if r, ok := strategy.(resetter); ok {
				r.Reset()
			}
			return v, nil
		}
		e := llm.AsError(err, provider, llm.ProviderError)
		if ctx.Err() != nil || strategy == nil || !e.Code.Retryable() {
			return v, e
		}
		if e.RetryAfter > retryAfterMax {
			e.RetryAfter = retryAfterMax
		}
		delay, retry := strategy.OnRetry(e, n)
		if !retry {
			return v, e
		}
		if err := sleep(ctx, delay); err != nil {
			ce := llm.AsError(err, provider, llm.Cancelled)
			ce.Message += " while waiting to retry after: " + e.Error()
			return v, ce
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
