package messaging

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/envelope"
)

// The hot loop of a stream decodes one delta per frame. envelope.DecodeDelta
// is exact but general (a document tree and a JSON Schema pass: ~15 µs
// and ~90 allocations a delta), which caps a consumer well below the
// 100,000 deltas/s the issue asks. decodeDelta first tries a strict
// single-pass parser for the form producers write — members without
// escapes or whitespace between them, an integer delta_seq, a
// "YYYY-MM-DDTHH:MM:SS[.fff]Z" ts, a payload of bounded shape — and
// hands everything else to envelope.DecodeDelta. The fast path never
// refuses: whatever it cannot vouch for goes the slow way, so both accept
// and refuse exactly the same documents, with the same values
// (FuzzDecodeDelta checks it against envelope.DecodeDelta).

// decodeDelta decodes a delta from untrusted bytes as envelope.DecodeDelta
// does, except that the payload is kept as sent, whitespace removed
// (envelope.DecodeDelta re-encodes it: members sorted, HTML characters
// escaped); either is the same JSON value.
func decodeDelta(b []byte) (*envelope.Delta, error) {
	if d, ok := fastDecodeDelta(b); ok {
		return d, nil
	}
	d, err := envelope.DecodeDelta(b)
	if err != nil {
		return nil, err
	}
	if d.Payload != nil {
		// DecodeDelta accepted b: a closed object whose member names are
		// exact and unique, so encoding/json finds the one "payload".
		var raw struct {
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(b, &raw) == nil {
			var c bytes.Buffer
			if json.Compact(&c, raw.Payload) == nil {
				d.Payload = c.Bytes()
			}
		}
	}
	return d, nil
}

// Member bits of fastDecodeDelta.
const (
	hasSeq = 1 << iota
	hasStream
	hasTS
	hasType
	hasPayload
	hasRequired = hasSeq | hasStream | hasTS | hasType
)

// fastDecodeDelta decodes the common form of a delta; ok is false when b
// is not in that form (it may still be a valid delta).
func fastDecodeDelta(b []byte) (d *envelope.Delta, ok bool) {
	n := len(b)
	if n < 2 || n > envelope.MaxDeltaSize || b[0] != '{' || b[n-1] != '}' || !utf8.Valid(b) {
		return nil, false
	}
	d = new(envelope.Delta)
	var seen int
	for i := 1; ; {
		key, j, ok := plainString(b, i)
		if !ok || j >= n || b[j] != ':' {
			return nil, false
		}
		i = j + 1
		var bit int
		switch string(key) {
		case "delta_seq":
			bit = hasSeq
			seq, j, ok := plainInteger(b, i)
			if !ok {
				return nil, false
			}
			d.Seq, i = seq, j
		case "stream_id":
			bit = hasStream
			s, j, ok := plainString(b, i)
			if !ok {
				return nil, false
			}
			d.StreamID, i = string(s), j
		case "ts":
			bit = hasTS
			s, j, ok := plainString(b, i)
			if !ok || !plainTime(s) {
				return nil, false
			}
			d.TS, i = string(s), j
		case "type":
			bit = hasType
			s, j, ok := plainString(b, i)
			if !ok {
				return nil, false
			}
			d.Type, i = deltaType(s), j
			if d.Type == "" {
				return nil, false
			}
		case "payload":
			bit = hasPayload
			if i >= n || b[i] != '{' {
				return nil, false
			}
			p := payloadScanner{b: b, i: i}
			if !p.value(1) {
				return nil, false
			}
			d.Payload = compactCopy(b[i:p.i], p.space)
			i = p.i
		default:
			return nil, false
		}
		if seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		if i >= n {
			return nil, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] == '}' && i == n-1 && seen&hasRequired == hasRequired {
			return d, true
		}
		return nil, false
	}
}

// plainString reads the string literal at b[i] if it has no escapes and
// no control characters; j is the index after its closing quote.
func plainString(b []byte, i int) (s []byte, j int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j = i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainInteger reads a non-negative integer without exponent, fraction
// or leading zero, of at most 16 digits and at most 2^53.
func plainInteger(b []byte, i int) (v int64, j int, ok bool) {
	j = i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		v = v*10 + int64(b[j]-'0')
		j++
		if j-i > 16 {
			return 0, 0, false
		}
	}
	if j == i || (b[i] == '0' && j-i > 1) || v > envelope.MaxDeltaSeq {
		return 0, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	return v, j, true
}

// deltaType returns the type s names, "" for anything else.
func deltaType(s []byte) envelope.DeltaType {
	switch string(s) { // compared, not converted: no allocation
	case string(envelope.DeltaPatch):
		return envelope.DeltaPatch
	case string(envelope.DeltaChunk):
		return envelope.DeltaChunk
	case string(envelope.DeltaProgress):
		return envelope.DeltaProgress
	case string(envelope.DeltaDone):
		return envelope.DeltaDone
	case string(envelope.DeltaCancel):
		return envelope.DeltaCancel
	case string(envelope.DeltaError):
		return envelope.DeltaError
	}
	return ""
}

// plainTime reports whether s is "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z" naming a
// real instant (no leap second): a form both ParseTime and the schema's
// date-time format accept.
func plainTime(s []byte) bool {
	if len(s) < 20 || len(s) > 30 || s[len(s)-1] != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return false
	}
	num := func(at, width int) int {
		v := 0
		for k := at; k < at+width; k++ {
			c := s[k]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return false
	}
	if day > time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return false
	}
	frac := s[19 : len(s)-1]
	if len(frac) == 0 {
		return true
	}
	if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
		return false
	}
	for _, c := range frac[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// compactCopy returns a copy of the valid JSON text b, without whitespace
// when space says it has some outside strings.
func compactCopy(b []byte, space bool) []byte {
	if !space {
		return bytes.Clone(b)
	}
	var c bytes.Buffer
	c.Grow(len(b))
	if json.Compact(&c, b) != nil {
		return bytes.Clone(b) // not reached: b was scanned
	}
	return c.Bytes()
}

// maxPlainMembers bounds the members of an object the fast path checks
// for duplicates (pairwise); larger objects go the slow way.
const maxPlainMembers = 16

// payloadScanner validates a JSON value strictly, as envelope's decoders
// would accept it, or gives up (false): on anything it does not vouch
// for — an escaped member name, a duplicate member, an escape of a
// surrogate, a number with an exponent or more than 15 digits, more
// than maxPlainMembers members, nesting deeper than envelope.MaxDepth,
// or invalid JSON.
type payloadScanner struct {
	b     []byte
	i     int
	space bool     // whitespace was skipped
	keys  [][]byte // member names of the open objects
}

func (p *payloadScanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.space = true
			p.i++
		default:
			return
		}
	}
}

// value scans the value at p.i, which is at nesting depth depth (the
// delta itself is depth 1, so a payload object opens depth 2).
func (p *payloadScanner) value(depth int) bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return false
}

func (p *payloadScanner) literal(s string) bool {
	if !bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		return false
	}
	p.i += len(s)
	return true
}

func (p *payloadScanner) object(depth int) bool {
	if depth > envelope.MaxDepth {
		return false
	}
	p.i++ // {
	start := len(p.keys)
	defer func() { p.keys = p.keys[:start] }()
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return true
	}
	for {
		p.ws()
		key, j, ok := plainString(p.b, p.i)
		if !ok {
			return false
		}
		if len(p.keys)-start >= maxPlainMembers {
			return false
		}
		for _, k := range p.keys[start:] {
			if bytes.Equal(k, key) {
				return false
			}
		}
		p.keys = append(p.keys, key)
		p.i = j
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return false
		}
		p.i++
		if !p.value(depth) {
			return false
		}
		p.ws()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

func (p *payloadScanner) array(depth int) bool {
	if depth > envelope.MaxDepth {
		return false
	}
	p.i++ // [
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return true
	}
	for {
		if !p.value(depth) {
			return false
		}
		p.ws()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return true
		default:
			return false
		}
	}
}

// str scans a string literal with valid escapes, none of a surrogate.
func (p *payloadScanner) str() bool {
	b := p.b
	for j := p.i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			p.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if j+1 >= len(b) {
				return false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+6 > len(b) {
					return false
				}
				r, err := strconv.ParseUint(string(b[j+2:j+6]), 16, 16)
				if err != nil || r >= 0xD800 && r <= 0xDFFF {
					return false
				}
				j += 5
			default:
				return false
			}
		}
	}
	return false
}

// number scans a JSON number without exponent and with at most 15
// digits, so that its magnitude is below 10^15 < 2^53.
func (p *payloadScanner) number() bool {
	b, i := p.b, p.i
	if b[i] == '-' {
		i++
	}
	digits := 0
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
		digits++
	}
	if digits == 0 || (b[start] == '0' && digits > 1) {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		frac := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			frac++
		}
		if frac == 0 {
			return false
		}
		digits += frac
	}
	if digits > 15 || i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		return false
	}
	p.i = i
	return true
}

// appendDelta appends the JSON of a delta to dst in the form
// fastDecodeDelta reads: quotedStreamID is the JSON string literal of
// the stream id, payload compact JSON or nil.
func appendDelta(dst []byte, seq int64, quotedStreamID []byte, ts time.Time, typ envelope.DeltaType, payload []byte) []byte {
	dst = append(dst, `{"delta_seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"stream_id":`...)
	dst = append(dst, quotedStreamID...)
	dst = append(dst, `,"ts":"`...)
	dst = ts.UTC().AppendFormat(dst, envelope.TimeFormat)
	dst = append(dst, `","type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, '"')
	if payload != nil {
		dst = append(dst, `,"payload":`...)
		dst = append(dst, payload...)
	}
	return append(dst, '}')
}

// checkPayload returns payload as a producer may send it: nil, or one
// JSON object the strict decoders accept, compacted. Anything else is a
// 4.00 *envelope.Error (the producer's mistake, not the peer's).
func checkPayload(payload []byte) ([]byte, error) {
	if payload == nil {
		return nil, nil
	}
	p := payloadScanner{b: payload}
	p.ws()
	start := p.i
	if p.i < len(payload) && payload[p.i] == '{' && utf8.Valid(payload) && p.value(1) {
		end := p.i
		p.ws()
		if p.i == len(payload) {
			return compactCopy(payload[start:end], p.space), nil
		}
	}
	// The slow, exact way: the delta a peer would decode.
	probe := appendDelta(nil, 0, []byte(`"s"`), time.Unix(0, 0), envelope.DeltaChunk, bytes.TrimSpace(payload))
	d, err := decodeDelta(probe)
	if err != nil {
		return nil, envelope.NewError(envelope.CodeBadRequest, "delta payload: "+envelope.AsError(err).Message, err)
	}
	return d.Payload, nil
}
