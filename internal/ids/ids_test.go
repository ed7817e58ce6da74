package ids

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNewIsUUIDv4AndUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if !Valid(id) || seen[id] {
			t.Fatalf("id %q invalid or repeated", id)
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "not-a-uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "{" + New() + "}", "urn:uuid:" + New()} {
		if Valid(bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}

func TestNowIsUTCMilliseconds(t *testing.T) {
	n := Now()
	if n.Location() != time.UTC || n.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("Now() = %v", n)
	}
}

type fixed struct{}

func (fixed) NewID() string  { return "fixed" }
func (fixed) Now() time.Time { return time.Unix(0, 0).UTC() }

func TestSetAndRestore(t *testing.T) {
	restore := Set(fixed{})
	if New() != "fixed" || !Now().Equal(time.Unix(0, 0)) {
		t.Error("source not installed")
	}
	restore()
	if New() == "fixed" {
		t.Error("source not restored")
	}
}

// TestFormatMatchesUUID: the canonical form written by format is the one
// google/uuid writes, for the all-zero, all-one and random UUIDs.
func TestFormatMatchesUUID(t *testing.T) {
	inputs := [][16]byte{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for range 1000 {
		var u [16]byte
		rand.Read(u[:])
		inputs = append(inputs, u)
	}
	for _, u := range inputs {
		if got, want := format(&u), uuid.UUID(u).String(); got != want {
			t.Fatalf("format(%x) = %q, want %q", u, got, want)
		}
	}
}

// TestNewDrawsEveryIDFromFreshRandomBytes: across several refills of the
// pool, the IDs are version 4 with the RFC 4122 variant, and their random
// bits are not repeated or constant (each of the 122 bits takes both
// values).
func TestNewDrawsEveryIDFromFreshRandomBytes(t *testing.T) {
	var or, and [16]byte
	for i := range and {
		and[i] = 0xff
	}
	seen := map[string]bool{}
	for range 5 * 16 {
		s := New()
		u, err := uuid.Parse(s)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || s != u.String() || seen[s] {
			t.Fatalf("New() = %q: not a new canonical UUIDv4 (%v)", s, err)
		}
		seen[s] = true
		for i := range u {
			or[i] |= u[i]
			and[i] &= u[i]
		}
	}
	fixed := [16]byte{6: 0xf0, 8: 0xc0} // the version and variant bits
	for i := range or {
		if or[i]|fixed[i] != 0xff || and[i]&^fixed[i] != 0 {
			t.Errorf("byte %d: or %08b and %08b: some random bit never varied", i, or[i], and[i])
		}
	}
}
