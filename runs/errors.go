package runs

import (
	"errors"
	"net/http"

	"github.com/agentry-dev/agentry/internal/unavailable"
)

// Code is the code of a runs error. A Code is itself an error, the
// sentinel for its code:
//
//	if errors.Is(err, runs.UnknownRun) { … }
//
// matches any *Error carrying that code. Over HTTP the code is the
// "code" of the error body, with the status its constant's comment
// names.
type Code string

// The error codes.
const (
	// InvalidParams: a parameter or body is malformed (400).
	InvalidParams Code = "BAD_REQUEST"
	// TooLarge: a request body is larger than 64 << 10 (413).
	TooLarge Code = "TOO_LARGE"
	// UnknownRun: no run has that request ID (404).
	UnknownRun Code = "UNKNOWN_RUN"
	// UnknownAgent: the service runs no agent of that name (404).
	UnknownAgent Code = "UNKNOWN_AGENT"
	// RunFinished: the run already delivered or failed safe, so it
	// cannot be cancelled (409).
	RunFinished Code = "RUN_FINISHED"
	// RunElsewhere: the run is executing in another process sharing
	// the journal, which alone can cancel it (409).
	RunElsewhere Code = "RUN_ELSEWHERE"
	// Unavailable: the service is shutting down (503).
	Unavailable Code = "UNAVAILABLE"
	// Internal: the service failed (500); the cause is logged, never
	// sent to a peer.
	Internal Code = "INTERNAL"
)

// Error returns the code.
func (c Code) Error() string { return string(c) }

var statusOf = map[Code]int{
	InvalidParams: http.StatusBadRequest, TooLarge: http.StatusRequestEntityTooLarge,
	UnknownRun: http.StatusNotFound, UnknownAgent: http.StatusNotFound,
	RunFinished: http.StatusConflict, RunElsewhere: http.StatusConflict,
	Unavailable: http.StatusServiceUnavailable, Internal: http.StatusInternalServerError,
}

// Error is a failure of the run service: a code, a message fit for a
// peer, and the cause (for logs only). errors.Is matches its Code and
// its cause.
type Error struct {
	Code    Code
	Message string
	// RequestID names the run the error is about, when there is one.
	RequestID string
	Err       error
}

// Error returns "runs: CODE: MESSAGE".
func (e *Error) Error() string {
	if e.Message == "" {
		return "runs: " + string(e.Code)
	}
	return "runs: " + string(e.Code) + ": " + e.Message
}

// Is reports whether target is e's Code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func newError(code Code, requestID, message string, cause error) *Error {
	return &Error{Code: code, Message: message, RequestID: requestID, Err: cause}
}

// wireError returns what a peer may see of err: its code and message
// when it is an *Error (Internal's message is generic), else Internal.
func wireError(err error) (status int, code Code, message string) {
	var e *Error
	if unavailable.Is(err) && (!errors.As(err, &e) || e.Code == Internal) {
		return http.StatusServiceUnavailable, Unavailable, "the store is unavailable; retry shortly"
	}
	if !errors.As(err, &e) || e.Code == Internal {
		return http.StatusInternalServerError, Internal, "internal error"
	}
	status, ok := statusOf[e.Code]
	if !ok {
		return http.StatusInternalServerError, Internal, "internal error"
	}
	return status, e.Code, e.Message
}
