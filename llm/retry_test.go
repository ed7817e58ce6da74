package llm_test

import (
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
	})
}
