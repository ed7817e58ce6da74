package canonical

import (
	"strings"
	"testing"
)

// plainRunBytewise is PlainRun one byte at a time.
func plainRunBytewise(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return len(s)
}

func checkPlainRun(t *testing.T, s string) {
	t.Helper()
	want := plainRunBytewise(s)
	if got := PlainRunString(s); got != want {
		t.Errorf("PlainRunString(%q) = %d, want %d", s, got, want)
	}
	if got := PlainRun([]byte(s)); got != want {
		t.Errorf("PlainRun(%q) = %d, want %d", s, got, want)
	}
	type named string
	if got := plainRun(named(s)); got != want {
		t.Errorf("plainRun(named %q) = %d, want %d", s, got, want)
	}
	wantHTML := want
	if i := strings.IndexAny(s[:want], "<>&"); i >= 0 {
		wantHTML = i
	}
	if got := plainRunHTML(s); got != wantHTML {
		t.Errorf("plainRunHTML(%q) = %d, want %d", s, got, wantHTML)
	}
	if got := plainRunHTML([]byte(s)); got != wantHTML {
		t.Errorf("plainRunHTML([]byte %q) = %d, want %d", s, got, wantHTML)
	}
}

// TestPlainRun: the run of plain bytes ends at the first quote,
// backslash, control character or non-ASCII byte, wherever it is in a
// word of eight.
func TestPlainRun(t *testing.T) {
	for _, special := range []string{`"`, `\`, "\x00", "\x1f", "\x7f", "\x80", "é", "\xff", "!", "#", "[", "]", " ", "<", ">", "&", "=", "%", "'"} {
		for n := range 20 {
			checkPlainRun(t, strings.Repeat("a", n)+special+strings.Repeat("b", 9))
			checkPlainRun(t, strings.Repeat("\x21", n)+special+"\x22")
		}
	}
	checkPlainRun(t, "")
	checkPlainRun(t, "sha256:0d4f1e0c4b8a4f1d9c5e2b7a3f6e8d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e")
}

// FuzzPlainRun: PlainRun agrees with the byte-at-a-time scan.
func FuzzPlainRun(f *testing.F) {
	f.Add("plain text, then a \"quote\"")
	f.Add("\x01\x21\x5b\x5d\x7f\x80")
	f.Fuzz(func(t *testing.T, s string) { checkPlainRun(t, s) })
}
