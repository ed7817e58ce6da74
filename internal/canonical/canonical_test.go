package canonical

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// TestAppendStringMatchesJCS: a string is written as encoding/json then
// gowebpki/jcs write it (the general path), for string and []byte.
func TestAppendStringMatchesJCS(t *testing.T) {
	for _, s := range []string{"", "plain", `"quoted" \back\slash/`, "\x00\x01\b\t\n\v\f\r\x1f\x7f",
		"<html> & \u2028\u2029", "Zoë 😀 中文 \uffff", "bad \xff\xfe utf-8 \xc3", "\xed\xa0\x80 (a surrogate's bytes)"} {
		m, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Transform(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got := AppendString(nil, []byte(s)); string(got) != string(want) {
			t.Errorf("AppendString([]byte %q) = %s, want %s", s, got, want)
		}
	}
}
