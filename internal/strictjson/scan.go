package strictjson

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner checks one JSON text (RFC 8259) by recursive descent, guided by
// a plan. An error is built where the fault is found and gets its path
// on the way up, so a success costs no path bookkeeping.
type scanner struct {
	data     []byte
	i        int
	depth    int
	maxDepth int
	unknown  bool // refuse unknown members of structs
	dups     bool // refuse duplicate member names
	// numberHook checks number literals (Options.Number).
	numberHook func(literal []byte) error
}

func (s *scanner) fail(reason error, msg string) *Error {
	return &Error{Reason: reason, Offset: s.i, Message: msg}
}

// syntax is the error for an unexpected byte at s.i (or the end).
func (s *scanner) syntax(want string) *Error {
	if s.i >= len(s.data) {
		return s.fail(ErrSyntax, "unexpected end of JSON input, "+want)
	}
	return s.fail(ErrSyntax, fmt.Sprintf("invalid character %s at byte %d, %s", charName(s.data[s.i:]), s.i, want))
}

// charName names the character that starts b for a message.
func charName(b []byte) string {
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n <= 1 {
		return fmt.Sprintf("byte 0x%02x", b[0])
	}
	return strconv.QuoteRune(r)
}

func (s *scanner) ws() {
	for s.i < len(s.data) {
		c := s.data[s.i]
		if c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
		s.i++
	}
}

// plain marks the bytes a string holds as they are: printable ASCII but
// the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// document checks the whole input: one value, then only whitespace.
func (s *scanner) document(p *plan) *Error {
	s.ws()
	if s.i == len(s.data) {
		return s.fail(ErrSyntax, "no JSON value")
	}
	if err := s.value(p); err != nil {
		if err.Reason == ErrType && len(err.rpath) == 0 && strings.HasPrefix(err.Message, "must be") {
			err.Message = "the JSON value " + err.Message
		}
		return err
	}
	s.ws()
	if s.i < len(s.data) {
		return s.fail(ErrTrailingData, fmt.Sprintf("unexpected data after the JSON value at byte %d", s.i))
	}
	return nil
}

// value checks the value at s.i against p (nil: anything).
func (s *scanner) value(p *plan) *Error {
	if s.i >= len(s.data) {
		return s.syntax("expecting a value")
	}
	k := opaque
	if p != nil {
		k = p.kind
	}
	start := s.i
	switch c := s.data[s.i]; {
	case c == '{':
		if k != opaque && k != anyKind && k != structKind && k != mapKind {
			return s.mismatch(p, start)
		}
		return s.object(p)
	case c == '[':
		if k != opaque && k != anyKind && k != sliceKind {
			return s.mismatch(p, start)
		}
		return s.array(p)
	case c == '"':
		if _, err := s.str(); err != nil {
			return err
		}
		if k != opaque && k != anyKind && k != stringKind {
			return s.mismatch(p, start)
		}
		return nil
	case c == '-' || '0' <= c && c <= '9':
		if err := s.number(); err != nil {
			return err
		}
		if s.numberHook != nil {
			if err := s.numberHook(s.data[start:s.i]); err != nil {
				return &Error{Reason: ErrType, Offset: start, Message: err.Error()}
			}
		}
		return s.checkNumber(p, start)
	case c == 't':
		if err := s.literal("true"); err != nil {
			return err
		}
	case c == 'f':
		if err := s.literal("false"); err != nil {
			return err
		}
	case c == 'n':
		return s.literal("null") // null goes anywhere
	default:
		return s.syntax("expecting a value")
	}
	if k != opaque && k != anyKind && k != boolKind {
		return s.mismatch(p, start)
	}
	return nil
}

// mismatch is the error for a value of the wrong JSON type at start.
func (s *scanner) mismatch(p *plan, start int) *Error {
	return &Error{Reason: ErrType, Offset: start, Message: "must be " + p.what()}
}

func (s *scanner) literal(lit string) *Error {
	for j := 0; j < len(lit); j++ {
		if s.i >= len(s.data) || s.data[s.i] != lit[j] {
			return s.syntax("expecting " + lit)
		}
		s.i++
	}
	return nil
}

func (s *scanner) enter() *Error {
	if s.depth++; s.depth > s.maxDepth {
		return s.fail(ErrTooDeep, fmt.Sprintf("arrays and objects nested deeper than %d", s.maxDepth))
	}
	return nil
}

// object checks the object at s.i ('{') against p: opaque, anyKind,
// structKind or mapKind.
func (s *scanner) object(p *plan) *Error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	var seen names
	for {
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return s.syntax("expecting a member name")
		}
		keyAt := s.i
		raw, err := s.str()
		if err != nil {
			err.Message = "member name: " + err.Message
			return err
		}
		var name string
		if raw.escaped {
			name = unescape(raw.b)
		}
		if s.dups && seen.add(raw.b, name, raw.escaped) {
			return &Error{Reason: ErrDuplicate, Offset: keyAt, Message: "duplicate member " + quote(raw.text(name))}
		}
		var elem *plan
		switch {
		case p == nil:
		case p.kind == anyKind:
			elem = anyPlan
		case p.kind == mapKind:
			elem = p.elem
		case p.kind == structKind:
			var ok bool
			if raw.escaped {
				elem, ok = p.fields[name]
			} else {
				elem, ok = p.fields[string(raw.b)]
			}
			if !ok {
				if err := s.unknownMember(p, raw.text(name), keyAt); err != nil {
					return err
				}
			}
		}
		s.ws()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.syntax("expecting ':' after a member name")
		}
		s.i++
		s.ws()
		if err := s.value(elem); err != nil {
			err.rpath = append(err.rpath, memberElem(raw.text(name)))
			return err
		}
		s.ws()
		if s.i >= len(s.data) {
			return s.syntax("expecting ',' or '}'")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expecting ',' or '}'")
		}
	}
}

// unknownMember judges a member name that names no field of struct p:
// refused when it matches a field but for case (encoding/json would set
// that field) or when unknown members are refused.
func (s *scanner) unknownMember(p *plan, key string, at int) *Error {
	if field, ok := p.folded[foldName(key)]; ok {
		return &Error{Reason: ErrUnknownField, Offset: at,
			Message: "unknown member " + quote(key) + " (member names are case-sensitive: " + quote(field) + ")"}
	}
	if s.unknown {
		return &Error{Reason: ErrUnknownField, Offset: at, Message: "unknown member " + quote(key)}
	}
	return nil
}

// array checks the array at s.i ('[') against p: opaque, anyKind or
// sliceKind.
func (s *scanner) array(p *plan) *Error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	var elem *plan
	if p != nil {
		switch p.kind {
		case anyKind:
			elem = anyPlan
		case sliceKind:
			elem = p.elem
		}
	}
	for n := 0; ; n++ {
		e := elem
		if p != nil && p.kind == sliceKind && p.length >= 0 && n >= p.length {
			e = nil // beyond a Go array's length: encoding/json drops it
		}
		if err := s.value(e); err != nil {
			err.rpath = append(err.rpath, "["+strconv.Itoa(n)+"]")
			return err
		}
		s.ws()
		if s.i >= len(s.data) {
			return s.syntax("expecting ',' or ']'")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expecting ',' or ']'")
		}
	}
}

// rawString is a string literal's contents, between the quotes.
type rawString struct {
	b       []byte
	escaped bool // holds a backslash escape
}

// text returns the string r denotes, given unescaped, its unescaped form
// when it is escaped.
func (r rawString) text(unescaped string) string {
	if r.escaped {
		return unescaped
	}
	return string(r.b)
}

// str checks the string literal at s.i ('"'): escapes well formed,
// surrogate escapes paired, no control characters, valid UTF-8.
func (s *scanner) str() (rawString, *Error) {
	start := s.i + 1
	escaped := false
	for i := start; i < len(s.data); {
		c := s.data[i]
		if plain[c] {
			i++
			for i < len(s.data) && plain[s.data[i]] {
				i++
			}
			continue
		}
		switch {
		case c == '"':
			s.i = i + 1
			return rawString{s.data[start:i], escaped}, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(s.data) {
				s.i = len(s.data)
				return rawString{}, s.syntax("expecting an escape")
			}
			switch s.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r := hex4(s.data, i+2)
				if r < 0 {
					s.i = i
					return rawString{}, s.fail(ErrSyntax, fmt.Sprintf("invalid \\u escape at byte %d", i))
				}
				switch {
				case utf16.IsSurrogate(rune(r)) && r < 0xDC00:
					if i+11 < len(s.data) && s.data[i+6] == '\\' && s.data[i+7] == 'u' {
						if r2 := hex4(s.data, i+8); 0xDC00 <= r2 && r2 <= 0xDFFF {
							i += 12
							continue
						}
					}
					s.i = i
					return rawString{}, s.fail(ErrLoneSurrogate, fmt.Sprintf("\\u%04x at byte %d is half a surrogate pair without its other half (not a character)", r, i))
				case utf16.IsSurrogate(rune(r)):
					s.i = i
					return rawString{}, s.fail(ErrLoneSurrogate, fmt.Sprintf("\\u%04x at byte %d is half a surrogate pair without its other half (not a character)", r, i))
				}
				i += 6
			default:
				s.i = i + 1
				return rawString{}, s.syntax("in a string escape")
			}
		case c < 0x20:
			s.i = i
			return rawString{}, s.fail(ErrSyntax, fmt.Sprintf("control character 0x%02x at byte %d in a string (escape it)", c, i))
		default: // not ASCII
			r, n := utf8.DecodeRune(s.data[i:])
			if r == utf8.RuneError && n == 1 {
				s.i = i
				return rawString{}, s.fail(ErrInvalidUTF8, fmt.Sprintf("invalid UTF-8 (byte 0x%02x) at byte %d", c, i))
			}
			i += n
		}
	}
	s.i = len(s.data)
	return rawString{}, s.syntax("in a string")
}

// hex4 reads the 4 hex digits at b[i:], -1 when there are not 4.
func hex4(b []byte, i int) int {
	if i+4 > len(b) {
		return -1
	}
	n := 0
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		n = n<<4 | int(c)
	}
	return n
}

// unescape returns the string a checked literal's contents b denote.
func unescape(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch b[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := rune(hex4(b, i+2))
			if utf16.IsSurrogate(r) { // paired: str checked it
				r = utf16.DecodeRune(r, rune(hex4(b, i+8)))
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			out = append(out, b[i+1])
		}
		i += 2
	}
	return string(out)
}

// number checks the number literal at s.i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() *Error {
	d := s.data
	if s.i < len(d) && d[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(d) && d[s.i] == '0':
		s.i++
	case s.i < len(d) && '1' <= d[s.i] && d[s.i] <= '9':
		s.digits()
	default:
		return s.syntax("expecting a digit")
	}
	if s.i < len(d) && d[s.i] == '.' {
		s.i++
		if !s.digits() {
			return s.syntax("expecting a digit after '.'")
		}
	}
	if s.i < len(d) && (d[s.i] == 'e' || d[s.i] == 'E') {
		s.i++
		if s.i < len(d) && (d[s.i] == '+' || d[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return s.syntax("expecting a digit in the exponent")
		}
	}
	return nil
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// checkNumber checks the number literal data[start:s.i] against p as
// encoding/json converts it.
func (s *scanner) checkNumber(p *plan, start int) *Error {
	if p == nil {
		return nil
	}
	lit := s.data[start:s.i]
	switch p.kind {
	case opaque:
		return nil
	case anyKind:
		if !floatFits(lit, 64) {
			return &Error{Reason: ErrType, Offset: start, Message: "number out of range"}
		}
	case floatKind:
		if !floatFits(lit, p.bits) {
			return &Error{Reason: ErrType, Offset: start, Message: "number out of range"}
		}
	case intKind, uintKind:
		for _, c := range lit {
			if c == '.' || c == 'e' || c == 'E' {
				return &Error{Reason: ErrType, Offset: start, Message: "must be " + p.what() + " (no fraction or exponent)"}
			}
		}
		var err error
		if p.kind == intKind {
			_, err = strconv.ParseInt(string(lit), 10, p.bits)
		} else if lit[0] == '-' {
			return &Error{Reason: ErrType, Offset: start, Message: "must be " + p.what()}
		} else {
			_, err = strconv.ParseUint(string(lit), 10, p.bits)
		}
		if err != nil {
			return &Error{Reason: ErrType, Offset: start, Message: "number out of range"}
		}
	default:
		return s.mismatch(p, start)
	}
	return nil
}

// floatFits reports whether strconv.ParseFloat(lit, bits), which
// encoding/json uses, takes lit without a range error. Without an
// exponent, fewer than 39 digits are below 10^38 < MaxFloat32.
func floatFits(lit []byte, bits int) bool {
	if len(lit) < 39 {
		exp := false
		for _, c := range lit {
			if c == 'e' || c == 'E' {
				exp = true
				break
			}
		}
		if !exp {
			return true
		}
	}
	_, err := strconv.ParseFloat(string(lit), bits)
	return err == nil
}

// names is the set of member names of one object, for duplicates: a
// slice while small, a map beyond.
type names struct {
	list []string
	set  map[string]struct{}
}

// add adds a member name (raw contents, and unescaped when escaped) and
// reports whether it was there already.
func (n *names) add(raw []byte, unescaped string, escaped bool) bool {
	if n.set != nil {
		k := unescaped
		if !escaped {
			if _, dup := n.set[string(raw)]; dup {
				return true
			}
			k = string(raw)
		} else if _, dup := n.set[k]; dup {
			return true
		}
		n.set[k] = struct{}{}
		return false
	}
	k := unescaped
	if !escaped {
		k = string(raw)
	}
	for _, have := range n.list {
		if have == k {
			return true
		}
	}
	n.list = append(n.list, k)
	if len(n.list) > 16 {
		n.set = make(map[string]struct{}, 2*len(n.list))
		for _, have := range n.list {
			n.set[have] = struct{}{}
		}
		n.list = nil
	}
	return false
}
