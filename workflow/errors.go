package workflow

import (
	"errors"
	"net/http"

	"github.com/agentry-dev/agentry/internal/unavailable"
)

// Error is a UAIP error: an HTTP status and the body's detail, plus
// machine-readable extras. Every error the engine returns is an *Error
// wrapping one of the sentinels below, so both errors.Is and errors.As
// work; the handler writes it as {"detail": …} with the extras.
type Error struct {
	Status int
	Detail string
	// Missing lists the state keys a stage's prerequisites lack (422).
	Missing []string `json:"missing,omitempty"`
	// Errors lists argument validation failures (422).
	Errors []FieldError `json:"errors,omitempty"`
	// Allowed lists what would have been valid: the current stage's tasks
	// or transitions (422).
	Allowed []string `json:"allowed,omitempty"`
	kind    error
	cause   error // logged for server-side failures, never sent
}

// FieldError is one failed schema check of task arguments.
type FieldError struct {
	Path    string `json:"path"` // JSON Pointer into the arguments
	Message string `json:"message"`
}

// Error returns Detail.
func (e *Error) Error() string { return e.Detail }

// String returns "path: message", or the message alone at the root.
func (f FieldError) String() string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + ": " + f.Message
}

// Unwrap returns the sentinel naming the condition.
func (e *Error) Unwrap() error { return e.kind }

// The error conditions (UAIP-0.1 "Errors", plus ours).
var (
	ErrBadRequest        = errors.New("invalid request")                 // 400
	ErrMissingSession    = errors.New("missing X-Session-Id header")     // 400
	ErrWorkflowNotFound  = errors.New("workflow not found")              // 404
	ErrSessionNotFound   = errors.New("session not found")               // 404
	ErrInvalidAction     = errors.New("invalid action type")             // 422
	ErrTaskNotInStage    = errors.New("task not in current stage")       // 422
	ErrInvalidTransition = errors.New("invalid stage transition")        // 422
	ErrPrerequisites     = errors.New("stage prerequisites missing")     // 422
	ErrInvalidArguments  = errors.New("invalid task arguments")          // 422
	ErrTaskFailed        = errors.New("task failed")                     // 422
	ErrConflict          = errors.New("session changed concurrently")    // 409
	ErrTooLarge          = errors.New("request body too large")          // 413
	ErrUnauthorized      = errors.New("unauthorized")                    // 401
	ErrTaskUnavailable   = errors.New("task implementation unavailable") // 502
	ErrInternal          = errors.New("internal error")                  // 500

	// errUnavailable: the session store cannot be reached now (503,
	// Retry-After).
	errUnavailable = errors.New("session store unavailable")
)

var statusOf = map[error]int{
	ErrBadRequest: http.StatusBadRequest, ErrMissingSession: http.StatusBadRequest,
	ErrWorkflowNotFound: http.StatusNotFound, ErrSessionNotFound: http.StatusNotFound,
	ErrInvalidAction: http.StatusUnprocessableEntity, ErrTaskNotInStage: http.StatusUnprocessableEntity,
	ErrInvalidTransition: http.StatusUnprocessableEntity, ErrPrerequisites: http.StatusUnprocessableEntity,
	ErrInvalidArguments: http.StatusUnprocessableEntity, ErrTaskFailed: http.StatusUnprocessableEntity,
	ErrConflict: http.StatusConflict, ErrTooLarge: http.StatusRequestEntityTooLarge,
	ErrUnauthorized: http.StatusUnauthorized, ErrTaskUnavailable: http.StatusBadGateway,
	ErrInternal: http.StatusInternalServerError, errUnavailable: http.StatusServiceUnavailable,
}

// TaskError returns the error a task implementation returns to report a
// business failure with exactly this detail (422, ErrTaskFailed); a plain
// error is reported as "Task 'name' failed: <error>".
func TaskError(detail string) *Error { return newError(ErrTaskFailed, detail) }

// newError returns an *Error of kind with the given detail.
func newError(kind error, detail string) *Error {
	return &Error{Status: statusOf[kind], Detail: detail, kind: kind}
}

// asError converts any error into an *Error; unknown errors are internal
// (their text is not shown to the peer).
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if unavailable.Is(err) {
		ue := newError(errUnavailable, "The session store is unavailable; retry shortly")
		ue.cause = err
		return ue
	}
	ie := newError(ErrInternal, "internal error")
	ie.cause = err
	return ie
}
