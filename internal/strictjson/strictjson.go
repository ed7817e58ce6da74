// Package strictjson decodes untrusted JSON strictly, as DESIGN §2 asks of
// every endpoint that reads a peer's bytes: one JSON value and nothing
// after it but whitespace; valid UTF-8 everywhere; no \u escape of a lone
// surrogate; nesting and size bounded; member names matched exactly, case
// included; optionally no unknown members and no member twice in one
// object. Nothing is repaired: where encoding/json would turn invalid
// UTF-8 or a lone surrogate into U+FFFD, or let a member "Name" set the
// field "name", Decode refuses.
//
// Decode checks the whole input in one pass, guided by the target's type,
// before it lets encoding/json store anything, so a refused input leaves
// the target untouched and every refusal is an *Error that names the
// value's path and what was expected in JSON's terms (string, number,
// object…) — never a Go type name. What Decode accepts, encoding/json
// decodes identically (FuzzDecode checks it).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Defaults of Options.
const (
	// DefaultMaxSize bounds the input when Options.MaxSize is 0.
	DefaultMaxSize = 1 << 20
	// DefaultMaxDepth bounds the nesting of arrays and objects when
	// Options.MaxDepth is 0.
	DefaultMaxDepth = 64
	// maxDepthLimit is the deepest Options.MaxDepth may ask for:
	// encoding/json's own bound.
	maxDepthLimit = 10000
)

// Options configures Decode and Check; nil means the defaults: 1 MiB,
// depth 64, unknown members ignored, duplicate members allowed (the last
// one wins, as with encoding/json).
type Options struct {
	// MaxSize bounds the input in bytes (ErrTooLarge beyond); 0 means
	// DefaultMaxSize.
	MaxSize int
	// MaxDepth bounds the nesting of arrays and objects (ErrTooDeep
	// beyond); 0 means DefaultMaxDepth. At most 10000.
	MaxDepth int
	// DisallowUnknownFields refuses an object member that names no
	// field of the struct it decodes into (a closed schema). A member
	// that differs from a field's name only in case is refused either
	// way: encoding/json would set the field from it.
	DisallowUnknownFields bool
	// DisallowDuplicates refuses an object, anywhere in the input, that
	// has a member name twice (compared after unescaping): needed where
	// a signature or hash covers the text, since encoding/json keeps the
	// last one silently.
	DisallowDuplicates bool
	// Number, when set, checks every number literal of the input (as
	// it is written: "1e20" stays "1e20"); its error refuses the input
	// (ErrType, with the error's text as the message). UAMP, for one,
	// refuses numbers beyond ±2^53, which RFC 8785 would round.
	Number func(literal []byte) error
}

// The reasons Decode refuses; errors.Is(err, ErrX) tells them apart.
var (
	// ErrTooLarge: the input exceeds Options.MaxSize.
	ErrTooLarge = errors.New("strictjson: input too large")
	// ErrSyntax: the input is not one JSON value.
	ErrSyntax = errors.New("strictjson: invalid JSON")
	// ErrTrailingData: something other than whitespace follows the
	// value.
	ErrTrailingData = errors.New("strictjson: data after the JSON value")
	// ErrInvalidUTF8: a string holds bytes that are not UTF-8.
	ErrInvalidUTF8 = errors.New("strictjson: invalid UTF-8")
	// ErrLoneSurrogate: a \u escape names half of a surrogate pair
	// without the other half.
	ErrLoneSurrogate = errors.New("strictjson: lone surrogate escape")
	// ErrTooDeep: arrays and objects nest deeper than Options.MaxDepth.
	ErrTooDeep = errors.New("strictjson: nesting too deep")
	// ErrDuplicate: an object has a member twice
	// (Options.DisallowDuplicates).
	ErrDuplicate = errors.New("strictjson: duplicate member")
	// ErrUnknownField: a member names no field of its struct
	// (Options.DisallowUnknownFields), or differs from one only in
	// case.
	ErrUnknownField = errors.New("strictjson: unknown member")
	// ErrType: a value is not of the JSON type its destination takes,
	// or is a number out of its range.
	ErrType = errors.New("strictjson: wrong type")
)

// Error is a refusal of Decode or Check. Its text is meant for the peer
// that sent the input: the path of the value at fault and what is wrong,
// in JSON's terms.
type Error struct {
	// Reason is one of the ErrX sentinels above.
	Reason error
	// Path locates the value at fault: member names joined by dots,
	// array indexes in brackets ("args.quantity", "items[2].id"); a
	// member name that is not a plain identifier is quoted
	// (`args["a.b"]`). Empty for the input as a whole.
	Path string
	// Offset is the byte offset in the input where the fault was found.
	Offset int
	// Message says what is wrong ("number out of range", "must be a
	// string").
	Message string

	cause error // encoding/json's error, kept for local logs only
	rpath []string
}

// Error returns "Path: Message", or Message alone for the input as a
// whole.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Unwrap returns the Reason and, for the rare refusal that encoding/json
// made itself (a json.Unmarshaler's error), its error.
func (e *Error) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Reason, e.cause}
	}
	return []error{e.Reason}
}

// Decode checks data as the package doc says and, when it passes, stores
// it in the value v points to as json.Unmarshal would. Every refusal is
// an *Error; one found by the check (all of them, for the types the
// check models) leaves v untouched.
//
// Types that decode themselves (json.Unmarshaler, encoding.TextUnmarshaler),
// structs with embedded fields or ",string" options, and maps with other
// than string keys are checked for syntax, UTF-8, surrogates, depth and
// duplicates only; encoding/json judges the rest of their contents.
func Decode(data []byte, v any, opts *Options) error {
	var p *plan
	if t := reflect.TypeOf(v); t != nil && t.Kind() == reflect.Pointer {
		p = planOf(t.Elem())
	}
	if err := check(data, p, opts); err != nil {
		return err
	}
	var err error
	if opts != nil && opts.DisallowUnknownFields {
		// The check refused every unknown member it could see; a
		// type it does not model is left to encoding/json.
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		err = d.Decode(v)
	} else {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		return fromJSON(err)
	}
	return nil
}

// Check checks data as Decode does for a destination of type any: one
// JSON value of any shape, under the rules of the package doc.
func Check(data []byte, opts *Options) error {
	return check(data, anyPlan, opts)
}

func check(data []byte, p *plan, opts *Options) error {
	s := scanner{data: data, maxDepth: DefaultMaxDepth}
	maxSize := DefaultMaxSize
	if opts != nil {
		if opts.MaxSize > 0 {
			maxSize = opts.MaxSize
		}
		if opts.MaxDepth > 0 {
			s.maxDepth = min(opts.MaxDepth, maxDepthLimit)
		}
		s.unknown = opts.DisallowUnknownFields
		s.dups = opts.DisallowDuplicates
		s.numberHook = opts.Number
	}
	if len(data) > maxSize {
		return &Error{Reason: ErrTooLarge, Message: "input is " + strconv.Itoa(len(data)) + " bytes, more than " + strconv.Itoa(maxSize)}
	}
	if err := s.document(p); err != nil {
		err.Path = joinPath(err.rpath)
		err.rpath = nil
		return err
	}
	return nil
}

// fromJSON turns an error of encoding/json on input the check passed into
// an *Error without Go type names. The check foresees every refusal of
// encoding/json for the types it models; this is for the others.
func fromJSON(err error) *Error {
	e := &Error{Reason: ErrType, Message: "invalid value", cause: err}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		e.Offset = int(te.Offset)
		e.Path = te.Field
		if te.Type != nil {
			e.Message = "must be " + kindName(te.Type)
		}
		if strings.HasPrefix(te.Value, "number") && te.Type != nil && isNumberKind(te.Type.Kind()) {
			e.Message = "number out of range"
		}
	}
	return e
}

func isNumberKind(k reflect.Kind) bool {
	return reflect.Int <= k && k <= reflect.Float64
}

// kindName names what a Go type takes in JSON.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := t.Kind(); {
	case k == reflect.String:
		return "a string"
	case k == reflect.Bool:
		return "a boolean"
	case k == reflect.Float32 || k == reflect.Float64:
		return "a number"
	case isNumberKind(k):
		return "an integer"
	case k == reflect.Map || k == reflect.Struct:
		return "an object"
	case k == reflect.Slice || k == reflect.Array:
		return "an array"
	}
	return "a valid value"
}

// joinPath builds Error.Path from the path elements collected in reverse
// as the error went up.
func joinPath(rpath []string) string {
	if len(rpath) == 0 {
		return ""
	}
	var b strings.Builder
	for i := len(rpath) - 1; i >= 0; i-- {
		el := rpath[i]
		if el[0] != '[' && i != len(rpath)-1 {
			b.WriteByte('.')
		}
		b.WriteString(el)
	}
	return b.String()
}

// memberElem is the path element of member name.
func memberElem(name string) string {
	if name == "" {
		return `[""]`
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return "[" + quote(name) + "]"
		}
	}
	if len(name) > 64 {
		return "[" + quote(name) + "]"
	}
	return name
}

// Cut shortens s to at most max bytes (at a character boundary) for an
// error message, marking the cut with "…": an input may be a megabyte
// long.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// quote quotes s for a message, shortened to 64 bytes.
func quote(s string) string {
	if len(s) > 64 {
		n := 64
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		return strconv.Quote(s[:n]) + "…"
	}
	return strconv.Quote(s)
}
