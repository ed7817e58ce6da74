package unavailable

import (
	"errors"
	"fmt"
	"testing"
)

func TestWrapIs(t *testing.T) {
	base := errors.New("dial tcp: connection refused")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{base, false},
		{Wrap(base), true},
		{fmt.Errorf("journal append: %w", Wrap(base)), true},
		{Wrap(Wrap(base)), true},
	} {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if Wrap(nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
	if w := Wrap(base); !errors.Is(w, base) {
		t.Error("Wrap hides the error it wraps")
	}
	if w := Wrap(base); Wrap(w) != w {
		t.Error("Wrap wraps twice")
	}
}
