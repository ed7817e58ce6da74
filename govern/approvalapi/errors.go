package approvalapi

import (
	"fmt"
	"net/http"

	"github.com/agentry-dev/agentry/govern"
)

// The error codes of the API, each with its HTTP status.
const (
	CodeBadRequest           = "BAD_REQUEST"                  // 400: malformed body or query
	CodeUnauthorized         = "UNAUTHORIZED"                 // 401: missing or wrong bearer token
	CodeApprovalInvalid      = string(govern.ApprovalInvalid) // 403: the approval token failed verification
	CodeNotFound             = "NOT_FOUND"                    // 404: no such approval request (or route)
	CodeMethodNotAllowed     = "METHOD_NOT_ALLOWED"           // 405
	CodeAlreadyDecided       = "ALREADY_DECIDED"              // 409: the request was decided before
	CodeTooLarge             = "PAYLOAD_TOO_LARGE"            // 413
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"       // 415: a POST body that is not application/json
	CodeInternal             = "INTERNAL"                     // 500: logged by the server, never detailed

	// codeUnavailable (503, with Retry-After): the journal cannot be
	// reached now; retry. (Unexported to keep the exported API within its
	// budget; the wire code is "UNAVAILABLE", as the runs API's.)
	codeUnavailable = "UNAVAILABLE"
)

// Error is an error answer of the API, as the handler writes it
// ({"error":{"code":…,"message":…}}) and the Client returns it. errors.Is
// maps its code back to govern's sentinels: APPROVAL_INVALID matches
// govern.ApprovalInvalid, NOT_FOUND govern.ErrUnknownApproval,
// ALREADY_DECIDED govern.ErrAlreadyDecided.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is one of the Code constants (or, from a server that did not
	// answer with this API's error body, "").
	Code string
	// Message says what went wrong, for people.
	Message string
}

// Error returns "approvalapi: CODE: MESSAGE (HTTP STATUS)", with the
// status text in place of an empty Code.
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("approvalapi: %s: %s (HTTP %d)", code, e.Message, e.Status)
}

// Is reports whether target is the govern sentinel of e's code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeApprovalInvalid:
		return target == govern.ApprovalInvalid
	case CodeNotFound:
		return target == govern.ErrUnknownApproval
	case CodeAlreadyDecided:
		return target == govern.ErrAlreadyDecided
	}
	return false
}

// errorBody is the wire form of an Error.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func newError(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

func badRequest(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf(format, args...))
}
