package llm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentry-dev/agentry/llm"
)

func TestUPP_4_4_TwelveCodes(t *testing.T) {
	want := []string{"AUTHENTICATION_FAILED", "RATE_LIMITED", "CONTEXT_LENGTH_EXCEEDED", "MODEL_NOT_FOUND",
		"INVALID_REQUEST", "INVALID_RESPONSE", "CONTENT_FILTERED", "QUOTA_EXCEEDED", "PROVIDER_ERROR",
		"NETWORK_ERROR", "TIMEOUT", "CANCELLED"}
	if len(llm.ErrorCodes) != len(want) {
		t.Fatalf("%d codes", len(llm.ErrorCodes))
	}
	for i, c := range llm.ErrorCodes {
		if string(c) != want[i] {
			t.Errorf("code %d = %s, want %s", i, c, want[i])
		}
		retryable := c == llm.RateLimited || c == llm.NetworkError || c == llm.Timeout || c == llm.ProviderError
		if c.Retryable() != retryable {
			t.Errorf("%s.Retryable() = %v", c, c.Retryable())
		}
	}
}

func TestUPP_4_4_ErrorFieldsAndMatching(t *testing.T) {
	cause := errors.New("connection reset")
	e := llm.NewError(llm.NetworkError, "anthropic", "request failed", cause)
	e.StatusCode = 0
	wrapped := fmt.Errorf("outer: %w", e)
	if !errors.Is(wrapped, llm.NetworkError) || errors.Is(wrapped, llm.Timeout) {
		t.Error("errors.Is does not match on the code")
	}
	if !errors.Is(wrapped, cause) {
		t.Error("cause not reachable through Unwrap")
	}
	var got *llm.Error
	if !errors.As(wrapped, &got) || got.Provider != "anthropic" || got.Modality != llm.ModalityLLM {
		t.Errorf("errors.As = %+v", got)
	}
	e2 := &llm.Error{Code: llm.RateLimited, Provider: "openai", StatusCode: 429, Message: "slow down"}
	if s := e2.Error(); s != "openai: RATE_LIMITED (HTTP 429): slow down" {
		t.Errorf("Error() = %q", s)
	}
}

func TestAsError(t *testing.T) {
	if e := llm.AsError(context.Canceled, "p", llm.ProviderError); e.Code != llm.Cancelled {
		t.Errorf("Canceled → %s", e.Code)
	}
	if e := llm.AsError(fmt.Errorf("x: %w", context.DeadlineExceeded), "p", llm.ProviderError); e.Code != llm.Timeout {
		t.Errorf("DeadlineExceeded → %s", e.Code)
	}
	orig := llm.NewError(llm.QuotaExceeded, "p", "m", nil)
	if e := llm.AsError(fmt.Errorf("wrapped: %w", orig), "q", llm.ProviderError); e != orig {
		t.Error("an *Error was not returned unchanged")
	}
	if e := llm.AsError(errors.New("odd"), "p", llm.InvalidResponse); e.Code != llm.InvalidResponse || e.Provider != "p" {
		t.Errorf("fallback → %+v", e)
	}
	if llm.AsError(nil, "p", llm.ProviderError) != nil {
		t.Error("nil error converted")
	}
}
