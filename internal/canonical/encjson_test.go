package canonical

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// marshalNoHTML is encoding/json's form without HTML escaping (an
// Encoder with SetEscapeHTML(false)), its newline cut.
func marshalNoHTML(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

var jsonStrings = []string{"", "plain", `"quoted" \back\slash/`, "\x00\x01\b\t\n\v\f\r\x1f\x7f",
	"<html> & \u2028\u2029", "Zoë 😀 中文 \uffff", "bad \xff\xfe utf-8 \xc3", "\xed\xa0\x80 (a surrogate's bytes)", "\xe2\x80", "\xe2\x80\xa8"}

// TestAppendJSONStringMatchesEncodingJSON: strings are written byte for
// byte as encoding/json writes them, with and without HTML escaping.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStrings {
		checkString(t, s)
	}
}

func checkString(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendJSONString(nil, s, true); !bytes.Equal(got, want) {
		t.Errorf("AppendJSONString(%q, true) = %s, want %s", s, got, want)
	}
	if got := AppendJSONString(nil, []byte(s), true); !bytes.Equal(got, want) {
		t.Errorf("AppendJSONString([]byte %q, true) = %s, want %s", s, got, want)
	}
	want = marshalNoHTML(t, s)
	if got := AppendJSONString(nil, s, false); !bytes.Equal(got, want) {
		t.Errorf("AppendJSONString(%q, false) = %s, want %s", s, got, want)
	}
}

// TestAppendJSONMatchesMarshal: the JSON-shaped values are written as
// json.Marshal writes them; the others are left to it.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	taken := []any{nil, true, false, "s<>&", 0.0, math.Copysign(0, -1), 1.5, -2e-7, 1e21, 123456789012345678.0, 5e-324, math.MaxFloat64,
		42, int8(-8), int16(16), int32(-32), int64(math.MinInt64), uint(7), uint8(8), uint16(16), uint32(32), uint64(math.MaxUint64),
		map[string]any{"b": 1, "a": []any{"x", nil, map[string]any{}}, "é": "ü", "A": map[string]string{"z": "1", "<": ">"}},
		map[string]any{}, map[string]any(nil), []any{}, []any(nil), []string{"a", "\xff"}, []string(nil), map[string]string(nil),
		map[string]any{"order": 1042, "sku": "A-1", "qty": 2, "note": "leave at the door"}}
	for _, v := range taken {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AppendJSON(nil, v)
		if !ok {
			t.Errorf("AppendJSON(%#v) declined", v)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("AppendJSON(%#v) = %s, want %s", v, got, want)
		}
	}
	deep := any("leaf")
	for range maxJSONDepth + 2 {
		deep = []any{deep}
	}
	type named struct{ A int }
	for _, v := range []any{math.NaN(), math.Inf(1), float32(1.5), named{1}, &named{}, json.Number("1"), json.RawMessage(`{}`),
		map[string]any{"x": math.Inf(-1)}, []any{struct{}{}}, deep, map[int]any{}} {
		if got, ok := AppendJSON(nil, v); ok {
			t.Errorf("AppendJSON(%#v) = %s, want it declined", v, got)
		}
	}
}

// TestCompactAsIs: raw JSON is reported unchanged only when encoding/json
// would copy it unchanged.
func TestCompactAsIs(t *testing.T) {
	for _, c := range []struct {
		raw        string
		html, text bool // as is with escapeHTML, without
	}{
		{`{"a":[1,true,null,"x y"]}`, true, true},
		{`{"a": 1}`, false, false},
		{" 1", false, false},
		{`"<b>"`, false, true},
		{"\"\u2028\"", false, true},
		{`"a\"b\\"`, true, true},
		{`{"a":1`, false, false},
		{``, false, false},
		{`"\u003c"`, true, true},
	} {
		if got := CompactAsIs([]byte(c.raw), true); got != c.html {
			t.Errorf("CompactAsIs(%q, true) = %t, want %t", c.raw, got, c.html)
		}
		if got := CompactAsIs([]byte(c.raw), false); got != c.text {
			t.Errorf("CompactAsIs(%q, false) = %t, want %t", c.raw, got, c.text)
		}
	}
}

// FuzzAppendJSON: for any JSON text, the value encoding/json reads from it
// is written by AppendJSON as json.Marshal writes it; the text itself, as
// a string, by AppendJSONString; and CompactAsIs claims only what
// encoding/json copies unchanged.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"order":1042,"sku":"A-1","qty":2,"note":"<leave> & \u2028 at the door","f":[1e-7,1e21,-0.0,0.1]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkString(t, string(in))
		for _, esc := range []bool{true, false} {
			if !CompactAsIs(in, esc) {
				// Not claimed: encoding/json changes it, or it is not JSON
				// (or nested beyond CompactAsIs's bound).
				if esc {
					if out, err := json.Marshal(json.RawMessage(in)); err == nil && bytes.Equal(out, in) && bytes.Count(in, []byte("[")) < 500 && bytes.Count(in, []byte("{")) < 500 {
						t.Fatalf("CompactAsIs(%q, true) = false, but json.Marshal leaves it as it is", in)
					}
				}
				continue
			}
			var want []byte
			if esc {
				var err error
				if want, err = json.Marshal(json.RawMessage(in)); err != nil {
					t.Fatalf("CompactAsIs(%q, true) but json.Marshal fails: %v", in, err)
				}
			} else {
				want = marshalNoHTML(t, json.RawMessage(in))
			}
			if !bytes.Equal(want, in) {
				t.Fatalf("CompactAsIs(%q, %t) but encoding/json writes %s", in, esc, want)
			}
		}
		var v any
		if json.Unmarshal(in, &v) != nil {
			return
		}
		want, err := json.Marshal(v)
		got, ok := AppendJSON(nil, v)
		switch {
		case !ok:
			// declined (too deep): json.Marshal decides
		case err != nil:
			t.Fatalf("AppendJSON wrote %s where json.Marshal fails: %v", got, err)
		case !bytes.Equal(got, want):
			t.Fatalf("AppendJSON = %s, json.Marshal = %s", got, want)
		}
	})
}

// TestAppendTimeMillis: a date-time is written as the layout writes it,
// in UTC, for any instant.
func TestAppendTimeMillis(t *testing.T) {
	const layout = "2006-01-02T15:04:05.000Z07:00"
	for _, tm := range []time.Time{{}, time.Unix(0, 0), time.Date(2026, 11, 29, 23, 59, 59, 999_999_999, time.FixedZone("x", 3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 1e6, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 2, 3, 4, 5, 6, 7_000_000, time.FixedZone("y", -7200)), time.Now()} {
		if got, want := string(AppendTimeMillis(nil, tm)), tm.UTC().Format(layout); got != want {
			t.Errorf("AppendTimeMillis(%v) = %s, want %s", tm, got, want)
		}
	}
}

// FuzzAppendTimeMillis: any instant is written as the layout writes it.
func FuzzAppendTimeMillis(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(1795000000), int64(999_999_999))
	f.Add(int64(-62135596801), int64(5))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec)
		if got, want := string(AppendTimeMillis(nil, tm)), tm.UTC().Format("2006-01-02T15:04:05.000Z07:00"); got != want {
			t.Fatalf("AppendTimeMillis(%d, %d) = %s, want %s", sec, nsec, got, want)
		}
	})
}

// TestScanners: EscapeLen and NumberEnd follow RFC 8259 §6 and §7.
func TestScanners(t *testing.T) {
	for in, want := range map[string]int{`\"x`: 2, `\/`: 2, `\u00e9z`: 6, `\u00G9`: 0, `\u00`: 0, `\x`: 0, `\`: 0, `a`: 0} {
		if got := EscapeLen([]byte(in)); got != want {
			t.Errorf("EscapeLen(%q) = %d, want %d", in, got, want)
		}
	}
	for in, want := range map[string]int{"0,": 1, "-12.5e+3]": 8, "1E9": 3, "-0.0": 4, "01": 1, "-": -1, "1.": -1, "1e": -1, ".5": -1, "+1": -1} {
		end, ok := NumberEnd([]byte(in), 0)
		if !ok {
			end = -1
		}
		if end != want {
			t.Errorf("NumberEnd(%q) = %d, %v; want %d", in, end, ok, want)
		}
	}
}
