package uicontrol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/agentry-dev/agentry/internal/uiapwire"
)

// Version is the UIAP Core version this package implements.
const Version = "0.1"

// DefaultMaxMessageSize bounds the bytes of one message a peer reads
// unless its options say otherwise (1 MiB).
const DefaultMaxMessageSize = 1 << 20

// maxIDLength bounds MessageId and SessionId (§3: 1..128 characters).
const maxIDLength = 128

// maxMessageDepth bounds the nesting of a message: encoding/json's own
// bound, so that UI trees keep the room they had.
const maxMessageDepth = 10000

// Kind is an envelope's kind (§5).
type Kind string

// The four message kinds of §5.
const (
	KindRequest  Kind = "request"
	KindResponse Kind = "response"
	KindEvent    Kind = "event"
	KindError    Kind = "error"
)

// EndpointRef names a sender or receiver (§4).
type EndpointRef struct {
	Role       string `json:"role"`
	ID         string `json:"id"`
	InstanceID string `json:"instanceId,omitempty"`
}

// Envelope is one UIAP message (§4). Payload is the payload object as
// JSON text; Ext holds extension data by extension ID. Seq 0 means the
// message carries no seq.
type Envelope struct {
	UIAP          string
	Kind          Kind
	Type          string
	ID            string
	SessionID     string
	CorrelationID string
	TS            time.Time
	Source        EndpointRef
	Target        *EndpointRef
	Seq           int64
	Requires      []string
	Payload       json.RawMessage
	Ext           map[string]json.RawMessage
}

// timeFormat is the form of the ts field this package writes: ISO 8601
// in UTC at millisecond precision, as in the spec's examples.
const timeFormat = "2006-01-02T15:04:05.000Z"

// MarshalJSON writes the envelope with the spec's field names in the
// spec's order, omitting absent optional fields; a nil Payload is written
// as {} (§4.1 rule 2: never null). The output is byte for byte what
// encoding/json writes for these fields (strings and raw JSON with <, >
// and & escaped, ext in key order), written directly.
func (e *Envelope) MarshalJSON() ([]byte, error) {
	return e.appendJSON(make([]byte, 0, 224+len(e.Payload)))
}

func (e *Envelope) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"uiap":`...)
	b = appendJSONString(b, e.UIAP)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(e.Kind))
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"id":`...)
	b = appendJSONString(b, e.ID)
	if e.SessionID != "" {
		b = append(b, `,"sessionId":`...)
		b = appendJSONString(b, e.SessionID)
	}
	if e.CorrelationID != "" {
		b = append(b, `,"correlationId":`...)
		b = appendJSONString(b, e.CorrelationID)
	}
	b = append(b, `,"ts":`...)
	b = appendJSONString(b, e.TS.UTC().Format(timeFormat))
	b = append(b, `,"source":`...)
	b = appendEndpointRef(b, &e.Source)
	if e.Target != nil {
		b = append(b, `,"target":`...)
		b = appendEndpointRef(b, e.Target)
	}
	if e.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, e.Seq, 10)
	}
	if len(e.Requires) > 0 {
		b = append(b, `,"requires":[`...)
		for i, r := range e.Requires {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, r)
		}
		b = append(b, ']')
	}
	p := e.Payload
	if isNull(p) {
		p = json.RawMessage("{}")
	}
	b = append(b, `,"payload":`...)
	var err error
	if b, err = appendRawJSON(b, p); err != nil {
		return nil, fmt.Errorf("uicontrol: envelope payload: %w", err)
	}
	if len(e.Ext) > 0 {
		b = append(b, `,"ext":{`...)
		for i, id := range slices.Sorted(maps.Keys(e.Ext)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, id)
			b = append(b, ':')
			if b, err = appendRawJSON(b, e.Ext[id]); err != nil {
				return nil, fmt.Errorf("uicontrol: envelope ext %q: %w", id, err)
			}
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func appendEndpointRef(b []byte, r *EndpointRef) []byte {
	b = append(b, `{"role":`...)
	b = appendJSONString(b, r.Role)
	b = append(b, `,"id":`...)
	b = appendJSONString(b, r.ID)
	if r.InstanceID != "" {
		b = append(b, `,"instanceId":`...)
		b = appendJSONString(b, r.InstanceID)
	}
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes a string: printable
// ASCII other than ", \, <, > and & as is, anything else through
// encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendRawJSON appends raw as encoding/json writes a json.RawMessage:
// validated, compacted, with <, >, &, U+2028 and U+2029 escaped; nil is
// null (and empty but not nil is refused, as it is not JSON).
func appendRawJSON(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	start := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	b = buf.Bytes()
	if bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, b[start:])
		b = append(b[:start], esc.Bytes()...)
	}
	return b, nil
}

// envelopeFields are the members UIAP Core defines; an ext entry must not
// be named like one (§4.1 rule 5, §12 rule 5).
var envelopeFields = map[string]bool{
	"uiap": true, "kind": true, "type": true, "id": true, "sessionId": true, "correlationId": true,
	"ts": true, "source": true, "target": true, "seq": true, "requires": true, "payload": true, "ext": true,
}

// validVersion reports whether v has the form major.minor (§3): one to
// nine digits, a dot, one to nine digits.
func validVersion(v string) bool {
	major, minor, ok := strings.Cut(v, ".")
	return ok && digits(major) && digits(minor)
}

func digits(s string) bool {
	if len(s) < 1 || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// DecodeEnvelope decodes one message from untrusted bytes under the
// envelope rules of §4.1 and returns it, or an *Error with code
// invalid_message saying what is wrong. It refuses:
//
//   - more than DefaultMaxMessageSize bytes, invalid UTF-8, a \u escape
//     of a lone surrogate (anywhere, payload included), anything but
//     exactly one JSON object;
//   - a member name given twice in the envelope, source or target
//     (names match exactly, case included);
//   - a missing required field (uiap, kind, type, id, ts, source,
//     payload) or one of the wrong type; a payload that is not an object;
//   - uiap not of the form major.minor; kind not one of the four kinds;
//     type "error" with another kind or kind "error" with another type;
//   - an id, sessionId or correlationId not of 1..128 characters;
//   - ts not an RFC 3339 date-time in UTC;
//   - a response without correlationId;
//   - source or target without a non-empty role and id;
//   - seq not a non-negative integer; requires not an array of non-empty
//     strings;
//   - ext not an object, or an ext entry named like a core envelope field
//     or inside a core namespace (session.*, capabilities.*, error).
//
// Unknown members are ignored; an optional member whose value is null
// counts as absent. An error without correlationId is accepted: a peer
// that could not read a message's id answers without one.
func DecodeEnvelope(b []byte) (*Envelope, error) {
	e, err := decodeEnvelope(b, DefaultMaxMessageSize)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// decodeEnvelope is DecodeEnvelope with a size limit. On failure it also
// returns what it could read (ID, Kind, Type, each only if valid) so that
// the error can be correlated.
func decodeEnvelope(b []byte, maxSize int) (*Envelope, *Error) {
	e := &Envelope{}
	if len(b) > maxSize {
		return e, newErrorf(CodeInvalidMessage, "message larger than %d bytes", maxSize)
	}
	// One JSON value and nothing after it; invalid UTF-8 and lone
	// surrogate escapes, which encoding/json would turn into U+FFFD
	// further down, refused (DESIGN §2).
	if err := strictjson.Check(b, &strictjson.Options{MaxSize: maxSize, MaxDepth: maxMessageDepth}); err != nil {
		switch {
		case errors.Is(err, strictjson.ErrInvalidUTF8):
			return e, NewError(CodeInvalidMessage, "message is not valid UTF-8")
		case errors.Is(err, strictjson.ErrLoneSurrogate):
			return e, NewError(CodeInvalidMessage, "message holds a lone surrogate escape: "+err.Error())
		}
		return e, NewError(CodeInvalidMessage, "message is not a JSON object")
	}
	var m envelopeMembers
	if dup, err := m.read(b); err != nil {
		if err == errDuplicate {
			return e, newErrorf(CodeInvalidMessage, "member %q given twice", dup).with("field", dup)
		}
		return e, NewError(CodeInvalidMessage, "message is not a JSON object")
	}
	fail := func(name, problem string) *Error {
		return newErrorf(CodeInvalidMessage, "%s %s", name, problem).with("field", name)
	}
	// What identifies the message comes first, so that an error about
	// anything else can name it.
	if id, ok := readString(m.id); ok && runeLen(id, maxIDLength) {
		e.ID = id
	}
	if k, ok := readString(m.kind); ok && validKind(Kind(k)) {
		e.Kind = Kind(k)
	}
	if t, ok := readString(m.typ); ok && t != "" {
		e.Type = t
	}

	for _, r := range [...]struct {
		name string
		raw  json.RawMessage
	}{{"uiap", m.uiap}, {"kind", m.kind}, {"type", m.typ}, {"id", m.id}, {"ts", m.ts}, {"source", m.source}, {"payload", m.payload}} {
		if r.name == "payload" && r.raw != nil && isNull(r.raw) {
			return e, fail(r.name, "must be a JSON object, not null")
		}
		if isNull(r.raw) {
			return e, fail(r.name, "missing")
		}
	}
	var ok bool
	if e.UIAP, ok = readString(m.uiap); !ok || !validVersion(e.UIAP) {
		return e, fail("uiap", "must be a version of the form major.minor")
	}
	if e.Kind == "" {
		return e, fail("kind", `must be "request", "response", "event" or "error"`)
	}
	if e.Type == "" {
		return e, fail("type", "must be a non-empty string")
	}
	if (e.Kind == KindError) != (e.Type == uiapwire.TypeError) {
		return e, fail("type", `must be "error" exactly when kind is "error"`)
	}
	if e.ID == "" {
		return e, fail("id", "must be a string of 1..128 characters")
	}
	ts, ok := readString(m.ts)
	if !ok {
		return e, fail("ts", "must be a string")
	}
	if e.TS, ok = parseTimestamp(ts); !ok {
		return e, fail("ts", "must be an ISO 8601 date-time in UTC")
	}
	src, perr := endpointRef(m.source, "source")
	if perr != nil {
		return e, perr
	}
	e.Source = *src
	if m.payload[0] != '{' {
		return e, fail("payload", "must be a JSON object")
	}
	e.Payload = m.payload

	if raw := m.sessionID; !isNull(raw) {
		if e.SessionID, ok = readString(raw); !ok || !runeLen(e.SessionID, maxIDLength) {
			return e, fail("sessionId", "must be a string of 1..128 characters")
		}
	}
	if raw := m.correlationID; !isNull(raw) {
		if e.CorrelationID, ok = readString(raw); !ok || !runeLen(e.CorrelationID, maxIDLength) {
			return e, fail("correlationId", "must be a string of 1..128 characters")
		}
	} else if e.Kind == KindResponse {
		return e, fail("correlationId", "missing (required for a response)")
	}
	if raw := m.target; !isNull(raw) {
		if e.Target, perr = endpointRef(raw, "target"); perr != nil {
			return e, perr
		}
	}
	if raw := m.seq; !isNull(raw) {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < 0 {
			return e, fail("seq", "must be a non-negative integer")
		}
		e.Seq = n
	}
	if m.requires != nil {
		f := &fields{m: map[string]json.RawMessage{"requires": m.requires}, path: "envelope"}
		if e.Requires = f.strs("requires", false); f.err != nil {
			return e, fail("requires", "must be an array of non-empty strings")
		}
	}
	if raw := m.ext; !isNull(raw) {
		ext, dup, err := parseValidObject(raw)
		if err != nil {
			if err == errDuplicate {
				return e, newErrorf(CodeInvalidMessage, "ext entry %q given twice", dup).with("field", "ext")
			}
			return e, fail("ext", "must be an object")
		}
		for id, v := range ext {
			if !validExtensionKey(id) {
				return e, newErrorf(CodeInvalidMessage, "ext entry %q is not an extension ID (core fields and namespaces cannot be overridden)", id).with("field", "ext")
			}
			if isNull(v) {
				delete(ext, id)
			}
		}
		if len(ext) > 0 {
			e.Ext = ext
		}
	}
	return e, nil
}

func validKind(k Kind) bool {
	return k == KindRequest || k == KindResponse || k == KindEvent || k == KindError
}

// validExtensionKey reports whether id may name an ext entry: not empty,
// not a core envelope field, not in a core namespace (§6).
func validExtensionKey(id string) bool {
	if id == "" || envelopeFields[id] || id == "error" || id == "session" || id == "capabilities" {
		return false
	}
	return !strings.HasPrefix(id, "session.") && !strings.HasPrefix(id, "capabilities.") && !strings.HasPrefix(id, "error.")
}

// readString decodes raw if it is a JSON string.
func readString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), true // nothing to unescape
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// parseTimestamp accepts an RFC 3339 date-time whose offset is zero.
func parseTimestamp(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	if _, off := t.Zone(); off != 0 {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// envelopeMembers are the raw values of an envelope's members (nil:
// absent), read in one pass without a map.
type envelopeMembers struct {
	uiap, kind, typ, id, sessionID, correlationID, ts, source, target, seq, requires, payload, ext json.RawMessage
}

// read fills m from the JSON object b (valid JSON), refusing a member
// name given twice (it returns the name with errDuplicate); members
// UIAP Core does not define are ignored.
func (m *envelopeMembers) read(b []byte) (string, error) {
	var others map[string]bool // names of members UIAP Core does not define
	var dup string
	err := eachMember(b, func(name []byte, v json.RawMessage) error {
		var slot *json.RawMessage
		switch string(name) {
		case "uiap":
			slot = &m.uiap
		case "kind":
			slot = &m.kind
		case "type":
			slot = &m.typ
		case "id":
			slot = &m.id
		case "sessionId":
			slot = &m.sessionID
		case "correlationId":
			slot = &m.correlationID
		case "ts":
			slot = &m.ts
		case "source":
			slot = &m.source
		case "target":
			slot = &m.target
		case "seq":
			slot = &m.seq
		case "requires":
			slot = &m.requires
		case "payload":
			slot = &m.payload
		case "ext":
			slot = &m.ext
		default:
			if others[string(name)] {
				dup = string(name)
				return errDuplicate
			}
			if others == nil {
				others = map[string]bool{}
			}
			others[string(name)] = true
			return nil
		}
		if *slot != nil {
			dup = string(name)
			return errDuplicate
		}
		*slot = v
		return nil
	})
	return dup, err
}

func endpointRef(raw json.RawMessage, name string) (*EndpointRef, *Error) {
	m, dup, err := parseValidObject(raw)
	if err != nil {
		if err == errDuplicate {
			return nil, newErrorf(CodeInvalidMessage, "%s: member %q given twice", name, dup).with("field", name)
		}
		return nil, newErrorf(CodeInvalidMessage, "%s must be an object", name).with("field", name)
	}
	f := &fields{m: m, path: name}
	r := &EndpointRef{Role: f.str("role", true), ID: f.str("id", true), InstanceID: f.str("instanceId", false)}
	if f.err != nil {
		return nil, f.err
	}
	return r, nil
}
