package journal_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// codecRecords are records that exercise every member of a line.
func codecRecords() []*govern.Record {
	full := func() *govern.Record {
		r := journalfixture.Record(recordkind.Intent, "439e0ddd-0d15-4589-a102-283a8970a4fb", `{"tier":"write_low_risk","args":{"order":"A-1"}}`)
		r.Seq, r.Prev, r.Hash, r.ParentTraceID, r.SpanID, r.Node, r.Epoch = 7, "sha256:aa", "sha256:bb", "00f067aa0ba902b7", "00f067aa0ba902b7", "node-1", 3
		r.From, r.To, r.Tool, r.CallID, r.Reasons, r.Unique = govern.Plan, govern.Execute, "refund", "call-1", []govern.Reason{govern.ToolFailed, govern.NeedsReview}, "jti:1"
		return r
	}
	with := func(f func(r *govern.Record)) *govern.Record { r := full(); f(r); return r }
	recs := []*govern.Record{
		full(),
		journalfixture.Record(recordkind.Transition, "r", ""),
		with(func(r *govern.Record) { r.Reasons = []govern.Reason{} }),
		with(func(r *govern.Record) { r.Tool = `<b>&amp;</b> "q" \ ` + "\u2028\u2029 ß 東京 🚀 \x01\x7f" }),
		with(func(r *govern.Record) { r.Node = "bad \xff utf-8" }),
		with(func(r *govern.Record) { r.Seq, r.Epoch = 1<<64-1, 1<<64-1 }),
		with(func(r *govern.Record) {
			r.Timestamp = govern.Time{Time: time.Date(2024, 2, 29, 23, 59, 59, 999_000_000, time.UTC)}
		}),
		with(func(r *govern.Record) { r.Timestamp = govern.Time{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} }),
		with(func(r *govern.Record) { r.Timestamp = govern.Time{} }),
		with(func(r *govern.Record) { r.Data = json.RawMessage(`{"a": 1}`) }),
		with(func(r *govern.Record) { r.Data = json.RawMessage("\"\u2028<>&\"") }),
	}
	for _, d := range journalfixture.DataSamples {
		recs = append(recs, with(func(r *govern.Record) { r.Data = json.RawMessage(d) }))
	}
	return recs
}

// checkDecode compares decodeFast with the encoding/json path on line;
// it returns whether the fast path took it.
func checkDecode(t *testing.T, line []byte) bool {
	t.Helper()
	fast, ok := journal.DecodeFast(line)
	want, err := journal.DecodeRecordJSON(line)
	switch {
	case !ok:
		return false
	case err != nil:
		t.Errorf("decodeFast took %q, which DecodeRecord refuses: %v", line, err)
	case !reflect.DeepEqual(fast, want):
		t.Errorf("decodeFast(%q):\n got %#v\nwant %#v", line, fast, want)
	}
	return true
}

// checkDecodeVerify: Open's decoding of a line it verifies (views of
// the line, data not scanned but parsed by the hash) finds what
// DecodeRecord and ComputeHash find: the same error, or the same record
// and hash.
func checkDecodeVerify(t *testing.T, line []byte) {
	t.Helper()
	text := string(line) // the line as it was: the record is a view of it
	rec, hash, derr, herr := journal.DecodeVerify(line)
	want, wderr := journal.DecodeRecord([]byte(text))
	var whash string
	var wherr error
	if wderr == nil {
		whash, wherr = want.ComputeHash()
	}
	switch {
	case (derr == nil) != (wderr == nil) || derr != nil && derr.Error() != wderr.Error():
		t.Errorf("DecodeVerify(%q): error %v, DecodeRecord's %v", text, derr, wderr)
	case derr != nil:
	case hash != whash || (herr == nil) != (wherr == nil) || herr != nil && herr.Error() != wherr.Error():
		t.Errorf("DecodeVerify(%q): hash %q, %v; ComputeHash %q, %v", text, hash, herr, whash, wherr)
	case rec.Seq != want.Seq || rec.Prev != want.Prev || rec.Hash != want.Hash || rec.RequestID != want.RequestID ||
		rec.Unique != want.Unique || rec.Kind != want.Kind:
		t.Errorf("DecodeVerify(%q):\n got %#v\nwant %#v", text, rec, want)
	}
	if string(line) != text {
		t.Errorf("DecodeVerify changed its line")
	}
}

// TestDecodeVerifyMatchesDecodeRecord: the lines agentry writes are
// taken by Open's borrowed decoding, and lines that are not records (or
// whose data is not the last member, or not JSON) are refused with
// DecodeRecord's error.
func TestDecodeVerifyMatchesDecodeRecord(t *testing.T) {
	for i, r := range codecRecords() {
		line, err := journal.AppendRecordJSON(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		checkDecodeVerify(t, line)
		if _, fast := journal.DecodeFast(line); fast {
			if _, ok := journal.DecodeBorrowed(line); !ok {
				t.Errorf("record %d: decodeBorrowed declined a line decodeFast takes: %s", i, line)
			}
		}
	}
	base := `{"seq":1,"prev":"","hash":"sha256:00","timestamp":"2026-11-29T01:02:03.456Z","kind":"evidence","request_id":"r","trace_id":"t","actor":{"id":"a","kind":"agent"},"outcome":"success"`
	for _, line := range []string{
		base + `,"data":{"a":1}}`,
		base + `,"data":{"a":1}  }`,
		base + `,"data":{"a":1},"tool":"x"}`,
		base + `,"data":{"a":1}}}`,
		base + `,"data":{"a":1},}`,
		base + `,"data":{"a":}}`,
		base + `,"data":"` + "\xff" + `"}`,
		base + `,"data":"\ud800"}`,
		base + `,"data":01}`,
		base + `,"data":}`,
		base + `,"data":{"a":1}`,
		base + `,"data":{"a":1}]`,
		base + `,"data":[1,2] , "tool":"x"}`,
		`{"seq":1,"data":{"a":1}}`,
		base + `}`,
	} {
		checkDecodeVerify(t, []byte(line))
	}
}

// TestFastCodecMatchesEncodingJSON: the line of every record is written
// by the direct path as encoding/json writes it (or left to it), and
// read back by the direct path as encoding/json reads it; the lines
// agentry writes are all taken by both direct paths.
func TestFastCodecMatchesEncodingJSON(t *testing.T) {
	for i, r := range codecRecords() {
		want, err := journal.AppendRecordJSON(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		line, ok := journal.AppendRecordFast(nil, r)
		if ok && !bytes.Equal(line, want) {
			t.Errorf("record %d: appendRecordFast\n%s\nencoding/json\n%s", i, line, want)
		}
		if !ok && json.Valid(r.Data) && bytes.Equal(want, line) {
			t.Errorf("record %d: appendRecordFast declined", i)
		}
		took := checkDecode(t, want)
		escapes := bytes.Contains(bytes.Split(want, []byte(`"data":`))[0], []byte(`\`)) // in a member other than data
		if !took && !escapes && r.Timestamp.Year() < 10000 && !r.Timestamp.IsZero() {
			t.Errorf("record %d: decodeFast declined %s", i, want)
		}
	}
	// What the direct path leaves to encoding/json (or refuses with it).
	base := `"prev":"","hash":"","timestamp":"2026-11-29T01:02:03.456Z","kind":"x","request_id":"r","trace_id":"t","actor":{"id":"a","kind":"agent"},"outcome":"pending"`
	for _, line := range []string{
		`{"seq":1,` + base + `}`,
		`{"seq":1,` + base + `,"data":null}`,
		`{"seq":1,` + base + `,"reasons":[]}`,
		` {"seq":1,` + base + "}\n",
		`{"seq":null,` + base + `}`,
		`{"seq":1.0,` + base + `}`,
		`{"seq":-1,` + base + `}`,
		`{"seq":01,` + base + `}`,
		`{"seq":18446744073709551616,` + base + `}`,
		`{"seq":1,` + base + `,"seq":2}`,
		`{"Seq":1,` + base + `}`,
		`{"seq":1,` + base + `,"x":1}`,
		`{"seq":1,` + base + `} x`,
		`{"seq":1,` + base + `}{}`,
		`{"seq":1,` + strings.Replace(base, `"prev":""`, `"prev":"a\"b"`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `"prev":""`, "\"prev\":\"\xff\"", 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `"kind":"agent"`, `"kind":"agent","id":"b"`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `,"kind":"agent"`, ``, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `.456Z`, `.456z`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `.456Z`, `Z`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `11-29`, `02-30`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `2026-11-29`, `2024-02-29`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `2026-11-29`, `2023-02-29`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `2026-11-29`, `0000-01-01`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `2026-11-29`, `9999-12-31`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `2026-11-29`, `2026-00-10`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `2026-11-29`, `2026-13-10`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `01:02:03`, `23:59:59`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `01:02:03`, `24:02:03`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `01:02:03`, `01:02:60`, 1) + `}`,
		`{"seq":1,` + strings.Replace(base, `,"outcome":"pending"`, ``, 1) + `}`,
		`{"seq":1,` + base + `,"data":{"a":[1,2,{"b":"\u00e9\n"}]} }`,
		`{"seq":1,` + base + `,"data":{"a":}}`,
		`{"seq":1,` + base + `,"data":01}`,
		`{"seq":1,` + base + "\t,\r\"data\" :\n[1e5,-0.5E-3,true,false,null,\"\xff\"]}",
		`{"seq":1,` + base + `,"data":"\x"}`,
		`{"seq":1,` + base + `,"data":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
	} {
		checkDecode(t, []byte(line))
		_, fastOK := journal.DecodeFast([]byte(line))
		_, err := journal.DecodeRecord([]byte(line))
		_, wantErr := journal.DecodeRecordJSON([]byte(line))
		if (err == nil) != (wantErr == nil) {
			t.Errorf("DecodeRecord(%q) = %v, encoding/json path %v (fast path took it: %t)", line, err, wantErr, fastOK)
		}
	}
}

// FuzzDecodeFast: wherever decodeFast takes a line, DecodeRecord's
// encoding/json path accepts it and reads the same record; a record's
// line written by the direct path is encoding/json's.
func FuzzDecodeFast(f *testing.F) {
	for _, r := range codecRecords() {
		line, err := journal.AppendRecordJSON(nil, r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(line)
	}
	for _, l := range seedLines(f) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecode(t, line)
		checkDecodeVerify(t, line)
		r, err := journal.DecodeRecordJSON(line)
		if err != nil {
			return
		}
		want, err := journal.AppendRecordJSON(nil, &r)
		if got, ok := journal.AppendRecordFast(nil, &r); ok && (err != nil || !bytes.Equal(got, want)) {
			t.Fatalf("appendRecordFast\n%s\nencoding/json (%v)\n%s", got, err, want)
		}
	})
}

// TestDecodeRecordMissingMemberErrorIsStable: a line lacking several
// required members is refused with the same error every time (the first
// missing one in the record's order), not one picked by map iteration.
func TestDecodeRecordMissingMemberErrorIsStable(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"seq":1,"data":{"a":1}}`, `record lacks member "prev"`},
		{`{"seq":1,"prev":"","hash":"h","timestamp":"2026-11-29T01:02:03.456Z","kind":"k","request_id":"r","trace_id":"t","actor":{},"outcome":"o"}`, `record member "actor": actor lacks member "id"`},
	} {
		for range 20 {
			_, err := journal.DecodeRecord([]byte(c.line))
			if err == nil || err.Error() != c.want {
				t.Fatalf("DecodeRecord(%s) = %v, want %s", c.line, err, c.want)
			}
		}
	}
}
