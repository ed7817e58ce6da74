package uicontrol

import (
	"mime"
	"strings"
	"testing"
)

// FuzzJSONMediaType: a request's Content-Type (untrusted) is accepted
// exactly when it parses as application/json or application/uiap+json,
// in any case and with any parameters; it never panics.
func FuzzJSONMediaType(f *testing.F) {
	for _, s := range []string{"application/json", "application/uiap+json; charset=utf-8", "Application/UIAP+JSON",
		"text/plain", "", "application/uiap+json; charset", "application/json;;", "application/json; a=\"b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		got := jsonMediaType(ct)
		mt, _, err := mime.ParseMediaType(ct)
		want := err == nil && (strings.EqualFold(mt, "application/json") || strings.EqualFold(mt, mediaType))
		if got != want {
			t.Errorf("jsonMediaType(%q) = %v, want %v", ct, got, want)
		}
	})
}
