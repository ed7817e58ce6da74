package strictjson

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// kind is what a plan expects of a JSON value.
type kind uint8

const (
	opaque     kind = iota // not modelled: encoding/json judges the value
	anyKind                // interface{}: any value, numbers as float64
	stringKind             // a string
	boolKind               // true or false
	floatKind              // a number within the float of bits
	intKind                // an integer literal within the int of bits
	uintKind               // a non-negative integer literal within the uint of bits
	structKind             // an object, members matched to fields
	mapKind                // an object with string keys
	sliceKind              // an array (length < 0) or a Go array of length elements
)

// plan is what a Go type accepts, as encoding/json decodes into it. null
// is accepted everywhere, as encoding/json accepts it.
type plan struct {
	kind   kind
	bits   int              // floatKind, intKind, uintKind
	length int              // sliceKind: a Go array's length; -1 for a slice
	elem   *plan            // mapKind, sliceKind
	fields map[string]*plan // structKind: by exact JSON name
	folded map[string]string
}

// anyPlan is the plan of interface{}.
var anyPlan = &plan{kind: anyKind}

var (
	plans             sync.Map // reflect.Type → *plan
	unmarshalerType   = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// planOf returns the plan of t, built once.
func planOf(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	building := map[reflect.Type]*plan{}
	p := build(t, building)
	for bt, bp := range building {
		plans.LoadOrStore(bt, bp)
	}
	return p
}

func build(t reflect.Type, building map[reflect.Type]*plan) *plan {
	for n := 0; t.Kind() == reflect.Pointer; n++ {
		if n == 16 || decodesItself(t) {
			return &plan{} // opaque
		}
		t = t.Elem()
	}
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	if p, ok := building[t]; ok {
		return p // a recursive type: filled in by the outer call
	}
	p := &plan{}
	building[t] = p
	if decodesItself(t) || decodesItself(reflect.PointerTo(t)) {
		return p // opaque
	}
	switch t.Kind() {
	case reflect.Interface:
		if t.NumMethod() == 0 {
			p.kind = anyKind
		}
	case reflect.String:
		p.kind = stringKind
	case reflect.Bool:
		p.kind = boolKind
	case reflect.Float32, reflect.Float64:
		p.kind, p.bits = floatKind, t.Bits()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind, p.bits = intKind, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.kind, p.bits = uintKind, t.Bits()
	case reflect.Map:
		k := t.Key()
		if k.Kind() == reflect.String && !reflect.PointerTo(k).Implements(textUnmarshalType) {
			p.kind, p.elem = mapKind, build(t.Elem(), building)
		}
	case reflect.Slice:
		if t.Elem().Kind() != reflect.Uint8 { // []byte is base64 text
			p.kind, p.length, p.elem = sliceKind, -1, build(t.Elem(), building)
		}
	case reflect.Array:
		p.kind, p.length, p.elem = sliceKind, t.Len(), build(t.Elem(), building)
	case reflect.Struct:
		buildStruct(p, t, building)
	}
	return p
}

// buildStruct fills p with the fields of struct t as encoding/json names
// them, or leaves p opaque when t has what the plan does not model:
// embedded fields (promotion rules), ",string" options, two fields of
// one name.
func buildStruct(p *plan, t reflect.Type, building map[reflect.Type]*plan) {
	fields := map[string]*plan{}
	folded := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !validTag(name) {
			name = f.Name
		}
		for o := range strings.SplitSeq(opts, ",") {
			if o == "string" {
				return
			}
		}
		if _, dup := fields[name]; dup {
			return
		}
		fields[name] = build(f.Type, building)
		folded[foldName(name)] = name
	}
	p.kind, p.fields, p.folded = structKind, fields, folded
}

// validTag is encoding/json's rule for a usable tag name.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// foldName is encoding/json's case folding of member names: two names
// whose foldings are equal select the same field.
func foldName(s string) string {
	var b []byte
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		b = utf8.AppendRune(b, foldRune(r))
		i += n
	}
	return string(b)
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// decodesItself reports whether encoding/json hands a value of type t to
// its own UnmarshalJSON or UnmarshalText.
func decodesItself(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || t.Implements(textUnmarshalType)
}

// what names, for a message, what p expects.
func (p *plan) what() string {
	switch p.kind {
	case stringKind:
		return "a string"
	case boolKind:
		return "a boolean"
	case floatKind:
		return "a number"
	case intKind:
		return "an integer"
	case uintKind:
		return "a non-negative integer"
	case structKind, mapKind:
		return "an object"
	case sliceKind:
		return "an array"
	}
	return "a valid value"
}
