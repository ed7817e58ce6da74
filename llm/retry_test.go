package llm_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/llm"
)

func rateLimited(after time.Duration) *llm.Error {
	e := llm.NewError(llm.RateLimited, "p", "slow down", nil)
	e.RetryAfter = after
	return e
}

func TestUPP_4_3_NoRetryByDefault(t *testing.T) {
	calls := 0
	_, err := llm.DoWithRetry(context.Background(), nil, 0, "p", func(context.Context) (int, error) {
		calls++
		return 0, rateLimited(0)
	})
	if calls != 1 || !errors.Is(err, llm.RateLimited) {
		t.Errorf("calls %d, err %v", calls, err)
	}
}

func TestUPP_4_3_OnlyRetryableCodesAreRetried(t *testing.T) {
	for _, code := range llm.ErrorCodes {
		calls := 0
		_, err := llm.DoWithRetry(context.Background(), llm.LinearBackoff{MaxRetries: 1, Delay: time.Microsecond}, 0, "p",
			func(context.Context) (int, error) {
				calls++
				return 0, llm.NewError(code, "p", "x", nil)
			})
		want := 1
		if code.Retryable() {
			want = 2
		}
		if calls != want || !errors.Is(err, code) {
			t.Errorf("%s: %d calls, err %v; want %d calls", code, calls, err, want)
		}
	}
}

func TestUPP_4_3_RetryToSuccessHonouringRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		v, err := llm.DoWithRetry(context.Background(), llm.ExponentialBackoff{BaseDelay: time.Microsecond, NoJitter: true}, 0, "p",
			func(context.Context) (string, error) {
				calls++
				if calls < 3 {
					return "", rateLimited(20 * time.Millisecond)
				}
				return "ok", nil
			})
		if err != nil || v != "ok" || calls != 3 {
			t.Fatalf("v %q, err %v, calls %d", v, err, calls)
		}
		// Two waits of the provider's 20 ms, longer than the backoff's.
		if d, want := time.Since(start), 40*time.Millisecond; d != want {
			t.Errorf("finished after %v, want %v: Retry-After not honoured", d, want)
		}
	})
}

func TestUPP_4_3_RetryAfterIsCapped(t *testing.T) {
	var seen time.Duration
	strategy := retryFunc(func(err *llm.Error, attempt int) (time.Duration, bool) {
		seen = err.RetryAfter
		return 0, attempt < 2
	})
	llm.DoWithRetry(context.Background(), strategy, 5*time.Millisecond, "p", func(context.Context) (int, error) {
		return 0, rateLimited(time.Hour)
	})
	if seen != 5*time.Millisecond {
		t.Errorf("strategy saw RetryAfter %v, want the 5ms cap", seen)
	}
}

type retryFunc func(*llm.Error, int) (time.Duration, bool)

func (f retryFunc) OnRetry(e *llm.Error, n int) (time.Duration, bool) { return f(e, n) }

func TestUPP_4_3_WaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := llm.DoWithRetry(ctx, llm.LinearBackoff{Delay: time.Hour}, 0, "p", func(context.Context) (int, error) {
			return 0, llm.NewError(llm.ProviderError, "p", "down", nil)
		})
		if d := time.Since(start); !errors.Is(err, llm.Timeout) || d != 20*time.Millisecond {
			t.Errorf("err %v after %v, want TIMEOUT after the context's 20ms", err, d)
		}
	})
}

func TestUPP_4_3_StrategyDelays(t *testing.T) {
	plain := llm.NewError(llm.ProviderError, "p", "x", nil)
	exp := llm.ExponentialBackoff{NoJitter: true}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second} {
		if d, ok := exp.OnRetry(plain, attempt); !ok || d != want {
			t.Errorf("exponential attempt %d: %v %v, want %v", attempt, d, ok, want)
		}
	}
	if _, ok := exp.OnRetry(plain, 4); ok {
		t.Error("exponential retried past 3 retries")
	}
	capped := llm.ExponentialBackoff{MaxRetries: 20, NoJitter: true}
	if d, _ := capped.OnRetry(plain, 10); d != 30*time.Second {
		t.Errorf("cap: %v", d)
	}
	jitter := llm.ExponentialBackoff{}
	for range 100 {
		d, _ := jitter.OnRetry(plain, 2)
		if d < time.Second || d >= 2*time.Second {
			t.Fatalf("jittered delay %v outside [1s, 2s)", d)
		}
	}
	if d, _ := exp.OnRetry(rateLimited(10*time.Second), 1); d != 10*time.Second {
		t.Errorf("longer Retry-After ignored: %v", d)
	}
	lin := llm.LinearBackoff{Delay: 100 * time.Millisecond}
	if d, _ := lin.OnRetry(plain, 3); d != 300*time.Millisecond {
		t.Errorf("linear: %v", d)
	}
	ra := llm.RetryAfter{}
	if _, ok := ra.OnRetry(plain, 1); ok {
		t.Error("RetryAfter retried without a Retry-After or fallback")
	}
	if d, ok := ra.OnRetry(rateLimited(3*time.Second), 1); !ok || d != 3*time.Second {
		t.Errorf("RetryAfter: %v %v", d, ok)
	}
	if _, ok := (llm.NoRetry{}).OnRetry(plain, 1); ok {
		t.Error("NoRetry retried")
	}
}

func TestUPP_4_3_TokenBucketPaces(t *testing.T) {
	// In a bubble no time passes between the calls unless a test sleeps,
	// so the bucket's refill is exact.
	synctest.Test(t, func(t *testing.T) {
		tb := llm.NewTokenBucket(2, 1000, 1).(*llm.TokenBucket) // 2 tokens, 1 per ms
		if tb.BeforeRequest() != 0 || tb.BeforeRequest() != 0 {
			t.Error("a full bucket made a request wait")
		}
		if d := tb.BeforeRequest(); d != time.Millisecond {
			t.Errorf("empty bucket wait = %v, want 1ms", d)
		}
		time.Sleep(3 * time.Millisecond) // refills the 2 tokens, and the one owed
		if d := tb.BeforeRequest(); d != 0 {
			t.Errorf("wait after a refill = %v, want 0", d)
		}
		tb.Reset()
		if tb.BeforeRequest() != 0 {
			t.Error("Reset did not refill")
		}
		calls := 0
		start := time.Now()
		_, err := llm.DoWithRetry(context.Background(), llm.NewTokenBucket(1, 1000, 2), 0, "p", func(context.Context) (int, error) {
			calls++
			if calls < 3 {
				return 0, llm.NewError(llm.NetworkError, "p", "x", nil)
			}
			return 1, nil
		})
		if err != nil || calls != 3 {
			t.Errorf("token bucket retries: %d calls, %v", calls, err)
		}
		// Each retry waits one token interval, which refills the token.
		if d, want := time.Since(start), 2*time.Millisecond; d != want {
			t.Errorf("retries took %v, want %v", d, want)
		}
	})
}
