package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/strictjson"
)

// goTypeName matches what would betray a Go type in a message.
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|map\[|\[\]|struct|interface|reflect|json:|Go value|Go struct)\b`)

// loneSurrogate finds a \u escape of a surrogate not followed by a low
// one (an independent statement of the rule, on text without other
// backslash escapes of a backslash).
var surrogateEscape = regexp.MustCompile(`(?i)\\u[d][89a-f][0-9a-f]{2}`)

// FuzzDecode is the differential check: on every input, for several
// destination types, Decode either
//
//   - accepts, and then encoding/json accepts too and stores the same
//     value; or
//   - refuses with an *Error whose text names no Go type, for a reason
//     that holds of the input by an independent test — encoding/json
//     refuses it too, or the input has invalid UTF-8, a surrogate escape,
//     deep nesting, a member name that folds to a field's.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"workflow_name":"store","action":"method_call","task":"view_cart","args":{}}`,
		`{"workflow_name":"store","action":"method_call","args":{"product_id":"SKU-005","quantity":1}}`,
		`{"workflow_name":"store"}}x`, `{"workflow_name":"store"}{}`, "{\"action\":\"a\xffb\"}",
		`{"args":{"note":"\ud800"}}`, `{"action":"\udc00\ud800"}`, `{"args":{"quantity":1e400}}`,
		`{"count":128,"size":-1,"ratio":1e39,"wait":"yes","items":[{"id":"a","qty":"2"}],"pair":[1,2,3]}`,
		`{"Workflow_Name":"x","ID":1,"ſ":2}`, `{"next":{"next":{"next":null}},"Raw":[{}]}`,
		`[1,"a",{"b":[true,false,null]},-0.5e-3]`, `{"a":"\ud83d\ude00","a":"\u00e9"}`, `"\u0000"`,
		`{"args":{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		differential(t, in, func() any { return new(request) }, nil)
		differential(t, in, func() any { return new(any) }, nil)
		differential(t, in, func() any { return new(map[string]item) }, nil)
		differential(t, in, func() any { return new([]int32) }, nil)
		differential(t, in, func() any { return new(request) }, &strictjson.Options{DisallowUnknownFields: true, DisallowDuplicates: true})
		// Check agrees with Decode into any.
		var v any
		if errDecode, errCheck := strictjson.Decode(in, &v, nil), strictjson.Check(in, nil); (errDecode == nil) != (errCheck == nil) {
			t.Fatalf("Decode into any: %v, Check: %v", errDecode, errCheck)
		}
	})
}

var caseVariant = regexp.MustCompile(`^unknown member ("(?:[^"\\]|\\.)*") \(member names are case-sensitive: ("(?:[^"\\]|\\.)*")\)$`)

// isCaseVariant reports whether msg names a member and a field that
// differ but fold to the same name.
func isCaseVariant(msg string) bool {
	m := caseVariant.FindStringSubmatch(msg)
	if m == nil {
		return false
	}
	member, err1 := strconv.Unquote(m[1])
	field, err2 := strconv.Unquote(m[2])
	return err1 == nil && err2 == nil && member != field && strings.EqualFold(member, field)
}

func differential(t *testing.T, in []byte, newV func() any, opts *strictjson.Options) {
	t.Helper()
	want, got := newV(), newV()
	errStd := json.Unmarshal(in, want)
	err := strictjson.Decode(in, got, opts)
	if err == nil {
		if errStd != nil {
			t.Fatalf("Decode(%q) into %T accepted what encoding/json refuses: %v", in, got, errStd)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("Decode(%q) into %T:\n encoding/json %#v\n strictjson    %#v", in, got, want, got)
		}
		return
	}
	var e *strictjson.Error
	if !errors.As(err, &e) {
		t.Fatalf("Decode(%q) = %T %v, want an *Error", in, err, err)
	}
	if goTypeName.MatchString(err.Error()) {
		t.Fatalf("Decode(%q) = %q: names a Go type", in, err)
	}
	if errStd != nil && opts == nil {
		return // both refuse
	}
	justified := false
	switch e.Reason {
	case strictjson.ErrInvalidUTF8:
		justified = !utf8.Valid(in)
	case strictjson.ErrLoneSurrogate:
		justified = surrogateEscape.Match(in)
	case strictjson.ErrTooDeep:
		justified = bytes.Count(in, []byte("["))+bytes.Count(in, []byte("{")) > strictjson.DefaultMaxDepth
	case strictjson.ErrUnknownField:
		// A closed struct refuses any unknown member; otherwise the
		// member must be a case variant of the field the message names.
		justified = opts != nil && opts.DisallowUnknownFields || isCaseVariant(e.Message)
	case strictjson.ErrDuplicate:
		justified = opts != nil && opts.DisallowDuplicates
	case strictjson.ErrTooLarge:
		justified = len(in) > strictjson.DefaultMaxSize
	case strictjson.ErrSyntax, strictjson.ErrTrailingData, strictjson.ErrType:
		justified = errStd != nil
	}
	if !justified {
		t.Fatalf("Decode(%q) into %T refused (%v) what encoding/json accepts, for no reason of the rules", in, got, err)
	}
	if strings.Contains(err.Error(), "invalid value") && e.Reason == strictjson.ErrType {
		t.Fatalf("Decode(%q) into %T: encoding/json refused a type the check models: %v", in, got, errors.Unwrap(err))
	}
}
