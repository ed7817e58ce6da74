package envelope

import (
	"errors"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
)

// TimeFormat is how this package writes ts: RFC 3339 in UTC with
// milliseconds ("2025-07-10T13:37:05.000Z").
const TimeFormat = "2006-01-02T15:04:05.000Z"

// newID returns a new envelope id: a random (version 4) UUID in its URN
// form, "urn:uuid:…" (DESIGN §5). Tests make it deterministic with
// internal/ids.Set.
func newID() string { return "urn:uuid:" + ids.New() }

// now returns the current time as ts is written (TimeFormat).
func now() string { return formatTime(ids.Now()) }

// formatTime writes t as TimeFormat, in UTC.
func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseID reads an id in either accepted form, a bare UUID or a
// "urn:uuid:" URN (the prefix in any case), and returns the bare UUID in
// lowercase, the form two spellings of one id share. ok is false for
// anything else: 8-4-4-4-12 hexadecimal digits are required, of any
// version.
func ParseID(s string) (uuid string, ok bool) {
	const urn = "urn:uuid:"
	if len(s) > len(urn) && strings.EqualFold(s[:len(urn)], urn) {
		s = s[len(urn):]
	}
	if len(s) != 36 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return "", false
			}
		}
	}
	return strings.ToLower(s), true
}

// parseTime reads an RFC 3339 date-time (§5.6: "T" and "Z" in either
// case, any offset, any fraction) and returns it in UTC. It refuses leap
// seconds, which time.Time cannot hold.
func parseTime(s string) (time.Time, error) {
	bad := errors.New("not an RFC 3339 date-time")
	if len(s) < 20 || len(s) > 64 {
		return time.Time{}, bad
	}
	if s[17:19] == "60" {
		return time.Time{}, errors.New("leap seconds are not supported")
	}
	norm := []byte(s)
	if norm[10] == 't' {
		norm[10] = 'T'
	}
	if last := len(norm) - 1; norm[last] == 'z' {
		norm[last] = 'Z'
	}
	t, err := time.Parse(time.RFC3339Nano, string(norm))
	if err != nil {
		return time.Time{}, bad
	}
	return t.UTC(), nil
}
