package uicontrol

import (
	"errors"
	"math"
	"sync"
	"time"
)

// RateLimit bounds the requests one session may send an App (§16:
// implementations SHOULD support rate limiting for incoming messages): a
// token bucket refilled at Rate tokens a second, holding at most Burst.
// Each request outside the session.* namespace takes a token; one that
// finds none is answered by rate_limited (retryable, with
// details.retryAfterMs). Session messages and action.cancel are never
// limited, so that a throttled peer can still ping, interrupt, terminate
// and stop what it started.
type RateLimit struct {
	// Rate is the sustained requests per second; 0 means no limit.
	Rate float64
	// Burst is how many requests may arrive at once; 0 means Rate
	// rounded up (at least 1).
	Burst int
}

// tokenBucket is one session's RateLimit. A nil bucket allows
// everything.
type tokenBucket struct {
	rate, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newTokenBucket(r RateLimit) *tokenBucket {
	if r.Rate <= 0 || math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) {
		return nil
	}
	burst := float64(r.Burst)
	if r.Burst <= 0 {
		burst = max(math.Ceil(r.Rate), 1)
	}
	return &tokenBucket{rate: r.Rate, burst: burst, tokens: burst, last: time.Now()}
}

// take takes a token at now; when there is none it reports how long
// until there will be one, rounded up to a millisecond.
func (b *tokenBucket) take(now time.Time) (time.Duration, bool) {
	if b == nil {
		return 0, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	ms := math.Ceil((1 - b.tokens) / b.rate * 1000)
	return time.Duration(min(max(ms, 1), float64(maxTimeoutMs))) * time.Millisecond, false
}

// rateLimited is the error answering a request over the limit.
func rateLimited(wait time.Duration) *Error {
	return NewError(CodeRateLimited, "too many requests in this session").with("retryAfterMs", wait.Milliseconds())
}

// RetryAfter returns the retry hint of a rate_limited error (its
// details.retryAfterMs), and whether err is one that carries it.
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRateLimited {
		return 0, false
	}
	var ms float64
	switch v := e.Details["retryAfterMs"].(type) {
	case float64:
		ms = v
	case int64:
		ms = float64(v)
	case int:
		ms = float64(v)
	default:
		return 0, false
	}
	if ms < 0 || ms > float64(maxTimeoutMs) {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}
