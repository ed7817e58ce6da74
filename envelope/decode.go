package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/agentry-dev/agentry/internal/strictjson"
)

// Size and nesting bounds of the strict decoders. A binding may apply a
// smaller body limit (the manifest's max_body_kb) before decoding.
const (
	MaxEnvelopeSize = 1 << 20
	MaxDeltaSize    = 1 << 20
	maxManifestSize = 64 << 10
	// MaxDepth bounds the nesting of arrays and objects (ext, payload).
	MaxDepth = 32
)

// maxSafeInteger is 2^53: a JSON integer beyond ±2^53 is refused, as
// RFC 8785 would round it (DESIGN §5).
const maxSafeInteger = 1 << 53

// Decode decodes an envelope from untrusted bytes. It accepts what the
// envelope schema (A.1) accepts, formats asserted and ids bare or as
// urn:uuid: (DESIGN §5), and refuses beyond the schema:
//
//   - more than MaxEnvelopeSize bytes (4.13);
//   - invalid UTF-8, a \u escape of a lone surrogate, anything but one
//     JSON value, nesting deeper than MaxDepth;
//   - an object anywhere with a member name twice (after unescaping);
//   - a number beyond ±2^53, in any notation (1e20 is one): above 2^53
//     every double is an integer that RFC 8785 would round;
//   - a ts with a leap second;
//   - an optional string member (reply_to, stream_id, cap_token, sig,
//     body.encoding, body.compression) that is present but empty: it
//     would have two encodings, and the decoded envelope would not
//     encode back to the canonical form that was signed.
//
// Member names match exactly, case included. Numbers in ext and in the
// open members of body and context decode as float64, as with
// encoding/json. Every refusal is an *Error: 4.13 for size; 4.01 for an
// envelope that is well formed but for its sig, which is absent, not a
// string or empty (§6.3: every envelope must carry one; the canonical
// form, which excludes sig, is defined, so this is a missing signature,
// not a malformed message); 4.00 otherwise. Decode does not verify the
// signature: Open does both.
func Decode(b []byte) (*Envelope, error) {
	tree, err := parseStrict(b, MaxEnvelopeSize)
	if err != nil {
		return nil, err
	}
	unsigned := unsignedReason(tree)
	if err := validateValue(embeddedSchemas().envelope, envelopeSchema, tree); err != nil {
		return nil, badRequest(err)
	}
	m := tree.(map[string]any)
	e := &Envelope{
		ID:     m["id"].(string),
		TS:     m["ts"].(string),
		From:   m["from"].(string),
		To:     stringList(m["to"]),
		Intent: Intent(m["intent"].(string)),
	}
	if _, err := parseTime(e.TS); err != nil {
		return nil, badRequest(fmt.Errorf("/ts: %w", err))
	}
	var bad error
	optional := func(m map[string]any, path, name string) string {
		v, ok := m[name]
		if !ok {
			return ""
		}
		s := v.(string)
		if s == "" && bad == nil {
			bad = fmt.Errorf("%s/%s: an optional member must be absent rather than empty", path, name)
		}
		return s
	}
	e.ReplyTo = optional(m, "", "reply_to")
	e.StreamID = optional(m, "", "stream_id")
	e.CapToken = optional(m, "", "cap_token")
	e.Sig = optional(m, "", "sig")
	if v, ok := m["context"]; ok {
		refs := v.([]any)
		e.Context = make([]ContextRef, len(refs))
		for i, r := range refs {
			rm := r.(map[string]any)
			e.Context[i] = ContextRef{ID: rm["id"].(string), Hash: rm["hash"].(string), Extra: extra(rm, "id", "hash")}
		}
	}
	if v, ok := m["delta_window"]; ok {
		n, err := integer(v)
		if err != nil || n > math.MaxInt {
			return nil, badRequest(fmt.Errorf("/delta_window: %v out of range", v))
		}
		e.DeltaWindow = int(n)
	}
	body := m["body"].(map[string]any)
	e.Body = Body{
		Type:        body["type"].(string),
		Content:     body["content"].(string),
		Encoding:    optional(body, "/body", "encoding"),
		Compression: optional(body, "/body", "compression"),
		Extra:       extra(body, "type", "content", "encoding", "compression"),
	}
	if v, ok := m["ext"]; ok {
		e.Ext = toFloats(v).(map[string]any)
	}
	if bad != nil {
		return nil, badRequest(bad)
	}
	if unsigned != "" {
		return nil, NewError(CodeUnauthenticated, unsigned, nil)
	}
	return e, nil
}

// unsignedReason says what is wrong with the sig of the decoded document
// tree when it is an object whose sig is absent, not a string or empty,
// and puts a placeholder in its place so that the rest of the envelope
// is checked as usual; "" when there is nothing to say.
func unsignedReason(tree any) string {
	m, ok := tree.(map[string]any)
	if !ok {
		return ""
	}
	var reason string
	switch v, present := m["sig"]; {
	case !present:
		reason = "the envelope has no sig: every envelope must be signed (§6.3)"
	case v == "":
		reason = "the envelope's sig is empty: every envelope must be signed (§6.3)"
	default:
		if _, isString := v.(string); isString {
			return ""
		}
		reason = "the envelope's sig is not a string: it must be a detached JWS (§6.3)"
	}
	m["sig"] = "unsigned"
	return reason
}

// DecodeDelta decodes a delta from untrusted bytes: what the delta schema
// (A.2) accepts, under the rules of Decode (MaxDeltaSize). The payload is
// kept as compact JSON text.
func DecodeDelta(b []byte) (*Delta, error) {
	tree, err := parseStrict(b, MaxDeltaSize)
	if err != nil {
		return nil, err
	}
	if err := validateValue(embeddedSchemas().delta, deltaSchema, tree); err != nil {
		return nil, badRequest(err)
	}
	m := tree.(map[string]any)
	d := &Delta{
		StreamID: m["stream_id"].(string),
		TS:       m["ts"].(string),
		Type:     DeltaType(m["type"].(string)),
	}
	seq, err := integer(m["delta_seq"])
	if err != nil {
		return nil, badRequest(fmt.Errorf("/delta_seq: %w", err))
	}
	d.Seq = seq
	if _, err := parseTime(d.TS); err != nil {
		return nil, badRequest(fmt.Errorf("/ts: %w", err))
	}
	if p, ok := m["payload"]; ok {
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, badRequest(err)
		}
		d.Payload = raw
	}
	return d, nil
}

// DecodeManifest decodes a manifest from untrusted bytes: what the
// corrected manifest schema (A.3) accepts, under the rules of Decode
// (64 << 10).
func DecodeManifest(b []byte) (*Manifest, error) {
	tree, err := parseStrict(b, maxManifestSize)
	if err != nil {
		return nil, err
	}
	if err := validateValue(embeddedSchemas().manifest, manifestSchema, tree); err != nil {
		return nil, badRequest(err)
	}
	m := tree.(map[string]any)
	man := &Manifest{
		Agent:       m["agent"].(string),
		Description: m["description"].(string),
		Intents:     stringList(m["intents"]),
		BodyTypes:   stringList(m["body_types"]),
		Auth:        stringList(m["auth"]),
	}
	lim := m["limits"].(map[string]any)
	for name, dst := range map[string]*int64{"max_body_kb": &man.Limits.MaxBodyKB, "rate_lph": &man.Limits.RateLPH} {
		if v, ok := lim[name]; ok {
			n, err := integer(v)
			if err != nil {
				return nil, badRequest(fmt.Errorf("/limits/%s: %w", name, err))
			}
			*dst = n
		}
	}
	return man, nil
}

func badRequest(err error) *Error {
	return NewError(CodeBadRequest, cut(err.Error()), err)
}

// parseStrict applies the rules about the whole text and returns the
// document as jsonschema wants it (maps, slices, json.Number, strings,
// booleans, nil).
func parseStrict(b []byte, limit int) (any, error) {
	if err := strictjson.Check(b, strictOptions(limit)); err != nil {
		if errors.Is(err, strictjson.ErrTooLarge) {
			return nil, NewError(CodePayloadTooLarge, fmt.Sprintf("document is %d bytes, more than %d", len(b), limit), nil)
		}
		if errors.Is(err, strictjson.ErrSyntax) || errors.Is(err, strictjson.ErrTrailingData) {
			return nil, NewError(CodeBadRequest, cut("not a JSON document: "+err.Error()), err)
		}
		return nil, badRequest(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil { // not reached: b is one JSON value
		return nil, badRequest(err)
	}
	return v, nil
}

// strictOptions are the rules of every strict decoder of UAMP text
// (internal/strictjson): valid UTF-8, one JSON value, no lone surrogate,
// no member twice in an object, nesting at most MaxDepth, no number
// beyond ±2^53, at most limit bytes.
func strictOptions(limit int) *strictjson.Options {
	return &strictjson.Options{MaxSize: limit, MaxDepth: MaxDepth, DisallowDuplicates: true, Number: numberLiteral}
}

// scanStrict checks JSON text b (any size) under the rules of the strict
// decoders: what a custom MarshalJSON wrote, a JOSE header.
func scanStrict(b []byte) error {
	return strictjson.Check(b, strictOptions(len(b)+1))
}

func numberLiteral(lit []byte) error { return checkNumber(string(lit)) }

// checkNumber refuses a JSON number whose magnitude exceeds 2^53: an
// integer beyond ±2^53 in any notation (9007199254740993,
// 9.007199254740993e15, 1e20), and a fraction beyond it, which every
// double above 2^53 is not (9007199254740993.5 would canonicalize as
// the integer 9007199254740994). It works on the digits, so a huge
// exponent costs nothing.
func checkNumber(lit string) error {
	s := strings.TrimPrefix(lit, "-")
	mant, expText := s, "0"
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return nil // zero, whatever the exponent
	}
	bad := fmt.Errorf("number %s is beyond ±2^53 (RFC 8785 would round it to an integer); send it as a string", cut(lit))
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil || exp > 1e6 || exp < -1e6 {
		if err == nil && exp < 0 {
			return nil // a tiny fraction: it canonicalizes as 0
		}
		return bad
	}
	// The value is digits × 10^exp; intDigits is the number of digits
	// of its integer part.
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	intDigits := int64(len(digits)) + exp
	switch {
	case intDigits <= 15:
		return nil // below 10^15 < 2^53
	case intDigits > 16:
		return bad
	}
	if exp >= 0 {
		n, err := strconv.ParseUint(digits+strings.Repeat("0", int(exp)), 10, 64)
		if err != nil || n > maxSafeInteger {
			return bad
		}
		return nil
	}
	// A fraction: beyond 2^53 when its integer part is 2^53 or more.
	n, err := strconv.ParseUint(digits[:intDigits], 10, 64)
	if err != nil || n >= maxSafeInteger {
		return bad
	}
	return nil
}

// integer returns the json.Number v, which the schema checked is an
// integer and checkNumber bounded to ±2^53, as an int64.
func integer(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", v)
	}
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return 0, fmt.Errorf("%s is not an integer within ±2^53", cut(string(n)))
	}
	return int64(f), nil
}

// stringList returns the []any of strings v as a []string.
func stringList(v any) []string {
	l := v.([]any)
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = s.(string)
	}
	return out
}

// extra returns the members of m not in known, numbers as float64; nil
// when there are none.
func extra(m map[string]any, known ...string) map[string]any {
	var out map[string]any
	for k, v := range m {
		isKnown := false
		for _, n := range known {
			if k == n {
				isKnown = true
				break
			}
		}
		if isKnown {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[k] = toFloats(v)
	}
	return out
}

// toFloats replaces the json.Numbers in v by float64s, as encoding/json
// decodes them (checkNumber made them finite).
func toFloats(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = toFloats(e)
		}
	case []any:
		for i, e := range x {
			x[i] = toFloats(e)
		}
	}
	return v
}

// cut shortens s for an error message.
func cut(s string) string { return strictjson.Cut(s, 300) }

func quote(s string) string { return strconv.Quote(cut(s)) }
