// Package ids issues the identifiers and timestamps every agentry package
// stamps on what it creates: random (version 4) UUIDs, and UTC times at
// millisecond precision — the resolution of the JSON forms the specs use —
// so that a value survives a JSON round trip unchanged.
package ids

import (
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Source produces IDs and times. Tests install a deterministic one with Set.
type Source interface {
	NewID() string
	Now() time.Time
}

type system struct{}

func (system) NewID() string { return uuid.NewString() }
func (system) Now() time.Time {
	return time.Now().UTC().Truncate(time.Millisecond)
}

var current atomic.Pointer[Source]

func init() {
	// Draw random bytes for UUIDs from crypto/rand in batches rather than
	// one read per ID (the IDs stay cryptographically random).
	uuid.EnableRandPool()
	var s Source = system{}
	current.Store(&s)
}

// New returns a new UUIDv4 in its canonical lowercase form.
func New() string { return (*current.Load()).NewID() }

// Now returns the current UTC time truncated to milliseconds.
func Now() time.Time { return (*current.Load()).Now() }

// Set installs s as the source and returns a function restoring the
// previous one. It is meant for tests.
func Set(s Source) (restore func()) {
	prev := current.Swap(&s)
	return func() { current.Store(prev) }
}

// Valid reports whether s is a UUID of version 4 in canonical form.
func Valid(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && len(s) == 36 && u.Version() == 4 && u.Variant() == uuid.RFC4122
}
