package ids

import (
	"testing"
	"time"
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
