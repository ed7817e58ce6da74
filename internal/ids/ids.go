// Package ids issues the identifiers and timestamps every agentry package
// stamps on what it creates: random (version 4) UUIDs, and UTC times at
// millisecond precision — the resolution of the JSON forms the specs use —
// so that a value survives a JSON round trip unchanged.
package ids

import (
	"crypto/rand"
	"sync"
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

func (system) NewID() string { return newV4() }

// randPool holds random bytes from crypto/rand, read 16 UUIDs at a time
// (as google/uuid's rand pool does) rather than one read per ID.
var randPool struct {
	mu  sync.Mutex
	buf [16 * 16]byte
	pos int // next unused byte; len(buf) when empty
}

func init() { randPool.pos = len(randPool.buf) }

// newV4 returns a random (version 4, RFC 4122 variant) UUID in canonical
// form: what uuid.NewString returns, drawn from crypto/rand the same way,
// formatted without its intermediate copies.
func newV4() string {
	var u [16]byte
	randPool.mu.Lock()
	if randPool.pos == len(randPool.buf) {
		rand.Read(randPool.buf[:]) // never fails (crypto/rand crashes the program instead)
		randPool.pos = 0
	}
	copy(u[:], randPool.buf[randPool.pos:])
	randPool.pos += len(u)
	randPool.mu.Unlock()
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10
	return format(&u)
}

// format writes u as xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in lowercase
// (unrolled: constant indices need no bounds checks).
func format(u *[16]byte) string {
	const digits = "0123456789abcdef"
	var b [36]byte
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	b[0], b[1] = digits[u[0]>>4], digits[u[0]&0x0f]
	b[2], b[3] = digits[u[1]>>4], digits[u[1]&0x0f]
	b[4], b[5] = digits[u[2]>>4], digits[u[2]&0x0f]
	b[6], b[7] = digits[u[3]>>4], digits[u[3]&0x0f]
	b[9], b[10] = digits[u[4]>>4], digits[u[4]&0x0f]
	b[11], b[12] = digits[u[5]>>4], digits[u[5]&0x0f]
	b[14], b[15] = digits[u[6]>>4], digits[u[6]&0x0f]
	b[16], b[17] = digits[u[7]>>4], digits[u[7]&0x0f]
	b[19], b[20] = digits[u[8]>>4], digits[u[8]&0x0f]
	b[21], b[22] = digits[u[9]>>4], digits[u[9]&0x0f]
	b[24], b[25] = digits[u[10]>>4], digits[u[10]&0x0f]
	b[26], b[27] = digits[u[11]>>4], digits[u[11]&0x0f]
	b[28], b[29] = digits[u[12]>>4], digits[u[12]&0x0f]
	b[30], b[31] = digits[u[13]>>4], digits[u[13]&0x0f]
	b[32], b[33] = digits[u[14]>>4], digits[u[14]&0x0f]
	b[34], b[35] = digits[u[15]>>4], digits[u[15]&0x0f]
	return string(b[:])
}

func (system) Now() time.Time {
	return time.Now().UTC().Truncate(time.Millisecond)
}

var current atomic.Pointer[Source]

func init() {
	// New draws its random bytes in batches (randPool); so does
	// google/uuid for the packages that call it directly (the IDs stay
	// cryptographically random).
	uuid.EnableRandPool()
	var s Source = system{}
	current.Store(&s)
}

// New returns a new UUIDv4 in its canonical lowercase form.
func New() string { return (*current.Load()).NewID() }

// Random reports whether New returns random UUIDs: no Source other than
// the system's is installed. A value that gets its ID only when it is
// first asked for one may then draw it with NewRandom, when it is asked:
// nobody can tell a random ID drawn late from one drawn early.
func Random() bool {
	_, ok := (*current.Load()).(system)
	return ok
}

// NewRandom returns a new random UUIDv4, whatever Source is installed.
func NewRandom() string { return newV4() }

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
