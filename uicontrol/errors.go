package uicontrol

import (
	"context"
	"errors"
	"fmt"
)

// Code is a UIAP error code (UIAP Core 0.1 §10). Extensions may define
// more; vendor codes are namespaced ("x.vendor.foo_error").
type Code string

// The error codes of UIAP Core 0.1 §10.
const (
	CodeBadRequest            Code = "bad_request"
	CodeInvalidMessage        Code = "invalid_message"
	CodeUnknownMessageType    Code = "unknown_message_type"
	CodeUnsupportedVersion    Code = "unsupported_version"
	CodeUnsupportedProfile    Code = "unsupported_profile"
	CodeUnsupportedExtension  Code = "unsupported_extension"
	CodeUnknownSession        Code = "unknown_session"
	CodeSessionNotActive      Code = "session_not_active"
	CodePermissionDenied      Code = "permission_denied"
	CodeCapabilityUnavailable Code = "capability_unavailable"
	CodeTimeout               Code = "timeout"
	CodeRateLimited           Code = "rate_limited"
	CodeStateConflict         Code = "state_conflict"
	CodeInternalError         Code = "internal_error"
)

// Error returns the code as written ("state_conflict"), so that a code
// formats as itself; it makes a code usable with errors.Is: every *Error
// unwraps to its code, so errors.Is(err, CodeStateConflict) works on
// what a call returns, whichever side produced the error.
func (c Code) Error() string { return string(c) }

// Error is a UIAP error: the payload of a kind="error" message
// (UIAPErrorPayload, §10). Errors a peer sends arrive as *Error; an app's
// HandlerFunc returns one to answer with that code. It unwraps to its
// Code, so errors.Is(err, CodeTimeout) matches it.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Retryable says the same request may succeed if sent again later.
	// Errors built with NewError set it for rate_limited only: a timed-out
	// request may have taken effect, so it is not blindly retryable.
	Retryable  bool           `json:"retryable,omitempty"`
	FailedType string         `json:"failedType,omitempty"`
	Details    map[string]any `json:"details,omitempty"`
}

// NewError returns an *Error with the code and message, retryable when
// the code is rate_limited.
func NewError(code Code, message string) *Error {
	return &Error{Code: code, Message: message, Retryable: code == CodeRateLimited}
}

// newErrorf is NewError with a formatted message.
func newErrorf(code Code, format string, args ...any) *Error {
	return NewError(code, fmt.Sprintf(format, args...))
}

// Error returns "uiap: CODE", followed by ": MESSAGE" when there is a
// message.
func (e *Error) Error() string {
	if e.Message == "" {
		return "uiap: " + string(e.Code)
	}
	return "uiap: " + string(e.Code) + ": " + e.Message
}

// Unwrap returns the error's code.
func (e *Error) Unwrap() error {
	if e.Code == "" {
		return nil
	}
	return e.Code
}

// with returns e with a detail added.
func (e *Error) with(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// wireError converts an error from application code into the error sent
// to the peer: an *Error as it is, a deadline as timeout, anything else
// as internal_error whose text stays local.
func wireError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return NewError(CodeTimeout, "request timed out")
	}
	return NewError(CodeInternalError, "internal error")
}
