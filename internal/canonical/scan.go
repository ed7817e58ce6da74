package canonical

import "encoding/binary"

// PlainRun returns how many bytes at the start of b are printable ASCII
// other than '"' and '\' (0x20–0x7f but 0x22 and 0x5c): the bytes a JSON
// string holds, and JCS and encoding/json (without HTML escaping) write,
// as they are. It looks at eight bytes at a time.
func PlainRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if special(binary.LittleEndian.Uint64(b[i:])) {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return i
}

// PlainRunString is PlainRun of a string.
func PlainRunString(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		_ = s[i+7]
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if special(w) {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return i
}

// special reports whether one of the eight bytes of w may not be plain.
// Flagged: a byte from 0x80 up, or (the others being ASCII, so that ^w
// keeps every high bit) one below 0x20 or a zero byte of w^'"…' or
// w^'\…' — the has-zero test, which can flag a byte after a real one
// (the callers' byte loop sorts that out), never miss the first.
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(0x22*ones), w^(0x5c*ones)
	return ((w-0x20*ones)|(quote-ones)|(backslash-ones))&^w&highs|w&highs != 0
}

// plainRun is PlainRun of a string or byte slice of any type.
func plainRun[S ~string | ~[]byte](s S) int {
	switch v := any(s).(type) {
	case string:
		return PlainRunString(v)
	case []byte:
		return PlainRun(v)
	}
	for i := 0; i < len(s); i++ { // a named type's (short) strings
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return len(s)
}

// plainRunHTML is plainRun stopping also at '<', '>' and '&', which
// encoding/json escapes by default.
func plainRunHTML[S ~string | ~[]byte](s S) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		_ = s[i+7]
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		lt, gt, amp := w^(0x3c*ones), w^(0x3e*ones), w^(0x26*ones)
		if special(w) || ((lt-ones)|(gt-ones)|(amp-ones))&^w&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			return i
		}
	}
	return i
}
