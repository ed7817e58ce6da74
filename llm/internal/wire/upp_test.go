package wire

// The retry loop, key resolution and status mapping the providers share
// (UPP-1.3 §4.2–§4.4).

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/envname"
	"github.com/agentry-dev/agentry/llm"
)

func rateLimited(after time.Duration) *llm.Error {
	e := llm.NewError(llm.RateLimited, "p", "slow down", nil)
	e.RetryAfter = after
	return e
}

func TestUPP_4_3_NoRetryByDefault(t *testing.T) {
	calls := 0
	_, err := DoWithRetry(context.Background(), nil, 0, "p", func(context.Context) (int, error) {
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
		_, err := DoWithRetry(context.Background(), llm.LinearBackoff{MaxRetries: 1, Delay: time.Microsecond}, 0, "p",
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
		v, err := DoWithRetry(context.Background(), llm.ExponentialBackoff{BaseDelay: time.Microsecond, NoJitter: true}, 0, "p",
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
	DoWithRetry(context.Background(), strategy, 5*time.Millisecond, "p", func(context.Context) (int, error) {
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
		_, err := DoWithRetry(ctx, llm.LinearBackoff{Delay: time.Hour}, 0, "p", func(context.Context) (int, error) {
			return 0, llm.NewError(llm.ProviderError, "p", "down", nil)
		})
		if d := time.Since(start); !errors.Is(err, llm.Timeout) || d != 20*time.Millisecond {
			t.Errorf("err %v after %v, want TIMEOUT after the context's 20ms", err, d)
		}
	})
}

func TestUPP_4_3_TokenBucketRetries(t *testing.T) {
	// In a bubble no time passes between the calls unless a test sleeps,
	// so the bucket's refill is exact.
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		_, err := DoWithRetry(context.Background(), llm.NewTokenBucket(1, 1000, 2), 0, "p", func(context.Context) (int, error) {
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

func TestUPP_4_4_HTTPStatusMapping(t *testing.T) {
	for status, want := range map[int]llm.ErrorCode{
		400: llm.InvalidRequest, 401: llm.AuthenticationFailed, 403: llm.AuthenticationFailed,
		404: llm.ModelNotFound, 429: llm.RateLimited, 500: llm.ProviderError, 502: llm.ProviderError,
		503: llm.ProviderError, 529: llm.ProviderError,
		// the reference implementation's extensions
		402: llm.QuotaExceeded, 408: llm.Timeout, 409: llm.InvalidRequest, 422: llm.InvalidRequest,
		413: llm.ContextLengthExceeded, 451: llm.ContentFiltered, 418: llm.InvalidRequest, 302: llm.ProviderError,
	} {
		if got := CodeForStatus(status); got != want {
			t.Errorf("CodeForStatus(%d) = %s, want %s", status, got, want)
		}
	}
}

func TestUPP_4_2_ResolveKey(t *testing.T) {
	ctx := context.Background()
	t.Setenv("ACME_CLOUD_API_KEY", "from-env")
	if envname.APIKey("acme-cloud") != "ACME_CLOUD_API_KEY" {
		t.Errorf("envname.APIKey = %s", envname.APIKey("acme-cloud"))
	}
	if k, err := ResolveKey(ctx, nil, "acme-cloud"); err != nil || k != "from-env" {
		t.Errorf("env key = %q, %v", k, err)
	}
	if k, _ := ResolveKey(ctx, llm.StaticKey("explicit"), "acme-cloud"); k != "explicit" {
		t.Errorf("explicit key lost to env: %q", k)
	}
	t.Setenv("ACME_CLOUD_API_KEY", "")
	_, err := ResolveKey(ctx, nil, "acme-cloud")
	if !errors.Is(err, llm.AuthenticationFailed) || !strings.Contains(err.Error(), "ACME_CLOUD_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
	failing := llm.KeyFunc(func(context.Context) (string, error) { return "", errors.New("vault down") })
	if _, err := ResolveKey(ctx, failing, "acme-cloud"); !errors.Is(err, llm.AuthenticationFailed) {
		t.Errorf("failing strategy: %v", err)
	}
	if _, err := ResolveKey(ctx, llm.StaticKey(""), "acme-cloud"); !errors.Is(err, llm.AuthenticationFailed) {
		t.Errorf("empty key: %v", err)
	}
}
