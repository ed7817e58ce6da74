package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Code is a UAMP error code (§9), written as in the spec: "4.01".
type Code string

// The error codes of §9, and three extensions (4.00, 4.15, 5.00) for the
// failures §9 has no row for; docs/spec-notes/uamp.md, "Error codes".
// A fourth, 5.02 (codeProducerDied), ends a stream whose producer died
// (package messaging, with Options.Streams).
const (
	CodeBadRequest           Code = "4.00" // extension: malformed envelope, delta or manifest
	CodeUnauthenticated      Code = "4.01"
	CodeUnauthorized         Code = "4.03"
	CodeMissingDeltaSeq      Code = "4.09" // also: a frame the request's state refuses
	CodePayloadTooLarge      Code = "4.13"
	CodeUnsupportedMediaType Code = "4.15" // extension
	CodeInternal             Code = "5.00" // extension
	CodeBusy                 Code = "5.04"

	// codeProducerDied is not exported: only package messaging writes it,
	// and a peer reads it as any code, from its message.
	codeProducerDied Code = "5.02"
)

// codeInfo is a code's row: its meaning, whether a sender may retry,
// and its HTTP status (DESIGN §5).
var codeInfo = map[Code]struct {
	text   string
	retry  bool
	status int
}{
	CodeBadRequest:           {"bad request", false, http.StatusBadRequest},
	CodeUnauthenticated:      {"unauthenticated", false, http.StatusUnauthorized},
	CodeUnauthorized:         {"unauthorized", false, http.StatusForbidden},
	CodeMissingDeltaSeq:      {"missing delta_seq", true, http.StatusConflict},
	CodePayloadTooLarge:      {"payload too large", false, http.StatusRequestEntityTooLarge},
	CodeUnsupportedMediaType: {"unsupported media type", false, http.StatusUnsupportedMediaType},
	CodeInternal:             {"internal error", false, http.StatusInternalServerError},
	CodeBusy:                 {"backend busy", true, http.StatusServiceUnavailable},
	codeProducerDied:         {"stream producer died", false, http.StatusBadGateway},
}

// HTTPStatus returns the HTTP status a binding answers c with (DESIGN
// §5): 4.01→401, 4.03→403, 4.09→409, 4.13→413, 5.04→503 (with
// Retry-After), and for the extensions 4.00→400, 4.15→415, 5.00→500,
// 5.02→502. An unknown code maps to 500.
func (c Code) HTTPStatus() int {
	if i, ok := codeInfo[c]; ok {
		return i.status
	}
	return http.StatusInternalServerError
}

// Retryable reports whether §9 lets a sender retry after c (4.09 and
// 5.04).
func (c Code) Retryable() bool { return codeInfo[c].retry }

// Error returns the code as written ("5.04"), so that a code formats as
// itself; it makes a code usable with errors.Is: errors.Is(err, CodeBusy)
// holds for every *Error with code 5.04.
func (c Code) Error() string { return string(c) }

// known reports whether c is one of the codes above.
func (c Code) known() bool {
	_, ok := codeInfo[c]
	return ok
}

// Error is a UAMP error in its wire form. Code, Message and Retry are
// what a peer sees (the body of an error envelope, DESIGN §5: {code,
// message, retry}); the cause it may wrap is for local logs only and is
// never written.
//
// errors.Is(err, CodeUnauthenticated) holds for every *Error with code
// 4.01, and likewise for the other codes; errors.As gives the *Error.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Retry   bool   `json:"retry"`
	// RetryAfter is how long the sender should wait (5.04); a binding
	// writes it as the Retry-After header. Zero: no advice.
	RetryAfter time.Duration `json:"-"`

	cause error
}

// Causes wrapped by some errors of this package, for callers that need
// more than the code.
var (
	// ErrReplayed: an envelope with the same (from, id) was accepted
	// within the replay window (code 4.01).
	ErrReplayed = errors.New("envelope replayed")
	// ErrKeyNotFound is what a KeyResolver returns for a kid it does not
	// know (code 4.01).
	ErrKeyNotFound = errors.New("key not found")
	// ErrTerminal: the request is already completed, cancelled or failed
	// (code 4.09, not retryable).
	ErrTerminal = errors.New("request is in a terminal state")
)

// NewError returns an *Error with code c, the peer-visible message msg
// and Retry as §9 says for c. cause, which may be nil, is kept for
// errors.Is/As and local logs only.
func NewError(c Code, msg string, cause error) *Error {
	if msg == "" {
		msg = codeInfo[c].text
	}
	return &Error{Code: c, Message: msg, Retry: c.Retryable(), cause: cause}
}

// Error returns "uamp CODE: MESSAGE", followed by the cause's text unless
// the message already begins with it.
func (e *Error) Error() string {
	s := "uamp " + string(e.Code) + ": " + e.Message
	if e.cause != nil && !strings.HasPrefix(e.cause.Error(), strings.TrimSuffix(e.Message, "…")) {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is e's code, or an *Error with the same
// code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return t == e.Code
	case *Error:
		return t.Code == e.Code
	}
	return false
}

// HTTPStatus is e.Code.HTTPStatus().
func (e *Error) HTTPStatus() int { return e.Code.HTTPStatus() }

// AsError returns err as an *Error for a peer: err itself when it is or
// wraps one, otherwise 5.00 with a generic message (the text of err stays
// local, as its cause). AsError(nil) is nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return NewError(CodeInternal, "", err)
}

// errorBodyType is the body type of an error envelope (DESIGN §5).
const errorBodyType = "application/json"

// NewErrorEnvelope returns an unsigned error envelope from from to to,
// answering the envelope replyTo (which may be empty), whose body
// carries err's wire form {code, message, retry} (DESIGN §5).
func NewErrorEnvelope(from string, to []string, replyTo string, err *Error) *Envelope {
	b, _ := json.Marshal(err) // a struct of strings and a bool
	e := New(from, to, IntentError, Body{Type: errorBodyType, Content: string(b)})
	e.ReplyTo = replyTo
	return e
}

// ParseErrorBody reads the *Error an error envelope's body carries. A
// code it does not know is kept as is.
func ParseErrorBody(b Body) (*Error, error) {
	if b.Type != errorBodyType {
		return nil, fmt.Errorf("envelope: error body type %q is not %s", b.Type, errorBodyType)
	}
	tree, err := parseStrict([]byte(b.Content), MaxEnvelopeSize)
	if err != nil {
		return nil, fmt.Errorf("envelope: error body: %w", err)
	}
	m, ok := tree.(map[string]any)
	code, ok1 := m["code"].(string)
	msg, ok2 := m["message"].(string)
	retry, ok3 := m["retry"].(bool)
	if !ok || !ok1 || !ok2 || !ok3 {
		return nil, errors.New(`envelope: error body is not {"code","message","retry"}`)
	}
	return &Error{Code: Code(code), Message: msg, Retry: retry}, nil
}
