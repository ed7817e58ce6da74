package workflow_test

import (
	"testing"
	"time"

	"github.com/agentry-dev/agentry/workflow"
)

// FuzzParseSessionCursor: any cursor text (a query parameter) is either
// refused or parses to what SessionCursor writes back the same way.
func FuzzParseSessionCursor(f *testing.F) {
	for _, s := range []string{"", "1764300000000:abc", "x", ":id", "12:", "-5:id", "99999999999999999999:id", "1:a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		ms, id, err := workflow.ParseSessionCursor(c)
		if err != nil || c == "" {
			return
		}
		back := workflow.SessionCursor(&workflow.Session{ID: id, CreatedAt: time.UnixMilli(ms)})
		ms2, id2, err := workflow.ParseSessionCursor(back)
		if err != nil || ms2 != ms || id2 != id {
			t.Fatalf("%q → (%d, %q) → %q → (%d, %q, %v)", c, ms, id, back, ms2, id2, err)
		}
	})
}
