package llm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrorCode is one of the twelve normalized UPP error codes (UPP-1.3 §4.4).
//
// An ErrorCode is itself an error, so it serves as the sentinel for its code:
//
//	if errors.Is(err, llm.RateLimited) { … }
//
// matches any *Error carrying that code.
type ErrorCode string

// The UPP error codes.
const (
	AuthenticationFailed  ErrorCode = "AUTHENTICATION_FAILED"
	RateLimited           ErrorCode = "RATE_LIMITED"
	ContextLengthExceeded ErrorCode = "CONTEXT_LENGTH_EXCEEDED"
	ModelNotFound         ErrorCode = "MODEL_NOT_FOUND"
	InvalidRequest        ErrorCode = "INVALID_REQUEST"
	InvalidResponse       ErrorCode = "INVALID_RESPONSE"
	ContentFiltered       ErrorCode = "CONTENT_FILTERED"
	QuotaExceeded         ErrorCode = "QUOTA_EXCEEDED"
	ProviderError         ErrorCode = "PROVIDER_ERROR"
	NetworkError          ErrorCode = "NETWORK_ERROR"
	Timeout               ErrorCode = "TIMEOUT"
	Cancelled             ErrorCode = "CANCELLED"
)

// ErrorCodes lists every UPP error code in specification order.
var ErrorCodes = []ErrorCode{
	AuthenticationFailed, RateLimited, ContextLengthExceeded, ModelNotFound,
	InvalidRequest, InvalidResponse, ContentFiltered, QuotaExceeded,
	ProviderError, NetworkError, Timeout, Cancelled,
}

// Error returns the code itself, so a code can be used as a sentinel error.
func (c ErrorCode) Error() string { return string(c) }

// Retryable reports whether a request that failed with this code may be
// retried by a RetryStrategy: RATE_LIMITED, NETWORK_ERROR, TIMEOUT and
// PROVIDER_ERROR. Every other code is final.
func (c ErrorCode) Retryable() bool {
	switch c {
	case RateLimited, NetworkError, Timeout, ProviderError:
		return true
	}
	return false
}

// Modality names the UPP interface an error came from (UPP-1.3 §15.3).
type Modality string

// The UPP modalities.
const (
	ModalityLLM       Modality = "llm"
	ModalityEmbedding Modality = "embedding"
	ModalityImage     Modality = "image"
)

// Error is UPPError: every failure of the llm package and its providers is
// normalized to an *Error (UPP-1.3 §4.4).
//
// errors.Is(err, code) matches on Code; errors.Unwrap returns Cause.
type Error struct {
	Message    string    // human-readable description, never containing an API key
	Code       ErrorCode // normalized code
	Provider   string    // provider name, e.g. "anthropic"
	Modality   Modality  // always ModalityLLM in this package
	StatusCode int       // HTTP status, 0 when the failure was not an HTTP response
	Cause      error     // underlying error, if any
	// RetryAfter is the delay the provider asked for (Retry-After header or
	// equivalent), 0 when it gave none. Retry strategies honour it.
	RetryAfter time.Duration
}

// Error returns "PROVIDER: CODE: MESSAGE", with " (HTTP STATUS)" after the
// code when StatusCode is set; PROVIDER defaults to "llm" and MESSAGE to
// the cause's text.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Cause != nil {
		msg = e.Cause.Error()
	}
	p := e.Provider
	if p == "" {
		p = "llm"
	}
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s: %s (HTTP %d): %s", p, e.Code, e.StatusCode, msg)
	}
	return fmt.Sprintf("%s: %s: %s", p, e.Code, msg)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is this error's code.
func (e *Error) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && c == e.Code
}

// NewError returns an *Error for the llm modality.
func NewError(code ErrorCode, provider, message string, cause error) *Error {
	return &Error{Message: message, Code: code, Provider: provider, Modality: ModalityLLM, Cause: cause}
}

// AsError converts any error to an *Error attributed to provider: an *Error
// is returned unchanged, context cancellation becomes CANCELLED, an exceeded
// deadline TIMEOUT, and anything else fallback.
func AsError(err error, provider string, fallback ErrorCode) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.Canceled):
		return NewError(Cancelled, provider, "request cancelled", err)
	case errors.Is(err, context.DeadlineExceeded):
		return NewError(Timeout, provider, "request timed out", err)
	}
	return NewError(fallback, provider, err.Error(), err)
}
