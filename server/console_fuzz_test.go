package server

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzSessionCookie: a cookie value from a browser (anything) never
// panics the check, and only what the token's key issued, unexpired,
// passes — a value changed in any way does not.
func FuzzSessionCookie(f *testing.F) {
	a := newConsoleAuth("s3cret")
	now := time.Unix(1_800_000_000, 0)
	a.now = func() time.Time { return now }
	// As issue writes it, with a fixed nonce: the same in every fuzzing
	// process.
	payload := "v1." + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + ".AAAAAAAAAAAAAAAAAAAAAA"
	good := payload + "." + a.mac(payload)
	if !a.valid(good) || a.valid(a.issue(now.Add(-time.Second))) {
		f.Fatal("the issued cookie does not pass, or an expired one does")
	}
	for _, s := range []string{good, "", "v1", "v1...", "v1.1.x.y", strings.Repeat(".", 300), good + "x", "v2" + good[2:]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if a.valid(v) && v != good {
			t.Fatalf("%q passes, and was never issued", v)
		}
	})
}
