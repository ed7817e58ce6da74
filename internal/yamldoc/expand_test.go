package yamldoc

import (
	"strings"
	"testing"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"HOST": "db", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "${HOST}:5432", want: "db:5432"},
		{in: "${EMPTY}", want: ""},
		{in: "${UNSET}", err: "environment variable UNSET is not set"},
		{in: "${UNSET:-scripted:support}", want: "scripted:support"},
		{in: "${EMPTY:-fallback}", want: "fallback"},
		{in: "${HOST:-fallback}", want: "db"},
		{in: "${UNSET:-}", want: ""},
		{in: "a ${HOST} b ${UNSET:-c}", want: "a db b c"},
		{in: "${1BAD}", err: "invalid environment variable reference"},
		{in: "${:-x}", err: "invalid environment variable reference"},
		{in: "${HOST", err: "unterminated ${"},
	} {
		got, err := ExpandEnv(tc.in, lookup)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ExpandEnv(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ExpandEnv(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
