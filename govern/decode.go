package govern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/strictjson"
)

// Strict decoding of UAICP objects received from peers (DESIGN §2: decode
// untrusted input strictly). The Unmarshal methods of the wire types are
// for trusted data (the journal); these decoders are for bytes from
// anywhere else.

// maxObjectSize bounds the JSON text DecodeEnvelope, DecodeEvidence and
// DecodeReport read.
const maxObjectSize = 1 << 20

// DecodeError says why a strict decoder refused its input: the first
// problem found, checking members in the schema's order.
type DecodeError struct {
	// Path is the JSON Pointer (RFC 6901) of the offending value, or of
	// the missing member; "" for the document itself.
	Path string
	// Message says what is wrong.
	Message string
}

// Error returns "govern: decode: " followed by the path, cut to 64 bytes,
// when there is one, and the message.
func (e *DecodeError) Error() string {
	if e.Path == "" {
		return "govern: decode: " + e.Message
	}
	return "govern: decode: " + cut(e.Path) + ": " + e.Message
}

// DecodeEnvelope decodes a message envelope from untrusted bytes. It
// accepts only what message-envelope.schema.json accepts (required
// members present — present, not merely non-zero —, types, enums,
// minLength, request_id a UUID, timestamp an RFC 3339 date-time, no
// top-level member the schema does not name), and refuses, beyond the
// schema:
//
//   - more than 1 MiB, invalid UTF-8, anything but one JSON
//     value (surrounding whitespace aside), nesting deeper than
//     encoding/json allows (10000);
//   - an object anywhere with a member name twice;
//   - a date-time with a leap second (second 60), with non-digits in a
//     numeric field, or whose instant falls outside the years 0000–9999
//     in UTC (it would have no RFC 3339 form in UTC);
//   - a stream_index that does not fit in an int; a number in metadata,
//     identity extensions or rollback payload beyond float64 range (such
//     values decode as with encoding/json: numbers become float64).
//
// Member names match exactly, case included: unlike encoding/json,
// "Request_ID" is not "request_id" (in the envelope it is an unknown
// member, refused). A date-time keeps its precision and is returned in
// UTC; it is written back at millisecond precision (TimeFormat). The
// uaicp_version is not checked against Version: any string is accepted.
// Members the Go types have no field for inside streaming and
// rollback_action (which the schema leaves open) are accepted and
// dropped; an empty metadata object decodes as nil.
//
// Every refusal is a *DecodeError. An accepted envelope re-encoded with
// encoding/json validates against the schema.
func DecodeEnvelope(b []byte) (*Envelope, error) {
	o, err := decodeDocument(b)
	if err != nil {
		return nil, err
	}
	o.closed("uaicp_version", "request_id", "trace_id", "parent_trace_id", "state", "timestamp", "identity",
		"outcome", "streaming", "rollback_action", "metadata")
	e := &Envelope{
		UAICPVersion:  o.str("uaicp_version", true, nil),
		RequestID:     o.str("request_id", true, checkUUID),
		TraceID:       o.str("trace_id", true, nonEmpty),
		ParentTraceID: o.str("parent_trace_id", false, nonEmpty),
		State:         Phase(o.str("state", true, oneOf(phases))),
		Timestamp:     o.dateTime("timestamp", true),
	}
	if id := o.object("identity", true); id != nil {
		e.Identity = Identity{
			AgentID:      id.str("agent_id", true, nonEmpty),
			OwnerID:      id.str("owner_id", true, nonEmpty),
			UserID:       id.str("user_id", false, nonEmpty),
			ControlClass: ControlClass(id.str("control_class", true, oneOf(controlClasses))),
		}
		e.Identity.Extra = id.extra("agent_id", "owner_id", "user_id", "control_class")
	}
	e.Outcome = Outcome(o.str("outcome", true, oneOf(outcomes)))
	if s := o.object("streaming", false); s != nil {
		e.Streaming = &Streaming{ChunkID: s.str("chunk_id", false, nil), IsFinal: s.boolean("is_final"), StreamIndex: s.integer("stream_index")}
	}
	if r := o.object("rollback_action", false); r != nil {
		e.Rollback = &RollbackAction{Type: r.str("type", false, nil), Target: r.str("target", false, nil), Payload: r.objectOrString("payload")}
	}
	if m := o.object("metadata", false); m != nil {
		e.Metadata = m.extra()
	}
	if o.st.err != nil {
		return nil, o.st.err
	}
	return e, nil
}

// DecodeEvidence decodes an evidence object from untrusted bytes under the
// rules of DecodeEnvelope, against evidence-object.schema.json. The
// schema is open: members it does not name go to Extra (numbers as
// float64). The payload may be any JSON value; it is kept as JSON text in
// the form encoding/json writes it (compact, with <, > and & escaped), so
// that re-encoding leaves it unchanged. The hash is not checked against
// the payload (Evidence.CheckHash does).
func DecodeEvidence(b []byte) (*Evidence, error) {
	o, err := decodeDocument(b)
	if err != nil {
		return nil, err
	}
	e := &Evidence{
		EvidenceID:    o.str("evidence_id", true, nonEmpty),
		EvidenceType:  EvidenceType(o.str("evidence_type", true, oneOf(evidenceTypes))),
		Source:        o.str("source", true, nonEmpty),
		RequestID:     o.str("request_id", false, checkUUID),
		TraceID:       o.str("trace_id", false, nonEmpty),
		ParentTraceID: o.str("parent_trace_id", false, nonEmpty),
		Actor:         o.str("actor", false, nil),
		Hash:          o.str("hash", true, nil),
		CollectedAt:   o.dateTime("collected_at", true),
	}
	if v, ok := o.get("payload", false); ok {
		e.Payload = normalizeJSON(v.raw)
	}
	e.Extra = o.extra("evidence_id", "evidence_type", "source", "request_id", "trace_id", "parent_trace_id", "actor",
		"hash", "collected_at", "payload")
	if o.st.err != nil {
		return nil, o.st.err
	}
	return e, nil
}

// DecodeReport decodes a verification report from untrusted bytes under
// the rules of DecodeEnvelope, against verification-report.schema.json.
// Members the schema does not name go to Extra (numbers as float64);
// members of a check beyond check_id, result and details are accepted and
// dropped. An empty evidence_ids decodes as nil, an empty checks as an
// empty, non-nil slice.
func DecodeReport(b []byte) (*Report, error) {
	o, err := decodeDocument(b)
	if err != nil {
		return nil, err
	}
	r := &Report{
		ReportID:   o.str("report_id", true, nonEmpty),
		RequestID:  o.str("request_id", true, checkUUID),
		VerifierID: o.str("verifier_id", false, nonEmpty),
	}
	for i, raw := range o.array("evidence_ids", false) {
		r.EvidenceIDs = append(r.EvidenceIDs, o.element("evidence_ids", i, raw).stringValue())
	}
	r.Status = ReportStatus(o.str("status", true, oneOf(reportStatuses)))
	if checks := o.array("checks", true); checks != nil {
		r.Checks = make([]Check, 0, len(checks))
		for i, raw := range checks {
			c := o.element("checks", i, raw).asObject()
			if c == nil {
				break
			}
			r.Checks = append(r.Checks, Check{
				CheckID: c.str("check_id", true, nonEmpty),
				Result:  CheckResult(c.str("result", true, oneOf(checkResults))),
				Details: c.str("details", false, nil),
			})
		}
	}
	r.GeneratedAt = o.dateTime("generated_at", true)
	r.Extra = o.extra("report_id", "request_id", "verifier_id", "evidence_ids", "status", "checks", "generated_at")
	if o.st.err != nil {
		return nil, o.st.err
	}
	return r, nil
}

// The enums of the schemas, from the constants.
var (
	phases         = []string{string(Intake), string(Plan), string(Execute), string(Verify), string(Deliver), string(FailSafe)}
	outcomes       = []string{string(Success), string(Failure), string(Uncertain), string(Pending)}
	controlClasses = []string{string(Autonomous), string(HumanSupervised), string(HumanDirected)}
	evidenceTypes  = []string{string(ToolResult), string(SourceCitation), string(TestReport), string(ApprovalToken), string(CustomEvidence)}
	reportStatuses = []string{string(ReportPass), string(ReportFail), string(ReportPartial)}
	checkResults   = []string{string(CheckPass), string(CheckFail), string(CheckSkip)}
)

// decodeDocument applies the rules about the whole text and returns its
// top-level object.
func decodeDocument(b []byte) (*object, error) {
	// Checked as opaque JSON (a RawMessage): numbers are judged below,
	// where a payload keeps them as written.
	err := strictjson.Decode(b, new(json.RawMessage), &strictjson.Options{MaxSize: maxObjectSize, MaxDepth: maxDepth, DisallowDuplicates: true})
	switch {
	case errors.Is(err, strictjson.ErrTooLarge):
		return nil, &DecodeError{Message: fmt.Sprintf("document is %d bytes, more than %d", len(b), maxObjectSize)}
	case errors.Is(err, strictjson.ErrSyntax) || errors.Is(err, strictjson.ErrTrailingData):
		return nil, &DecodeError{Message: "not a JSON document: " + err.Error()}
	case err != nil:
		var se *strictjson.Error
		if !errors.As(err, &se) {
			return nil, &DecodeError{Message: err.Error()}
		}
		path := pointer(se.Path)
		switch {
		case errors.Is(err, strictjson.ErrTooDeep):
			path = "" // the nesting is the fault, not a member
		case errors.Is(err, strictjson.ErrDuplicate):
			// the pointer names the second occurrence
			if name, uerr := strconv.Unquote(strings.TrimPrefix(se.Message, "duplicate member ")); uerr == nil {
				path += "/" + escapePointer(name)
			}
		}
		return nil, &DecodeError{Path: path, Message: se.Message}
	}
	v := &value{st: &decodeState{}, raw: b}
	o := v.asObject()
	if o == nil {
		return nil, v.st.err
	}
	return o, nil
}

// maxDepth bounds the nesting of a document: encoding/json's own bound,
// so that the strict decoders accept every nesting encoding/json does.
const maxDepth = 10000

// pointer turns a strictjson path (a.b[2]["x.y"]) into a JSON Pointer
// (/a/b/2/x.y), the form of DecodeError.Path.
func pointer(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); {
		switch {
		case path[i] == '.':
			i++
		case path[i] == '[' && i+1 < len(path) && path[i+1] == '"':
			// a quoted member name: find the closing quote
			j := i + 2
			for j < len(path) && path[j] != '"' {
				if path[j] == '\\' {
					j++
				}
				j++
			}
			name, err := strconv.Unquote(path[i+1 : min(j+1, len(path))])
			if err != nil {
				name = path[i+1 : min(j+1, len(path))]
			}
			b.WriteString("/" + escapePointer(name))
			i = min(j+2, len(path)) // past '"]'
		case path[i] == '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				j = len(path) - i
			}
			b.WriteString("/" + path[i+1:i+j])
			i += j + 1
		default:
			j := i
			for j < len(path) && path[j] != '.' && path[j] != '[' {
				j++
			}
			b.WriteString("/" + escapePointer(path[i:j]))
			i = j
		}
	}
	return b.String()
}

// decodeState holds the first error of a decoding; once set, every
// accessor returns zero values.
type decodeState struct{ err *DecodeError }

func (st *decodeState) fail(path, msg string) {
	if st.err == nil {
		st.err = &DecodeError{Path: path, Message: msg}
	}
}

// value is one JSON value of the document, already known to be valid
// JSON without duplicate member names.
type value struct {
	st   *decodeState
	path string
	raw  json.RawMessage
}

// kind names the JSON type of v for messages.
func (v *value) kind() string {
	t := bytes.TrimLeft(v.raw, " \t\r\n")
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func (v *value) asObject() *object {
	if v.st.err != nil {
		return nil
	}
	if k := v.kind(); k != "an object" {
		v.st.fail(v.path, "must be an object, not "+k)
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v.raw, &m); err != nil {
		v.st.fail(v.path, err.Error())
		return nil
	}
	return &object{st: v.st, path: v.path, m: m}
}

func (v *value) stringValue() string {
	if v.st.err != nil {
		return ""
	}
	if k := v.kind(); k != "a string" {
		v.st.fail(v.path, "must be a string, not "+k)
		return ""
	}
	var s string
	if err := json.Unmarshal(v.raw, &s); err != nil {
		v.st.fail(v.path, err.Error())
	}
	return s
}

// anyValue decodes v as encoding/json does into an any.
func (v *value) anyValue() any {
	if v.st.err != nil {
		return nil
	}
	var x any
	if err := json.Unmarshal(v.raw, &x); err != nil {
		v.st.fail(v.path, "cannot be represented: "+strings.TrimPrefix(err.Error(), "json: "))
		return nil
	}
	return x
}

// object is a JSON object of the document; its accessors look members up
// by their exact name.
type object struct {
	st   *decodeState
	path string
	m    map[string]json.RawMessage
}

func (o *object) member(name string, raw json.RawMessage) *value {
	return &value{st: o.st, path: o.path + "/" + escapePointer(name), raw: raw}
}

func (o *object) element(name string, i int, raw json.RawMessage) *value {
	return &value{st: o.st, path: o.path + "/" + escapePointer(name) + "/" + strconv.Itoa(i), raw: raw}
}

// get returns the member name; a required member that is missing is an
// error.
func (o *object) get(name string, required bool) (*value, bool) {
	if o.st.err != nil {
		return nil, false
	}
	raw, ok := o.m[name]
	if !ok {
		if required {
			o.st.fail(o.path+"/"+escapePointer(name), "required member is missing"+o.caseHint(name))
		}
		return nil, false
	}
	return o.member(name, raw), true
}

// caseHint points at a member whose name differs from name only in case.
func (o *object) caseHint(name string) string {
	for _, k := range sortedKeys(o.m) {
		if k != name && strings.EqualFold(k, name) {
			return fmt.Sprintf(" (there is %q: member names are case-sensitive)", k)
		}
	}
	return ""
}

// str returns the string member name, checked by check (which returns
// what is wrong, or "").
func (o *object) str(name string, required bool, check func(string) string) string {
	v, ok := o.get(name, required)
	if !ok {
		return ""
	}
	s := v.stringValue()
	if check != nil && v.st.err == nil {
		if msg := check(s); msg != "" {
			v.st.fail(v.path, msg)
			return ""
		}
	}
	return s
}

func (o *object) boolean(name string) bool {
	v, ok := o.get(name, false)
	if !ok {
		return false
	}
	if k := v.kind(); k != "a boolean" {
		v.st.fail(v.path, "must be a boolean, not "+k)
		return false
	}
	return bytes.Equal(bytes.TrimSpace(v.raw), []byte("true"))
}

func (o *object) integer(name string) int {
	v, ok := o.get(name, false)
	if !ok {
		return 0
	}
	if k := v.kind(); k != "a number" {
		v.st.fail(v.path, "must be an integer, not "+k)
		return 0
	}
	text := string(bytes.TrimSpace(v.raw))
	n, integral, fits := jsonInteger(text)
	switch {
	case !integral:
		v.st.fail(v.path, "must be an integer, not "+cut(text))
	case !fits:
		v.st.fail(v.path, "integer "+cut(text)+" is out of range")
	}
	return n
}

func (o *object) dateTime(name string, required bool) Time {
	v, ok := o.get(name, required)
	if !ok {
		return Time{}
	}
	s := v.stringValue()
	if v.st.err != nil {
		return Time{}
	}
	t, err := parseDateTime(s)
	if err != nil {
		v.st.fail(v.path, err.Error())
		return Time{}
	}
	return Time{t}
}

// object returns the object member name, nil when it is missing or
// refused.
func (o *object) object(name string, required bool) *object {
	v, ok := o.get(name, required)
	if !ok {
		return nil
	}
	return v.asObject()
}

// array returns the elements of the array member name, nil when it is
// missing or refused (an empty array is a non-nil empty slice).
func (o *object) array(name string, required bool) []json.RawMessage {
	v, ok := o.get(name, required)
	if !ok {
		return nil
	}
	if k := v.kind(); k != "an array" {
		v.st.fail(v.path, "must be an array, not "+k)
		return nil
	}
	elems := []json.RawMessage{}
	if err := json.Unmarshal(v.raw, &elems); err != nil {
		v.st.fail(v.path, err.Error())
		return nil
	}
	return elems
}

// objectOrString returns the member name decoded as encoding/json does,
// which must be an object or a string; nil when missing.
func (o *object) objectOrString(name string) any {
	v, ok := o.get(name, false)
	if !ok {
		return nil
	}
	if k := v.kind(); k != "an object" && k != "a string" {
		v.st.fail(v.path, "must be an object or a string, not "+k)
		return nil
	}
	return v.anyValue()
}

// closed refuses every member not in known (a closed schema), naming the
// first in sorted order.
func (o *object) closed(known ...string) {
	if o.st.err != nil {
		return
	}
	for _, k := range sortedKeys(o.m) {
		if slices.Contains(known, k) {
			continue
		}
		msg := "unknown member (the schema allows no other members"
		for _, n := range known {
			if strings.EqualFold(n, k) {
				msg += fmt.Sprintf("; member names are case-sensitive: did you mean %q?", n)
				break
			}
		}
		o.st.fail(o.path+"/"+escapePointer(k), msg+")")
		return
	}
}

// extra returns the members not in known, decoded as encoding/json does
// into an any; nil when there are none.
func (o *object) extra(known ...string) map[string]any {
	if o.st.err != nil {
		return nil
	}
	var out map[string]any
	for _, k := range sortedKeys(o.m) {
		if slices.Contains(known, k) {
			continue
		}
		x := o.member(k, o.m[k]).anyValue()
		if o.st.err != nil {
			return nil
		}
		if out == nil {
			out = map[string]any{}
		}
		out[k] = x
	}
	return out
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escapePointer escapes a member name as a JSON Pointer reference token
// (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// normalizeJSON returns valid JSON text in the form encoding/json writes
// a json.RawMessage: compact, with <, >, &, U+2028 and U+2029 escaped.
func normalizeJSON(raw json.RawMessage) json.RawMessage {
	b, err := json.Marshal(raw)
	if err != nil { // not reached: raw is valid JSON
		return bytes.Clone(raw)
	}
	return b
}

// cut shortens s for an error message.
func cut(s string) string { return strictjson.Cut(s, 64) }

// quote quotes s, cut, for an error message.
func quote(s string) string { return strconv.Quote(cut(s)) }

func nonEmpty(s string) string {
	if s == "" {
		return "must not be empty"
	}
	return ""
}

// checkUUID accepts what the schemas' "uuid" format accepts: 8-4-4-4-12
// hexadecimal digits of either case, any version.
func checkUUID(s string) string {
	if !isUUID(s) {
		return quote(s) + " is not a UUID"
	}
	return ""
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

func oneOf(values []string) func(string) string {
	return func(s string) string {
		if slices.Contains(values, s) {
			return ""
		}
		return quote(s) + " is not one of " + strings.Join(values, ", ")
	}
}

// jsonInteger returns the value of the JSON number text s when it is an
// integer in any notation (3, 3.0, 0.3e1) and fits in an int. It works
// on the digits, so a huge exponent costs nothing. Like the schema
// validator (math/big), it gives up on an exponent beyond int64 and, for
// a non-zero number, on a power of ten (exponent minus fraction digits)
// beyond ±10^6: such numbers are out of range.
func jsonInteger(s string) (n int, integral, fits bool) {
	sign := ""
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		sign, s = "-", rest
	}
	mant, expText := s, "0"
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil {
		return 0, true, false
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true, true
	}
	// The value is digits × 10^exp.
	if exp -= int64(len(frac)); exp < -1e6 || exp > 1e6 {
		return 0, true, false
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	switch {
	case exp < 0:
		return 0, false, false
	case int64(len(digits))+exp > 19:
		return 0, true, false
	}
	v, err := strconv.ParseInt(sign+digits+strings.Repeat("0", int(exp)), 10, strconv.IntSize)
	if err != nil {
		return 0, true, false
	}
	return int(v), true, true
}

// parseDateTime parses an RFC 3339 (§5.6) date-time, "T" and "Z" in
// either case, and returns it in UTC. It refuses what the schemas'
// "date-time" format refuses and, beyond it, leap seconds (time.Time has
// none), sign characters in numeric fields, and instants outside the
// years 0000–9999 in UTC (they have no RFC 3339 form in UTC).
func parseDateTime(s string) (time.Time, error) {
	bad := func() (time.Time, error) {
		return time.Time{}, errors.New(quote(s) + " is not an RFC 3339 date-time")
	}
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	if len(s) < 20 || !digits(s[0:4]) || s[4] != '-' || !digits(s[5:7]) || s[7] != '-' || !digits(s[8:10]) ||
		(s[10] != 'T' && s[10] != 't') || !digits(s[11:13]) || s[13] != ':' || !digits(s[14:16]) || s[16] != ':' || !digits(s[17:19]) {
		return bad()
	}
	rest := s[19:]
	if frac, ok := strings.CutPrefix(rest, "."); ok {
		n := 0
		for n < len(frac) && frac[n] >= '0' && frac[n] <= '9' {
			n++
		}
		if n == 0 {
			return bad()
		}
		rest = frac[n:]
	}
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && digits(rest[1:3]) && rest[3] == ':' && digits(rest[4:6]) &&
		rest[1:3] <= "23" && rest[4:6] <= "59":
	default:
		return bad()
	}
	if s[17:19] == "60" {
		return time.Time{}, errors.New(quote(s) + " is a leap second, which is not supported")
	}
	norm := s[:10] + "T" + s[11:len(s)-len(rest)] + strings.ToUpper(rest)
	t, err := time.Parse(time.RFC3339Nano, norm)
	if err != nil {
		return bad()
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, errors.New(quote(s) + " is outside the years 0000-9999 in UTC")
	}
	return t, nil
}
