package canonical

import (
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The encoding/json form, written directly.
//
// The journal's records and their data are stored as encoding/json
// writes them, and their bytes are hashed; the fast paths below write
// exactly those bytes without reflection, for the values they know, and
// report !ok for anything else so that the caller takes encoding/json
// itself. Differential tests and fuzz targets pin them to encoding/json.

// AppendJSONString appends s as encoding/json writes a string: " and \
// escaped, \b \f \n \r \t by name and the other control characters as
// \u00xx, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped and, with
// escapeHTML (json.Marshal's default), < > & as \u003c \u003e \u0026.
func AppendJSONString[S ~string | ~[]byte](b []byte, s S, escapeHTML bool) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start, i := 0, 0
	if escapeHTML {
		i = plainRunHTML(s)
	} else {
		i = plainRun(s)
	}
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = appendEscapedASCII(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendJSONFloat appends f as encoding/json writes a float64 (ES6 number
// formatting with Go's exponent cutoffs), or reports !ok for NaN and the
// infinities, which encoding/json refuses.
func AppendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// maxJSONDepth bounds the nesting AppendJSON writes itself.
const maxJSONDepth = 64

// AppendJSON appends v as json.Marshal writes it, for JSON-shaped values:
// nil, bool, string, float64, the integer types, map[string]any,
// map[string]string, []any and []string, nested up to 64 deep. For any
// other value — another type, a NaN or infinite float, deeper nesting —
// it reports !ok, and b's contents past its length are garbage.
func AppendJSON(b []byte, v any) ([]byte, bool) {
	return appendJSON(b, v, 0)
}

func appendJSON(b []byte, v any, depth int) ([]byte, bool) {
	if depth > maxJSONDepth {
		return b, false
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return AppendJSONString(b, x, true), true
	case float64:
		return AppendJSONFloat(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case int16:
		return strconv.AppendInt(b, int64(x), 10), true
	case int8:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10), true
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		return appendMap(b, x, func(b []byte, v any) ([]byte, bool) { return appendJSON(b, v, depth+1) })
	case map[string]string:
		if x == nil {
			return append(b, "null"...), true
		}
		return appendMap(b, x, func(b []byte, v string) ([]byte, bool) { return AppendJSONString(b, v, true), true })
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSON(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case []string:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, e, true)
		}
		return append(b, ']'), true
	}
	return b, false
}

// appendMap writes a map's members sorted by key, as encoding/json does.
func appendMap[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, k, true)
		b = append(b, ':')
		var ok bool
		if b, ok = value(b, m[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// CompactAsIs reports whether encoding/json writes the JSON text raw (a
// json.RawMessage, or a Marshaler's output) unchanged: it is valid JSON
// with no whitespace between its tokens and, with escapeHTML, none of the
// bytes it would escape (< > & U+2028 U+2029). Nesting deeper than 512
// is reported false.
func CompactAsIs(raw []byte, escapeHTML bool) bool {
	c := compactChecker{in: raw, html: escapeHTML}
	return c.value(0) && c.i == len(raw)
}

// compactChecker reads one JSON value without whitespace, as
// encoding/json's scanner accepts it: any byte from 0x20 up in a string
// (it does not check UTF-8), the escapes JSON defines.
type compactChecker struct {
	in   []byte
	i    int
	html bool
}

func (c *compactChecker) next(b byte) bool {
	if c.i < len(c.in) && c.in[c.i] == b {
		c.i++
		return true
	}
	return false
}

func (c *compactChecker) value(depth int) bool {
	if c.i == len(c.in) || depth > 512 {
		return false
	}
	switch b := c.in[c.i]; {
	case b == '{':
		c.i++
		if c.next('}') {
			return true
		}
		for {
			if c.i == len(c.in) || c.in[c.i] != '"' || !c.str() || !c.next(':') || !c.value(depth+1) {
				return false
			}
			if c.next('}') {
				return true
			}
			if !c.next(',') {
				return false
			}
		}
	case b == '[':
		c.i++
		if c.next(']') {
			return true
		}
		for {
			if !c.value(depth + 1) {
				return false
			}
			if c.next(']') {
				return true
			}
			if !c.next(',') {
				return false
			}
		}
	case b == '"':
		return c.str()
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(c.in)-c.i >= len(lit) && string(c.in[c.i:c.i+len(lit)]) == lit {
			c.i += len(lit)
			return true
		}
	}
	return false
}

func (c *compactChecker) str() bool {
	c.i++ // "
	for c.i < len(c.in) {
		b := c.in[c.i]
		switch {
		case b == '"':
			c.i++
			return true
		case b < 0x20:
			return false
		case c.html && (b == '<' || b == '>' || b == '&' || b == 0xE2 && c.i+2 < len(c.in) && c.in[c.i+1] == 0x80 && c.in[c.i+2]&^1 == 0xA8):
			return false
		case b == '\\':
			n := EscapeLen(c.in[c.i:])
			if n == 0 {
				return false
			}
			c.i += n
			continue
		}
		c.i++
	}
	return false
}

func (c *compactChecker) number() bool {
	end, ok := NumberEnd(c.in, c.i)
	c.i = end
	return ok
}

// NumberEnd reads a number literal of JSON's grammar (RFC 8259 §6) in
// in from i: where it ends, and whether it is one.
func NumberEnd(in []byte, i int) (int, bool) {
	next := func(b byte) bool {
		if i < len(in) && in[i] == b {
			i++
			return true
		}
		return false
	}
	digits := func() bool {
		start := i
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
		return i > start
	}
	next('-')
	switch {
	case next('0'):
	case i < len(in) && '1' <= in[i] && in[i] <= '9':
		digits()
	default:
		return i, false
	}
	if next('.') && !digits() {
		return i, false
	}
	if next('e') || next('E') {
		if !next('+') {
			next('-')
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}

// AppendTimeMillis appends t in UTC as the layout
// "2006-01-02T15:04:05.000Z07:00" writes it (RFC 3339, milliseconds, "Z"),
// the form of every date-time agentry writes, without the layout's
// interpretation.
func AppendTimeMillis(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
	return b
}

// EscapeLen is the length of the escape sequence of JSON's grammar
// (RFC 8259 §7) at the start of in — \" \\ \/ \b \f \n \r \t or \uXXXX —
// or 0 when in does not start with one.
func EscapeLen(in []byte) int {
	if len(in) < 2 || in[0] != '\\' {
		return 0
	}
	switch in[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(in) < 6 {
			return 0
		}
		for _, h := range in[2:6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return 0
			}
		}
		return 6
	}
	return 0
}
