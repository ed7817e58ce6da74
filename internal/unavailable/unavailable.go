// Package unavailable marks the errors of a dependency that is down for
// now — the database of the store, most often — so that the protocol
// handlers answer 503 with Retry-After (retry later) instead of 500.
//
// A store wraps such an error with Wrap; a handler asks Is. The mark is
// an error type with an Unavailable method, so that packages which
// cannot import the store still see it through errors.As.
package unavailable

import "errors"

// RetryAfter is the Retry-After, in seconds, of the 503 answers.
const RetryAfter = "1"

// Error is a dependency's error marked as unavailability.
type Error struct{ Err error }

func (e *Error) Error() string { return "unavailable: " + e.Err.Error() }

// Unwrap returns the dependency's error.
func (e *Error) Unwrap() error { return e.Err }

// Unavailable reports that the error is one of unavailability.
func (e *Error) Unavailable() bool { return true }

// Wrap marks err as unavailability (nil stays nil; a marked error stays
// as it is).
func Wrap(err error) error {
	if err == nil || Is(err) {
		return err
	}
	return &Error{Err: err}
}

// Is reports whether err, or an error it wraps, is marked.
func Is(err error) bool {
	var u interface{ Unavailable() bool }
	return errors.As(err, &u) && u.Unavailable()
}
