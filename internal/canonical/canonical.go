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
			b = appendEscapedASCII(append(b, s[start:i]...), c)
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

// appendEscapedASCII appends the escape of ASCII byte c as RFC 8785 and
// encoding/json both write it: \" \\ \b \t \n \f \r, else \u00XX
// (lowercase hex).
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\t':
		return append(b, '\\', 't')
	case '\n':
		return append(b, '\\', 'n')
	case '\f':
		return append(b, '\\', 'f')
	case '\r':
		return append(b, '\\', 'r')
	}
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}
