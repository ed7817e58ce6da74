// Package canonical writes JSON strings in the canonical form of RFC 8785
// (JSON Canonicalization Scheme, §3.2.2.2), for the direct canonical
// encoders of UAMP envelopes (envelope) and journal records (govern):
// they write their fixed members themselves and are pinned to
// github.com/gowebpki/jcs, the general path, by differential tests.
package canonical

import "unicode/utf8"

// AppendString appends s as RFC 8785 §3.2.2.2 writes a string:
// " and \ escaped, the control characters as \b \t \n \f \r or \u00xx
// (lowercase hex), everything else literal UTF-8. Invalid UTF-8 becomes
// U+FFFD, as the general path (encoding/json, then jcs) makes it.
func AppendString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := plainRun(s); i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\t':
				b = append(b, '\\', 't')
			case '\n':
				b = append(b, '\\', 'n')
			case '\f':
				b = append(b, '\\', 'f')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				const hex = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeRune is utf8.DecodeRune of a string or a byte slice.
func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.DecodeRuneInString(string(s))
}
