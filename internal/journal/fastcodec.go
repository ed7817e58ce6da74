package journal

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/canonical"
)

// The record line, written and read directly.
//
// appendRecordFast writes the line AppendRecord's encoding/json would,
// from the record's fields; decodeFast reads the lines agentry writes
// without encoding/json's reflection and its generic scanning. Each
// takes only what it is sure to handle exactly as encoding/json does and
// reports !ok for anything else — an escape in a string, invalid UTF-8,
// a member it does not know, null where a value is expected, a
// date-time in another form, raw data that encoding/json would compact —
// leaving it to the general path, which stays the reference and gives the
// error. TestFastCodecMatchesEncodingJSON and FuzzDecodeFast compare the
// two.

// appendRecordFast appends r's line (with its '\n') as AppendRecord's
// encoder writes it, or reports !ok.
func appendRecordFast(b []byte, r *govern.Record) ([]byte, bool) {
	if len(r.Data) > 0 && !canonical.CompactAsIs(r.Data, false) {
		return b, false
	}
	b = strconv.AppendUint(append(b, `{"seq":`...), r.Seq, 10)
	b = canonical.AppendJSONString(append(b, `,"prev":`...), r.Prev, false)
	b = canonical.AppendJSONString(append(b, `,"hash":`...), r.Hash, false)
	b = append(b, `,"timestamp":"`...)
	b = append(canonical.AppendTimeMillis(b, r.Timestamp.Time), '"')
	b = canonical.AppendJSONString(append(b, `,"kind":`...), r.Kind, false)
	b = canonical.AppendJSONString(append(b, `,"request_id":`...), r.RequestID, false)
	b = canonical.AppendJSONString(append(b, `,"trace_id":`...), r.TraceID, false)
	b = appendOptional(b, `,"parent_trace_id":`, r.ParentTraceID)
	b = appendOptional(b, `,"span_id":`, r.SpanID)
	b = appendOptional(b, `,"node":`, r.Node)
	if r.Epoch != 0 {
		b = strconv.AppendUint(append(b, `,"epoch":`...), r.Epoch, 10)
	}
	b = canonical.AppendJSONString(append(b, `,"actor":{"id":`...), r.Actor.ID, false)
	b = canonical.AppendJSONString(append(b, `,"kind":`...), r.Actor.Kind, false)
	b = append(b, '}')
	b = appendOptional(b, `,"from":`, r.From)
	b = appendOptional(b, `,"to":`, r.To)
	b = appendOptional(b, `,"tool":`, r.Tool)
	b = appendOptional(b, `,"call_id":`, r.CallID)
	b = canonical.AppendJSONString(append(b, `,"outcome":`...), r.Outcome, false)
	if len(r.Reasons) > 0 {
		b = append(b, `,"reasons":[`...)
		for i, reason := range r.Reasons {
			if i > 0 {
				b = append(b, ',')
			}
			b = canonical.AppendJSONString(b, reason, false)
		}
		b = append(b, ']')
	}
	b = appendOptional(b, `,"unique":`, r.Unique)
	if len(r.Data) > 0 {
		b = append(append(b, `,"data":`...), r.Data...)
	}
	return append(b, '}', '\n'), true
}

// appendOptional appends member (`,"name":`) and v unless v is empty.
func appendOptional[S ~string](b []byte, member string, v S) []byte {
	if v == "" {
		return b
	}
	return canonical.AppendJSONString(append(b, member...), v, false)
}

// The members of a record line, as bits of decodeFast's seen set.
const (
	mSeq = 1 << iota
	mPrev
	mHash
	mTimestamp
	mKind
	mRequestID
	mTraceID
	mParentTraceID
	mSpanID
	mNode
	mEpoch
	mActor
	mFrom
	mTo
	mTool
	mCallID
	mOutcome
	mReasons
	mUnique
	mData

	mRequired = mSeq | mPrev | mHash | mTimestamp | mKind | mRequestID | mTraceID | mActor | mOutcome
)

// memberBit returns the bit of a record member's name, or 0.
func memberBit(key []byte) int {
	switch string(key) {
	case "seq":
		return mSeq
	case "prev":
		return mPrev
	case "hash":
		return mHash
	case "timestamp":
		return mTimestamp
	case "kind":
		return mKind
	case "request_id":
		return mRequestID
	case "trace_id":
		return mTraceID
	case "parent_trace_id":
		return mParentTraceID
	case "span_id":
		return mSpanID
	case "node":
		return mNode
	case "epoch":
		return mEpoch
	case "actor":
		return mActor
	case "from":
		return mFrom
	case "to":
		return mTo
	case "tool":
		return mTool
	case "call_id":
		return mCallID
	case "outcome":
		return mOutcome
	case "reasons":
		return mReasons
	case "unique":
		return mUnique
	case "data":
		return mData
	}
	return 0
}

// fastDecoder reads one record line.
type fastDecoder struct {
	in []byte
	i  int
	// The record's strings are cut from one string of the line (up to
	// its data, which the record's Data holds) once the line is read:
	// until then they are spans of it.
	spans   [24]span
	nspans  int
	reasons []span
}

type span struct {
	dst        *string
	start, end int
}

// str reads a string without escapes, of valid UTF-8, into *dst (once
// the line is read).
func (d *fastDecoder) str(dst *string) bool {
	start, end, ok := d.strSpan()
	if !ok || d.nspans == len(d.spans) {
		return false
	}
	d.spans[d.nspans] = span{dst, start, end}
	d.nspans++
	return true
}

// strings sets the strings read, from one string of the line up to end.
func (d *fastDecoder) strings(end int, reasons []govern.Reason) {
	text := string(d.in[:end])
	cut := func(s span) string {
		if s.end <= end {
			return text[s.start:s.end]
		}
		return string(d.in[s.start:s.end])
	}
	for _, s := range d.spans[:d.nspans] {
		*s.dst = cut(s)
	}
	for i, s := range d.reasons {
		reasons[i] = govern.Reason(cut(s))
	}
}

// borrowStrings sets the strings read as views of the line.
func (d *fastDecoder) borrowStrings(reasons []govern.Reason) {
	cut := func(s span) string {
		if s.end == s.start {
			return ""
		}
		return unsafe.String(&d.in[s.start], s.end-s.start)
	}
	for _, s := range d.spans[:d.nspans] {
		*s.dst = cut(s)
	}
	for i, s := range d.reasons {
		reasons[i] = govern.Reason(cut(s))
	}
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// decodeFast decodes a record line as DecodeRecord does, or reports !ok.
func decodeFast(line []byte) (govern.Record, bool) {
	var r govern.Record
	ok := decodeInto(line, &r, false)
	return r, ok
}

// decodeBorrowed is decodeFast for a record that is only checked and
// dropped (Open's): its strings and Data are views of line, valid only
// while line is; and its Data is not scanned — it is taken to be the
// rest of the line up to the record's closing brace, which holds when
// data is the record's last member, as agentry writes it. The record is
// therefore only as sound as its Data: the caller must compute its hash
// (which parses Data strictly, and fails on anything DecodeRecord
// refuses, trailing members included) and, if that fails, decode the
// line with DecodeRecord for the error.
func decodeBorrowed(line []byte, r *govern.Record) bool {
	return decodeInto(line, r, true)
}

// decodeInto decodes line into *r (which it zeroes first), a view of
// line with borrow; !ok leaves *r undefined.
func decodeInto(line []byte, r *govern.Record, borrow bool) bool {
	*r = govern.Record{}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if len(line) >= MaxRecordSize || len(line) == 0 || line[0] != '{' {
		return false
	}
	d := fastDecoder{in: line, i: 1}
	textEnd := len(line) // where the data begins, when it is there
	seen := 0
	for {
		d.space()
		if !d.consume('"') {
			return false
		}
		keyStart := d.i
		for d.i < len(d.in) && d.in[d.i] != '"' && d.in[d.i] != '\\' {
			d.i++
		}
		if !d.consume('"') {
			return false
		}
		bit := memberBit(d.in[keyStart : d.i-1])
		if bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		d.space()
		if !d.consume(':') {
			return false
		}
		d.space()
		ok := true
		switch bit {
		case mSeq:
			r.Seq, ok = d.uint()
		case mEpoch:
			r.Epoch, ok = d.uint()
		case mPrev:
			ok = d.str(&r.Prev)
		case mHash:
			ok = d.str(&r.Hash)
		case mTimestamp:
			var start, end int
			if start, end, ok = d.strSpan(); ok {
				r.Timestamp.Time, ok = parseTimeMillis(line[start:end])
			}
		case mKind:
			ok = d.str((*string)(&r.Kind))
		case mRequestID:
			ok = d.str(&r.RequestID)
		case mTraceID:
			ok = d.str(&r.TraceID)
		case mParentTraceID:
			ok = d.str(&r.ParentTraceID)
		case mSpanID:
			ok = d.str(&r.SpanID)
		case mNode:
			ok = d.str(&r.Node)
		case mActor:
			ok = d.actor(&r.Actor)
		case mFrom:
			ok = d.str((*string)(&r.From))
		case mTo:
			ok = d.str((*string)(&r.To))
		case mTool:
			ok = d.str(&r.Tool)
		case mCallID:
			ok = d.str(&r.CallID)
		case mOutcome:
			ok = d.str((*string)(&r.Outcome))
		case mReasons:
			r.Reasons, ok = d.readReasons()
		case mUnique:
			ok = d.str(&r.Unique)
		case mData:
			start := d.i
			if borrow {
				end := len(d.in) - 1
				for end > start && isSpace(d.in[end-1]) {
					end--
				}
				if d.in[len(d.in)-1] != '}' || end == start || (seen|mData)&mRequired != mRequired {
					return false
				}
				r.Data = d.in[start:end:end]
				d.borrowStrings(r.Reasons)
				return true
			}
			if ok = d.skipValue(0); ok {
				r.Data = bytes.Clone(d.in[start:d.i])
				textEnd = start
			}
		}
		if !ok {
			return false
		}
		d.space()
		if d.consume('}') {
			break
		}
		if !d.consume(',') {
			return false
		}
	}
	d.space()
	if d.i != len(d.in) || seen&mRequired != mRequired {
		return false
	}
	if borrow {
		d.borrowStrings(r.Reasons)
		return true
	}
	d.strings(textEnd, r.Reasons)
	return true
}

func (d *fastDecoder) space() {
	for d.i < len(d.in) {
		switch d.in[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) consume(c byte) bool {
	if d.i < len(d.in) && d.in[d.i] == c {
		d.i++
		return true
	}
	return false
}

// uint reads a non-negative integer literal that fits a uint64.
func (d *fastDecoder) uint() (uint64, bool) {
	start := d.i
	for d.i < len(d.in) && d.in[d.i] >= '0' && d.in[d.i] <= '9' {
		d.i++
	}
	lit := d.in[start:d.i]
	if len(lit) == 0 || len(lit) > 1 && lit[0] == '0' {
		return 0, false
	}
	if d.i < len(d.in) {
		if c := d.in[d.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(string(lit), 10, 64)
	return v, err == nil
}

// strSpan reads a string without escapes, of valid UTF-8, and returns
// the span of its text.
func (d *fastDecoder) strSpan() (start, end int, ok bool) {
	if !d.consume('"') {
		return 0, 0, false
	}
	start = d.i
	ascii := true
	d.i += canonical.PlainRun(d.in[d.i:])
	for d.i < len(d.in) {
		c := d.in[d.i]
		switch {
		case c == '"':
			end = d.i
			d.i++
			return start, end, ascii || utf8.Valid(d.in[start:end])
		case c == '\\' || c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return 0, 0, false
}

// actor reads the actor object: its id and kind, each once.
func (d *fastDecoder) actor(a *govern.Actor) bool {
	if !d.consume('{') {
		return false
	}
	var haveID, haveKind bool
	for {
		d.space()
		start, end, ok := d.strSpan()
		if !ok {
			return false
		}
		d.space()
		if !d.consume(':') {
			return false
		}
		d.space()
		switch key := d.in[start:end]; {
		case string(key) == "id" && !haveID:
			haveID = true
			ok = d.str(&a.ID)
		case string(key) == "kind" && !haveKind:
			haveKind = true
			ok = d.str((*string)(&a.Kind))
		default:
			return false
		}
		if !ok {
			return false
		}
		d.space()
		if d.consume('}') {
			return haveID && haveKind
		}
		if !d.consume(',') {
			return false
		}
	}
}

// reasons reads an array of strings ([] is an empty, non-nil slice, as
// encoding/json makes it), set with the other strings.
func (d *fastDecoder) readReasons() ([]govern.Reason, bool) {
	if !d.consume('[') {
		return nil, false
	}
	d.space()
	if d.consume(']') {
		return []govern.Reason{}, true
	}
	for {
		d.space()
		start, end, ok := d.strSpan()
		if !ok {
			return nil, false
		}
		d.reasons = append(d.reasons, span{nil, start, end})
		d.space()
		if d.consume(']') {
			return make([]govern.Reason, len(d.reasons)), true
		}
		if !d.consume(',') {
			return nil, false
		}
	}
}

// maxDataDepth bounds the nesting of data decodeFast reads itself (the
// general path allows more).
const maxDataDepth = 512

// skipValue reads over one JSON value, checking its syntax as
// encoding/json's scanner does: any byte from 0x20 up in a string (it
// does not check UTF-8 either), the escapes JSON defines.
func (d *fastDecoder) skipValue(depth int) bool {
	if depth > maxDataDepth || d.i == len(d.in) {
		return false
	}
	switch c := d.in[d.i]; {
	case c == '{':
		d.i++
		d.space()
		if d.consume('}') {
			return true
		}
		for {
			d.space()
			if d.i == len(d.in) || d.in[d.i] != '"' || !d.skipString() {
				return false
			}
			d.space()
			if !d.consume(':') {
				return false
			}
			d.space()
			if !d.skipValue(depth + 1) {
				return false
			}
			d.space()
			if d.consume('}') {
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	case c == '[':
		d.i++
		d.space()
		if d.consume(']') {
			return true
		}
		for {
			d.space()
			if !d.skipValue(depth + 1) {
				return false
			}
			d.space()
			if d.consume(']') {
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	case c == '"':
		return d.skipString()
	case c == '-' || c >= '0' && c <= '9':
		return d.skipNumber()
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(d.in[d.i:], []byte(lit)) {
			d.i += len(lit)
			return true
		}
	}
	return false
}

func (d *fastDecoder) skipString() bool {
	d.i++ // "
	for d.i < len(d.in) {
		d.i += canonical.PlainRun(d.in[d.i:])
		if d.i == len(d.in) {
			break
		}
		c := d.in[d.i]
		switch {
		case c == '"':
			d.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			n := canonical.EscapeLen(d.in[d.i:])
			if n == 0 {
				return false
			}
			d.i += n
			continue
		}
		d.i++
	}
	return false
}

// skipNumber reads over a number literal of JSON's grammar.
func (d *fastDecoder) skipNumber() bool {
	end, ok := canonical.NumberEnd(d.in, d.i)
	d.i = end
	return ok
}

// parseTimeMillis reads "YYYY-MM-DDTHH:MM:SS.mmmZ", the form agentry
// writes, into the time govern.Time's decoder makes of it (in UTC); any
// other form, or a date or time out of range, is !ok.
func parseTimeMillis(s []byte) (time.Time, bool) {
	if len(s) != 24 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z' {
		return time.Time{}, false
	}
	num := func(from, to int) (int, bool) {
		n := 0
		for _, c := range s[from:to] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 7)
	day, ok3 := num(8, 10)
	hour, ok4 := num(11, 13)
	minute, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	ms, ok7 := num(20, 23)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, ms*1e6, time.UTC), true
}

func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
