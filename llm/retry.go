package llm

import (
	"math/rand/v2"
	"sync"
	"time"
)

// RetryStrategy decides whether and when a failed request is retried
// (UPP-1.3 §4.3). It is consulted only for retryable codes
// (ErrorCode.Retryable): RATE_LIMITED, NETWORK_ERROR, TIMEOUT and
// PROVIDER_ERROR. A nil strategy never retries.
//
// A strategy value may be shared by many concurrent requests. A strategy
// may also have a method BeforeRequest() time.Duration, called before every
// attempt to learn how long to wait first (NewTokenBucket paces requests
// this way), and a method Reset(), called after a request succeeds.
type RetryStrategy interface {
	// OnRetry is called after failed attempt number attempt (1 for the
	// first); it returns the delay before the next attempt, or retry=false
	// to give up and return err.
	OnRetry(err *Error, attempt int) (delay time.Duration, retry bool)
}

// NoRetry never retries.
type NoRetry struct{}

// OnRetry returns false.
func (NoRetry) OnRetry(*Error, int) (time.Duration, bool) { return 0, false }

// ExponentialBackoff retries with exponentially growing, jittered delays:
// attempt n waits BaseDelay·2^(n-1), capped at MaxDelay, times a random
// factor in [0.5, 1) unless NoJitter. A longer Retry-After from the provider
// wins. The zero value is UPP's default: 3 retries, 1 s base, 30 s cap.
type ExponentialBackoff struct {
	MaxRetries int           // 0 means 3
	BaseDelay  time.Duration // 0 means 1 s
	MaxDelay   time.Duration // 0 means 30 s
	NoJitter   bool
}

// OnRetry implements RetryStrategy.
func (b ExponentialBackoff) OnRetry(err *Error, attempt int) (time.Duration, bool) {
	if attempt > orDefault(b.MaxRetries, 3) {
		return 0, false
	}
	base, maxd := orDefault(b.BaseDelay, time.Second), orDefault(b.MaxDelay, 30*time.Second)
	d := base
	for i := 1; i < attempt && d < maxd; i++ {
		d *= 2
	}
	d = min(d, maxd)
	if !b.NoJitter {
		d = time.Duration(float64(d) * (0.5 + rand.Float64()*0.5))
	}
	return max(d, err.RetryAfter), true
}

// LinearBackoff retries after Delay·attempt (a longer Retry-After wins).
// The zero value retries 3 times starting at 1 s.
type LinearBackoff struct {
	MaxRetries int           // 0 means 3
	Delay      time.Duration // 0 means 1 s
}

// OnRetry implements RetryStrategy.
func (b LinearBackoff) OnRetry(err *Error, attempt int) (time.Duration, bool) {
	if attempt > orDefault(b.MaxRetries, 3) {
		return 0, false
	}
	return max(orDefault(b.Delay, time.Second)*time.Duration(attempt), err.RetryAfter), true
}

// RetryAfter retries only when the provider said when (Retry-After), waiting
// exactly that long; without it, Fallback is used when set, else it gives up.
type RetryAfter struct {
	MaxRetries int // 0 means 3
	Fallback   time.Duration
}

// OnRetry implements RetryStrategy.
func (b RetryAfter) OnRetry(err *Error, attempt int) (time.Duration, bool) {
	if attempt > orDefault(b.MaxRetries, 3) {
		return 0, false
	}
	if err.RetryAfter > 0 {
		return err.RetryAfter, true
	}
	return b.Fallback, b.Fallback > 0
}

// tokenBucket paces requests: each attempt takes a token, tokens refill at
// Rate per second up to Capacity, and an attempt with no token waits for
// one. Failures are retried up to MaxRetries times after the provider's
// Retry-After, else after one token interval. It is safe for concurrent
// use.
type tokenBucket struct {
	capacity   float64
	rate       float64
	maxRetries int
	mu         sync.Mutex
	tokens     float64
	last       time.Time
	now        func() time.Time
}

// NewTokenBucket returns a strategy that paces requests: a full bucket of
// capacity tokens refilled at rate tokens per second, where each attempt
// takes a token and waits for one when the bucket is empty. Failures are
// retried up to maxRetries times after the provider's Retry-After, else
// after one token interval. It is safe for concurrent use.
func NewTokenBucket(capacity int, rate float64, maxRetries int) RetryStrategy {
	if capacity < 1 {
		capacity = 1
	}
	if rate <= 0 {
		rate = 1
	}
	return &tokenBucket{capacity: float64(capacity), rate: rate, maxRetries: maxRetries,
		tokens: float64(capacity), now: time.Now}
}

// BeforeRequest takes a token, returning how long to wait for it.
func (t *tokenBucket) BeforeRequest() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if !t.last.IsZero() {
		t.tokens = min(t.capacity, t.tokens+now.Sub(t.last).Seconds()*t.rate)
	}
	t.last = now
	t.tokens--
	if t.tokens >= 0 {
		return 0
	}
	return time.Duration(-t.tokens / t.rate * float64(time.Second))
}

// OnRetry implements RetryStrategy.
func (t *tokenBucket) OnRetry(err *Error, attempt int) (time.Duration, bool) {
	if attempt > t.maxRetries {
		return 0, false
	}
	return max(err.RetryAfter, time.Duration(float64(time.Second)/t.rate)), true
}

// Reset refills the bucket.
func (t *tokenBucket) Reset() {
	t.mu.Lock()
	t.tokens, t.last = t.capacity, time.Time{}
	t.mu.Unlock()
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
