package govern

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/canonical"
	"github.com/gowebpki/jcs"
)

// The direct canonical form of a journal record.
//
// A record's hash is the SHA-256 of its RFC 8785 (JCS) form without the
// hash's value (Record.ComputeHash). The general path — encoding/json,
// then github.com/gowebpki/jcs parsing that text and writing it sorted —
// is most of the cost of sealing a record. appendCanonicalRecord writes
// the same bytes directly from the Record's fields, and canonicalizes
// Data (the one member holding arbitrary JSON) with a small parser. It
// claims only what it is sure to write exactly as the general path
// would (a member string that is not valid UTF-8 included: both write
// U+FFFD for each invalid byte); on anything else — an integer beyond
// 2^53, a key that is not ASCII, a lone surrogate or invalid UTF-8 in
// Data, duplicate keys, JSON it does not accept — it reports !ok and
// ComputeHash takes the general path, which stays the reference (and the
// error). The two are
// compared by TestCanonicalRecordMatchesJCS and FuzzCanonicalRecord.

// recordKeys are the JSON members of a Record in JCS order (sorted by
// UTF-16 code units: for these ASCII names, bytewise). canon_test.go
// checks the list against Record's json tags.
var recordKeys = [...]string{"actor", "call_id", "data", "epoch", "from", "hash", "kind", "node", "outcome",
	"parent_trace_id", "prev", "reasons", "request_id", "seq", "span_id", "timestamp", "to", "tool", "trace_id", "unique"}

// maxExactInteger is the largest integer every larger one of which a
// float64 may not hold exactly (2^53).
const maxExactInteger = 1 << 53

// canonBufs recycles the buffers canonical forms are written into.
var canonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendCanonicalRecord appends the JCS form of r with an empty hash —
// exactly what jcs.Transform(json.Marshal(r with Hash "")) gives — or
// reports !ok.
func appendCanonicalRecord(b []byte, r *Record) (_ []byte, ok bool) {
	if r.Seq > maxExactInteger || r.Epoch > maxExactInteger {
		return b, false
	}
	b = append(b, `{"actor":{"id":`...)
	b = canonical.AppendString(b, r.Actor.ID)
	b = append(b, `,"kind":`...)
	b = canonical.AppendString(b, r.Actor.Kind)
	b = append(b, '}')
	b = appendOptional(b, "call_id", r.CallID)
	if len(r.Data) > 0 {
		b = append(b, `,"data":`...)
		if canon, own := lookupOwnCanon(r.Data); own {
			b = append(b, canon...)
		} else if b, ok = appendCanonicalJSON(b, r.Data); !ok {
			return b, false
		}
	}
	if r.Epoch != 0 {
		b = strconv.AppendUint(append(b, `,"epoch":`...), r.Epoch, 10)
	}
	b = appendOptional(b, "from", r.From)
	b = append(b, `,"hash":"","kind":`...)
	b = canonical.AppendString(b, r.Kind)
	b = appendOptional(b, "node", r.Node)
	b = canonical.AppendString(append(b, `,"outcome":`...), r.Outcome)
	b = appendOptional(b, "parent_trace_id", r.ParentTraceID)
	b = canonical.AppendString(append(b, `,"prev":`...), r.Prev)
	if len(r.Reasons) > 0 {
		b = append(b, `,"reasons":[`...)
		for i, reason := range r.Reasons {
			if i > 0 {
				b = append(b, ',')
			}
			b = canonical.AppendString(b, reason)
		}
		b = append(b, ']')
	}
	b = canonical.AppendString(append(b, `,"request_id":`...), r.RequestID)
	b = strconv.AppendUint(append(b, `,"seq":`...), r.Seq, 10)
	b = appendOptional(b, "span_id", r.SpanID)
	b = append(b, `,"timestamp":"`...)
	b = canonical.AppendTimeMillis(b, r.Timestamp.Time)
	b = append(b, '"')
	b = appendOptional(b, "to", r.To)
	b = appendOptional(b, "tool", r.Tool)
	b = canonical.AppendString(append(b, `,"trace_id":`...), r.TraceID)
	b = appendOptional(b, "unique", r.Unique)
	return append(b, '}'), true
}

// appendOptional appends the member key: v unless v is empty (omitempty).
func appendOptional[S ~string](b []byte, key string, v S) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return canonical.AppendString(b, v)
}

// appendCanonicalJSON appends the JCS form of the JSON text data, or
// reports !ok (see appendCanonicalRecord).
func appendCanonicalJSON(b, data []byte) ([]byte, bool) {
	p := canonParsers.Get().(*canonParser)
	defer func() {
		p.in, p.i = nil, 0
		canonParsers.Put(p)
	}()
	p.in = data
	out, ok := p.value(b, 0)
	if !ok {
		return b, false
	}
	p.space()
	if p.i != len(p.in) {
		return b, false
	}
	return out, true
}

// canonParsers recycles parsers, for their members and tmp buffers.
var canonParsers = sync.Pool{New: func() any { return new(canonParser) }}

// canonicalPayloadHash is PayloadHash by the direct path: the hash of the
// JCS form appendCanonicalJSON writes, or !ok.
func canonicalPayloadHash(payload []byte) (string, bool) {
	buf := canonBufs.Get().(*[]byte)
	defer canonBufs.Put(buf)
	canon, ok := appendCanonicalJSON((*buf)[:0], payload)
	if !ok {
		return "", false
	}
	*buf = canon[:0]
	return hashString(sha256.Sum256(canon)), true
}

// hashString is "sha256:" + the lowercase hex of sum, in one allocation.
func hashString(sum [sha256.Size]byte) string {
	const prefix = "sha256:"
	var b [len(prefix) + 2*sha256.Size]byte
	copy(b[:], prefix)
	hex.Encode(b[len(prefix):], sum[:])
	return string(b[:])
}

// canonMaxDepth bounds the nesting appendCanonicalJSON accepts (deeper
// input goes the general path, which has its own bound).
const canonMaxDepth = 64

type canonParser struct {
	in      []byte
	i       int
	members []canonMember // of the objects being read, innermost last
	tmp     []byte        // an object's values while it is sorted
}

func (p *canonParser) space() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *canonParser) value(b []byte, depth int) ([]byte, bool) {
	p.space()
	if p.i == len(p.in) || depth > canonMaxDepth {
		return b, false
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return p.object(b, depth)
	case c == '[':
		p.i++
		b = append(b, '[')
		p.space()
		if p.i < len(p.in) && p.in[p.i] == ']' {
			p.i++
			return append(b, ']'), true
		}
		for n := 0; ; n++ {
			if n > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = p.value(b, depth+1); !ok {
				return b, false
			}
			p.space()
			if p.i == len(p.in) {
				return b, false
			}
			switch p.in[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return append(b, ']'), true
			default:
				return b, false
			}
		}
	case c == '"':
		start := p.i
		s, ok := p.string()
		if !ok {
			return b, false
		}
		if raw := p.in[start:p.i]; len(raw) == len(s)+2 {
			// No escape: JCS writes the string as it is (control
			// characters cannot be in it unescaped).
			return append(b, raw...), true
		}
		return canonical.AppendString(b, s), true
	case c == '-' || c >= '0' && c <= '9':
		return p.number(b)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(p.in[p.i:], []byte(lit)) {
				p.i += len(lit)
				return append(b, lit...), true
			}
		}
		return b, false
	}
}

// A canonMember is a member of an object being canonicalized: its key
// and the span of its canonical "key":value from the object's start.
type canonMember struct {
	key        []byte
	start, end int
}

func (p *canonParser) object(b []byte, depth int) ([]byte, bool) {
	p.i++ // {
	p.space()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
		return append(b, '{', '}'), true
	}
	// The members are written to b in the input's order, and rewritten
	// sorted unless they already are; the members of nested objects stack
	// on p.members.
	base, objStart := len(p.members), len(b)
	defer func() { p.members = p.members[:base] }()
	b = append(b, '{')
	sorted := true
	for {
		p.space()
		if p.i == len(p.in) || p.in[p.i] != '"' {
			return b, false
		}
		keyStart := p.i
		key, ok := p.string()
		if !ok {
			return b, false
		}
		rawKey := p.in[keyStart:p.i]
		for _, c := range key {
			if c >= utf8.RuneSelf {
				return b, false // UTF-16 order: the general path sorts it
			}
		}
		p.space()
		if p.i == len(p.in) || p.in[p.i] != ':' {
			return b, false
		}
		p.i++
		if n := len(p.members); n > base {
			b = append(b, ',')
			sorted = sorted && bytes.Compare(p.members[n-1].key, key) < 0
		}
		start := len(b)
		if len(rawKey) == len(key)+2 { // no escape: JCS writes it as it is
			b = append(append(b, rawKey...), ':')
		} else {
			b = append(canonical.AppendString(b, key), ':')
		}
		if b, ok = p.value(b, depth+1); !ok {
			return b, false
		}
		p.members = append(p.members, canonMember{key, start - objStart, len(b) - objStart})
		p.space()
		if p.i == len(p.in) {
			return b, false
		}
		if p.in[p.i] == '}' {
			p.i++
			break
		}
		if p.in[p.i] != ',' {
			return b, false
		}
		p.i++
	}
	if sorted { // strictly ascending: no duplicate either
		return append(b, '}'), true
	}
	members := p.members[base:]
	sortMembers(members)
	p.tmp = append(p.tmp[:0], b[objStart:]...)
	b = append(b[:objStart], '{')
	for i, m := range members {
		if i > 0 {
			if bytes.Equal(members[i-1].key, m.key) {
				return b, false // a duplicate: the general path refuses it
			}
			b = append(b, ',')
		}
		b = append(b, p.tmp[m.start:m.end]...)
	}
	return append(b, '}'), true
}

// sortMembers sorts members by key: by insertion for the few members of
// most objects.
func sortMembers(members []canonMember) {
	if len(members) > 16 {
		slices.SortFunc(members, func(x, y canonMember) int { return bytes.Compare(x.key, y.key) })
		return
	}
	for i := 1; i < len(members); i++ {
		for j := i; j > 0 && string(members[j].key) < string(members[j-1].key); j-- {
			members[j], members[j-1] = members[j-1], members[j]
		}
	}
}

// string reads a JSON string at p.i (its opening quote) and returns its
// value (in the input when it has no escapes); !ok for malformed text,
// invalid UTF-8 or a lone surrogate.
func (p *canonParser) string() ([]byte, bool) {
	p.i++ // "
	start := p.i
	p.i += canonical.PlainRun(p.in[p.i:])
	plain := p.i // the bytes before are ASCII
	for p.i < len(p.in) {
		c := p.in[p.i]
		switch {
		case c == '"':
			s := p.in[start:p.i]
			p.i++
			return s, utf8.Valid(p.in[plain : p.i-1])
		case c == '\\':
			return p.escapedString(start)
		case c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// escapedString goes on reading a string from p.i, its first backslash;
// the string began at start. Its value is a new slice.
func (p *canonParser) escapedString(start int) ([]byte, bool) {
	s := append([]byte(nil), p.in[start:p.i]...)
	for p.i < len(p.in) {
		c := p.in[p.i]
		switch {
		case c == '"':
			p.i++
			return s, utf8.Valid(s)
		case c < 0x20:
			return nil, false
		case c != '\\':
			s = append(s, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.in) {
			return nil, false
		}
		e := p.in[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			s = append(s, e)
		case 'b':
			s = append(s, '\b')
		case 'f':
			s = append(s, '\f')
		case 'n':
			s = append(s, '\n')
		case 'r':
			s = append(s, '\r')
		case 't':
			s = append(s, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || p.i+1 >= len(p.in) || p.in[p.i] != '\\' || p.in[p.i+1] != 'u' {
					return nil, false // a lone surrogate
				}
				p.i += 2
				lo, ok := p.hex4()
				if !ok {
					return nil, false
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return nil, false
				}
			}
			s = utf8.AppendRune(s, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func (p *canonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.in) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.in[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(v), true
}

// number reads a JSON number and appends it as JCS writes it (its IEEE
// 754 double, in ECMAScript's form). Integers of up to 15 digits are
// written as they are: a double holds them exactly, and ECMAScript writes
// them in full.
func (p *canonParser) number(b []byte) ([]byte, bool) {
	start := p.i
	if p.in[p.i] == '-' {
		p.i++
	}
	digits := p.i
	if p.i < len(p.in) && p.in[p.i] == '0' {
		p.i++
	} else {
		for p.i < len(p.in) && p.in[p.i] >= '0' && p.in[p.i] <= '9' {
			p.i++
		}
	}
	if p.i == digits {
		return b, false
	}
	integer := p.i - digits
	fractionOrExponent := false
	if p.i < len(p.in) && p.in[p.i] == '.' {
		fractionOrExponent = true
		p.i++
		n := p.i
		for p.i < len(p.in) && p.in[p.i] >= '0' && p.in[p.i] <= '9' {
			p.i++
		}
		if p.i == n {
			return b, false
		}
	}
	if p.i < len(p.in) && (p.in[p.i] == 'e' || p.in[p.i] == 'E') {
		fractionOrExponent = true
		p.i++
		if p.i < len(p.in) && (p.in[p.i] == '+' || p.in[p.i] == '-') {
			p.i++
		}
		n := p.i
		for p.i < len(p.in) && p.in[p.i] >= '0' && p.in[p.i] <= '9' {
			p.i++
		}
		if p.i == n {
			return b, false
		}
	}
	text := p.in[start:p.i]
	if !fractionOrExponent && integer <= 15 {
		if string(text) == "-0" {
			return append(b, '0'), true
		}
		return append(b, text...), true
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil || math.IsInf(f, 0) {
		return b, false
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return b, false
	}
	return append(b, s...), true
}
