package uicontrol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// errDuplicate and errNotObject are the reasons parseObject refuses.
var (
	errDuplicate = errors.New("duplicate member")
	errNotObject = errors.New("not a JSON object")
)

// parseObject splits one JSON object into its members, exactly as named
// (case-sensitive), refusing a member name given twice and anything after
// the object but whitespace. Values are returned unparsed but validated:
// json.Valid checks the whole input once, then a scanner that relies on
// its validity splits the members.
func parseObject(b []byte) (map[string]json.RawMessage, string, error) {
	if !json.Valid(b) {
		return nil, "", errNotObject
	}
	return parseValidObject(b)
}

// parseValidObject is parseObject for b known to be valid JSON (a member
// of an object parseObject or decodeEnvelope already checked).
func parseValidObject(b []byte) (map[string]json.RawMessage, string, error) {
	m := map[string]json.RawMessage{}
	var dup string
	err := eachMember(b, func(name []byte, v json.RawMessage) error {
		if _, seen := m[string(name)]; seen {
			dup = string(name)
			return errDuplicate
		}
		m[string(name)] = v
		return nil
	})
	if err != nil {
		return nil, dup, err
	}
	return m, "", nil
}

// eachMember calls visit with each member of the JSON object b, which
// must be valid JSON, in order: its name as written, unescaped, and its
// value unparsed. It returns errNotObject when b is not an object, else
// the first error visit returns. The name is only valid during the call.
func eachMember(b []byte, visit func(name []byte, v json.RawMessage) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return nil
	}
	for {
		j := endOfString(b, i)
		name := b[i+1 : j-1]
		if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			s, ok := unquote(b[i:j])
			if !ok {
				return errNotObject
			}
			name = []byte(s)
		}
		i = skipSpace(b, skipSpace(b, j)+1) // past ':'
		j = endOfValue(b, i)
		if err := visit(name, json.RawMessage(b[i:j:j])); err != nil {
			return err
		}
		i = skipSpace(b, j)
		if b[i] == '}' {
			return nil
		}
		i = skipSpace(b, i+1) // past ','
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endOfString returns the index after the string that starts at b[i] (a
// quote) in valid JSON.
func endOfString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// endOfValue returns the index after the value that starts at b[i] in
// valid JSON.
func endOfValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = endOfString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// unquote returns the string a JSON string literal (from valid JSON)
// denotes.
func unquote(q []byte) (string, bool) {
	if bytes.IndexByte(q, '\\') < 0 && utf8.Valid(q) {
		return string(q[1 : len(q)-1]), true
	}
	var s string
	return s, json.Unmarshal(q, &s) == nil
}

// isNull reports whether raw is absent or the JSON literal null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// fields reads the members of a payload object by their exact names,
// keeping the first problem as an invalid_message *Error whose message
// names the member's path. A member whose value is null counts as absent
// (§4.1 rule 7: senders omit optional fields rather than send null).
type fields struct {
	m    map[string]json.RawMessage
	path string
	err  *Error
}

// payloadFields parses raw (a JSON object) for reading under path.
func payloadFields(raw json.RawMessage, path string) *fields {
	f := &fields{path: path}
	if isNull(raw) || raw[0] != '{' {
		f.err = newErrorf(CodeInvalidMessage, "%s: must be an object", path).with("field", path)
		return f
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		f.err = newErrorf(CodeInvalidMessage, "%s: must be an object", path).with("field", path)
		return f
	}
	f.m = m
	return f
}

func (f *fields) fail(name, problem string) {
	if f.err == nil {
		p := f.path + "." + name
		f.err = newErrorf(CodeInvalidMessage, "%s: %s", p, problem).with("field", p)
	}
}

// get returns a member's raw value; a missing required member is an error.
func (f *fields) get(name string, required bool) (json.RawMessage, bool) {
	if f.err != nil {
		return nil, false
	}
	raw := f.m[name]
	if isNull(raw) {
		if required {
			f.fail(name, "missing")
		}
		return nil, false
	}
	return raw, true
}

func (f *fields) str(name string, required bool) string {
	raw, ok := f.get(name, required)
	if !ok {
		return ""
	}
	s, ok := readString(raw)
	if !ok {
		f.fail(name, "must be a string")
		return ""
	}
	if required && s == "" {
		f.fail(name, "must not be empty")
	}
	return s
}

// strs reads an array of non-empty strings.
func (f *fields) strs(name string, required bool) []string {
	raw, ok := f.get(name, required)
	if !ok {
		return nil
	}
	var v []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &v) != nil {
		f.fail(name, "must be an array of strings")
		return nil
	}
	out := make([]string, 0, len(v))
	for _, r := range v {
		var s string
		if len(r) == 0 || r[0] != '"' || json.Unmarshal(r, &s) != nil || s == "" {
			f.fail(name, "must be an array of non-empty strings")
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (f *fields) boolean(name string) bool {
	raw, ok := f.get(name, false)
	if !ok {
		return false
	}
	switch string(raw) {
	case "true":
		return true
	case "false":
		return false
	}
	f.fail(name, "must be a boolean")
	return false
}

// integer reads a non-negative integer written without fraction or
// exponent.
func (f *fields) integer(name string) int64 {
	raw, ok := f.get(name, false)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		f.fail(name, "must be a non-negative integer")
		return 0
	}
	return n
}

// object reads a JSON object member as a generic map.
func (f *fields) object(name string) map[string]any {
	raw, ok := f.get(name, false)
	if !ok {
		return nil
	}
	var m map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		f.fail(name, "must be an object")
		return nil
	}
	return m
}

// sub returns the fields of an object member, or nil when it is absent.
func (f *fields) sub(name string, required bool) *fields {
	raw, ok := f.get(name, required)
	if !ok {
		return nil
	}
	s := payloadFields(raw, f.path+"."+name)
	if s.err != nil {
		f.err = s.err
		return nil
	}
	return s
}

// array returns the elements of an array member.
func (f *fields) array(name string, required bool) []json.RawMessage {
	raw, ok := f.get(name, required)
	if !ok {
		return nil
	}
	var v []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &v) != nil {
		f.fail(name, "must be an array")
		return nil
	}
	return v
}

// runeLen reports whether s has between 1 and max characters.
func runeLen(s string, max int) bool {
	n := utf8.RuneCountInString(s)
	return n >= 1 && n <= max
}
