package workflow

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// NewTask returns a task implemented by a Go function taking typed
// arguments. Its Parameters are SchemaOf[Args](); Run decodes the
// arguments into Args through encoding/json (so json tags apply) and
// gives fn a TaskState for reading and changing the session state.
//
// Arguments that do not decode into Args yield an *Error wrapping
// ErrInvalidArguments. The engine validates arguments against Parameters
// first, so that happens only when a value fits the schema but not the Go
// type (a number beyond an int64, say).
//
// NewTask panics if Args does not describe a JSON object (a struct or a
// map with string keys, or a pointer to one) or cannot be described at
// all (see SchemaOf): both are programming errors.
func NewTask[Args any](name, description string, fn func(ctx context.Context, args Args, st *TaskState) (any, error)) *Task {
	params := SchemaOf[Args]()
	if params["type"] != "object" {
		panic(fmt.Sprintf("workflow: NewTask %q: arguments of type %v are not a JSON object", name, reflect.TypeFor[Args]()))
	}
	return &Task{
		Name:        name,
		Description: description,
		Parameters:  params,
		Run: func(ctx context.Context, req *TaskRequest) (*TaskResponse, error) {
			var args Args
			if err := decodeArgs(req.Args, &args); err != nil {
				return nil, argumentsError(req.Task, err)
			}
			st := &TaskState{sessionID: req.SessionID, state: req.State}
			result, err := fn(ctx, args, st)
			if err != nil {
				return nil, err
			}
			return &TaskResponse{Result: result, StateUpdates: st.updates}, nil
		},
	}
}

func decodeArgs(raw map[string]any, into any) error {
	if raw == nil {
		raw = map[string]any{}
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // Parameters forbid them too (additionalProperties: false)
	return dec.Decode(into)
}

// argumentsError describes a decoding failure without Go type names.
func argumentsError(task string, err error) *Error {
	fe := FieldError{Message: "arguments do not match the task's parameters"}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		fe.Message = "cannot use " + te.Value + " here"
		if te.Field != "" {
			fe.Path = pointer(strings.Split(te.Field, "."))
		}
	} else if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		fe.Message = "unknown argument " + msg
	}
	detail := fe.Message
	if fe.Path != "" {
		detail = fe.Path + ": " + detail
	}
	return &Error{Status: statusOf[ErrInvalidArguments], kind: ErrInvalidArguments, Errors: []FieldError{fe},
		Detail: fmt.Sprintf("Invalid arguments for task '%s': %s", task, detail)}
}

// TaskState is a task's view of the session state: the state as it was
// when the task was called, overlaid with the task's own changes. The
// changes become the TaskResponse's StateUpdates and are applied only if
// the task succeeds. A TaskState is used by one task run at a time.
type TaskState struct {
	sessionID string
	state     map[string]any
	updates   map[string]any // a nil value deletes
}

// SessionID returns the ID of the session the task runs in.
func (s *TaskState) SessionID() string { return s.sessionID }

// Get returns the value of a state key. Values are decoded JSON (nil,
// bool, float64, string, []any, map[string]any) and shared with the
// session: do not modify them.
func (s *TaskState) Get(key string) (any, bool) {
	if v, ok := s.updates[key]; ok {
		return v, v != nil
	}
	v, ok := s.state[key]
	return v, ok
}

// Keys returns the keys present, sorted.
func (s *TaskState) Keys() []string {
	keys := make([]string, 0, len(s.state)+len(s.updates))
	for k := range s.state {
		if v, ok := s.updates[k]; !ok || v != nil {
			keys = append(keys, k)
		}
	}
	for k, v := range s.updates {
		if _, ok := s.state[k]; !ok && v != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Set sets a key. The value is stored as its JSON form (a struct becomes a
// map[string]any), like every state value; setting nil deletes the key.
//
// Set panics if value cannot be encoded as JSON. That is a bug in the
// task, and the engine treats a panicking task as an internal error: it
// logs the panic with its stack and tells the peer nothing more.
func (s *TaskState) Set(key string, value any) {
	v, err := jsonValue(value)
	if err != nil {
		panic(fmt.Sprintf("workflow: TaskState.Set(%q): %v", key, err))
	}
	if s.updates == nil {
		s.updates = map[string]any{}
	}
	s.updates[key] = v
}

// Delete removes a key.
func (s *TaskState) Delete(key string) {
	if s.updates == nil {
		s.updates = map[string]any{}
	}
	s.updates[key] = nil
}

// jsonValue returns v as decoded JSON.
func jsonValue(v any) (any, error) {
	switch v.(type) {
	case nil, bool, float64, string:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// SchemaOf returns the JSON Schema (draft 2020-12) of the JSON form of T,
// as NewTask uses for its parameters. The schema is made of decoded JSON
// values (nested map[string]any, []any, float64), so it equals what
// encoding/json decodes from its JSON text into a Schema.
//
// The mapping follows encoding/json:
//   - bool → boolean; integer kinds → integer (sized and unsigned kinds
//     get their range as minimum/maximum); floats and json.Number →
//     number; string → string; []byte → string with contentEncoding
//     base64; time.Time → string with format date-time; other types that
//     implement encoding.TextUnmarshaler → string; json.RawMessage,
//     interfaces and other json.Unmarshaler types → {} (any value).
//   - slices → array with items; arrays also get minItems = maxItems.
//   - maps with string, integer or text keys → object with
//     additionalProperties (omitted when any value is allowed).
//   - structs → object with properties, required and
//     additionalProperties: false. Properties are named by json tags
//     (json:"-" skips a field) and embedded structs are flattened, with
//     encoding/json's rules for conflicting names (embedded pointers to
//     unexported structs are skipped: encoding/json cannot decode them). A field is optional
//     when it is a pointer or tagged omitempty or omitzero; the others are
//     required. A ",string" option makes a number or boolean a string.
//   - pointers are their element's schema (null is not allowed).
//
// Field tags refine a property: desc:"…" sets description; enum:"a,b,c"
// sets enum, its values parsed as the field's type; minimum:"…" and
// maximum:"…" set bounds of a numeric field. On a slice or array, enum
// and bounds apply to the items.
//
// Recursive types are described once under $defs and referred to with
// $ref ("#" when T itself recurs); $defs keys are the Go type names.
//
// SchemaOf panics on types JSON cannot represent (channels, functions,
// complex numbers, maps with other keys) and on malformed tags, since
// both are programming errors; exclude such fields with json:"-".
func SchemaOf[T any]() Schema {
	root := reflect.TypeFor[T]()
	for root.Kind() == reflect.Pointer {
		root = root.Elem()
	}
	g := &schemaGen{root: root, defs: map[reflect.Type]*schemaDef{}, active: map[reflect.Type]bool{}}
	s := g.schema(g.root)
	if len(g.order) > 0 {
		defs := map[string]any{}
		for _, t := range g.order {
			defs[g.defs[t].name] = g.defs[t].schema
		}
		s["$defs"] = defs
	}
	return Schema(s)
}

type schemaGen struct {
	root   reflect.Type
	active map[reflect.Type]bool // types being described (to detect recursion)
	defs   map[reflect.Type]*schemaDef
	order  []reflect.Type // defs in the order they were completed
	names  map[string]bool
}

type schemaDef struct {
	name   string
	schema map[string]any // nil until complete
}

var (
	timeType            = reflect.TypeFor[time.Time]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	numberType          = reflect.TypeFor[json.Number]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if g.active[t] { // recursion
		if t == g.root {
			return map[string]any{"$ref": "#"}
		}
		if g.defs[t] == nil {
			g.defs[t] = &schemaDef{name: g.defName(t)}
		}
		return map[string]any{"$ref": "#/$defs/" + g.defs[t].name}
	}
	if d := g.defs[t]; d != nil && d.schema != nil {
		return map[string]any{"$ref": "#/$defs/" + d.name}
	}
	g.active[t] = true
	s := g.describe(t)
	delete(g.active, t)
	if d := g.defs[t]; d != nil { // t referred to itself: move it to $defs
		d.schema = s
		g.order = append(g.order, t)
		return map[string]any{"$ref": "#/$defs/" + d.name}
	}
	return s
}

var nonNameChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func (g *schemaGen) defName(t reflect.Type) string {
	base := nonNameChars.ReplaceAllString(t.Name(), "_")
	if base == "" {
		base = "T"
	}
	if g.names == nil {
		g.names = map[string]bool{}
	}
	name := base
	for i := 2; g.names[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	g.names[name] = true
	return name
}

func (g *schemaGen) describe(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawMessageType:
		return map[string]any{}
	case t == numberType:
		return map[string]any{"type": "number"}
	case reflect.PointerTo(t).Implements(jsonUnmarshalerType):
		return map[string]any{}
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		return map[string]any{"type": "integer", "minimum": -float64(int64(1) << (bits - 1)), "maximum": float64(int64(1)<<(bits-1) - 1)}
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return map[string]any{"type": "integer", "minimum": 0.0}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer", "minimum": 0.0, "maximum": float64(uint64(1)<<t.Bits() - 1)}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(textUnmarshalerType) &&
			!reflect.PointerTo(t.Elem()).Implements(jsonUnmarshalerType) {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Array:
		n := float64(t.Len())
		return map[string]any{"type": "array", "items": g.schema(t.Elem()), "minItems": n, "maxItems": n}
	case reflect.Map:
		switch k := t.Key(); {
		case k.Kind() == reflect.String, reflect.PointerTo(k).Implements(textUnmarshalerType):
		case k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr:
		default:
			panic(fmt.Sprintf("workflow: SchemaOf: map key type %v has no JSON form", k))
		}
		s := map[string]any{"type": "object"}
		if v := g.schema(t.Elem()); len(v) > 0 {
			s["additionalProperties"] = v
		}
		return s
	case reflect.Struct:
		return g.object(t)
	}
	panic(fmt.Sprintf("workflow: SchemaOf: type %v has no JSON form", t))
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []any
	for _, f := range jsonFields(t) {
		var s map[string]any
		if f.quoted {
			switch f.typ.Kind() {
			case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
				reflect.Float32, reflect.Float64:
				s = map[string]any{"type": "string"}
			}
		}
		if s == nil {
			s = g.schema(f.typ)
		}
		applyTags(s, f)
		props[f.name] = s
		if !f.optional {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// applyTags applies the desc, enum, minimum and maximum tags of f to s.
func applyTags(s map[string]any, f jsonField) {
	if d, ok := f.tag.Lookup("desc"); ok {
		s["description"] = d
	}
	enum, hasEnum := f.tag.Lookup("enum")
	minimum, hasMin := f.tag.Lookup("minimum")
	maximum, hasMax := f.tag.Lookup("maximum")
	if !hasEnum && !hasMin && !hasMax {
		return
	}
	bad := func(format string, args ...any) {
		panic(fmt.Sprintf("workflow: SchemaOf: field %s: %s", f.goName, fmt.Sprintf(format, args...)))
	}
	target := s
	for target["type"] == "array" {
		items, _ := target["items"].(map[string]any)
		if items == nil {
			bad("tags on an array of unknown items")
		}
		target = items
	}
	typ, _ := target["type"].(string)
	if _, ref := target["$ref"]; ref || typ == "object" {
		bad("enum, minimum and maximum apply to scalar types only")
	}
	if hasEnum {
		var values []any
		for e := range strings.SplitSeq(enum, ",") {
			e = strings.TrimSpace(e)
			v, err := scalarValue(typ, e)
			if err != nil {
				bad("enum value %q: %v", e, err)
			}
			values = append(values, v)
		}
		target["enum"] = values
	}
	for _, b := range []struct {
		key, val string
		set      bool
	}{{"minimum", minimum, hasMin}, {"maximum", maximum, hasMax}} {
		if !b.set {
			continue
		}
		if typ != "integer" && typ != "number" {
			bad("%s applies to numbers only", b.key)
		}
		v, err := scalarValue(typ, b.val)
		if err != nil {
			bad("%s %q: %v", b.key, b.val, err)
		}
		target[b.key] = v
	}
}

func scalarValue(typ, s string) (any, error) {
	switch typ {
	case "integer":
		n, err := strconv.ParseInt(s, 10, 64)
		return float64(n), err
	case "number":
		return strconv.ParseFloat(s, 64)
	case "boolean":
		return strconv.ParseBool(s)
	case "string", "":
		return s, nil
	}
	return nil, fmt.Errorf("not allowed on type %s", typ)
}

// jsonField is a property of a struct's JSON form.
type jsonField struct {
	name     string
	goName   string
	tagged   bool
	index    []int
	typ      reflect.Type
	tag      reflect.StructTag
	optional bool
	quoted   bool
}

// jsonFields returns the properties of struct t the way encoding/json
// resolves them: embedded structs flattened breadth first, a shallower
// field hiding deeper ones, a tagged one winning among equals, and
// ambiguous names dropped.
func jsonFields(t reflect.Type) []jsonField {
	type queued struct {
		typ   reflect.Type
		index []int
	}
	var fields []jsonField
	current, next := []queued{}, []queued{{typ: t}}
	visited := map[reflect.Type]bool{} // types flattened at shallower levels
	for len(next) > 0 {
		current, next = next, current[:0]
		seen := map[reflect.Type]bool{}
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			// A type embedded twice at one level is walked twice, so that
			// its fields conflict and drop out, as in encoding/json.
			seen[q.typ] = true
			for i := range q.typ.NumField() {
				sf := q.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && (ft.Kind() != reflect.Struct || sf.Type.Kind() == reflect.Pointer) {
						// encoding/json cannot decode into an embedded
						// pointer to an unexported struct.
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validJSONName(name) {
					name = ""
				}
				index := append(slices.Clone(q.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := jsonField{name: name, goName: sf.Name, tagged: name != "", index: index, typ: sf.Type, tag: sf.Tag}
					if f.name == "" {
						f.name = sf.Name
					}
					for o := range strings.SplitSeq(opts, ",") {
						switch o {
						case "omitempty", "omitzero":
							f.optional = true
						case "string":
							f.quoted = true
						}
					}
					if sf.Type.Kind() == reflect.Pointer {
						f.optional = true
					}
					fields = append(fields, f)
					continue
				}
				next = append(next, queued{typ: ft, index: index})
			}
		}
		maps.Copy(visited, seen)
	}
	byName := map[string][]jsonField{}
	for _, f := range fields {
		byName[f.name] = append(byName[f.name], f)
	}
	var out []jsonField
	for _, fs := range byName {
		if f, ok := dominantField(fs); ok {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return slices.Compare(out[i].index, out[j].index) < 0 })
	return out
}

func dominantField(fs []jsonField) (jsonField, bool) {
	depth := len(fs[0].index)
	for _, f := range fs {
		depth = min(depth, len(f.index))
	}
	var best []jsonField
	for _, f := range fs {
		if len(f.index) == depth {
			best = append(best, f)
		}
	}
	if len(best) == 1 {
		return best[0], true
	}
	var tagged []jsonField
	for _, f := range best {
		if f.tagged {
			tagged = append(tagged, f)
		}
	}
	if len(tagged) == 1 {
		return tagged[0], true
	}
	return jsonField{}, false
}

// validJSONName reports whether encoding/json accepts name as a tag name.
func validJSONName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
