package uicontrol

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"testing"
)

// oldParseObject is the token-decoder parseObject that the single-pass
// scanner replaced, kept as the reference FuzzParseObjectMatchesTokenDecoder
// compares against.
func oldParseObject(b []byte) (map[string]json.RawMessage, string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, "", errNotObject
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, "", errNotObject
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, "", errNotObject
		}
		if _, dup := m[key]; dup {
			return nil, key, errDuplicate
		}
		m[key] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, "", errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", errNotObject
	}
	return m, "", nil
}

// FuzzParseObjectMatchesTokenDecoder: the single-pass parseObject splits
// and refuses exactly as the encoding/json token decoder did (the one
// difference: invalid JSON with an early duplicate is refused as not an
// object rather than as a duplicate — refused either way).
func FuzzParseObjectMatchesTokenDecoder(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,{"c":"}"}],"d":"\"x\\"}`, ` {"a" : null , "a":2} `, `{"\u0061":1,"a":2}`, `[]`, `{"a":1}{}`, `{"a":tru}`, "{\"a\":\"\xff\"}", `{"a":1,}`, `{"a":-0.5e+3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m1, d1, e1 := oldParseObject(b)
		m2, d2, e2 := parseObject(b)
		if e1 == errDuplicate && e2 == errNotObject && !json.Valid(b) {
			return // both refuse; the old one saw the duplicate before the syntax error
		}
		if e1 != e2 || d1 != d2 || !maps.EqualFunc(m1, m2, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) }) {
			t.Fatalf("%q: old %v %q %v, new %v %q %v", b, m1, d1, e1, m2, d2, e2)
		}
	})
}
