package govern

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// canonicalJCS is the general path's canonical form of r (hash empty).
func canonicalJCS(r *Record) ([]byte, error) {
	c := *r
	c.Hash = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// checkCanonical compares the direct canonical form of r with the general
// path's; it returns whether the direct path took it.
func checkCanonical(t *testing.T, r *Record) bool {
	t.Helper()
	direct, ok := appendCanonicalRecord(nil, r)
	general, err := canonicalJCS(r)
	switch {
	case !ok:
		return false
	case err != nil:
		t.Errorf("the direct path wrote %s where the general path fails: %v", direct, err)
	case !bytes.Equal(direct, general):
		t.Errorf("canonical forms differ:\ndirect  %s\ngeneral %s", direct, general)
	}
	return true
}

// TestRecordKeysMatchTags: recordKeys are Record's JSON members, in JCS
// order — a field added to Record without the direct path fails here.
func TestRecordKeysMatchTags(t *testing.T) {
	var tags []string
	rt := reflect.TypeFor[Record]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		tags = append(tags, name)
	}
	slices.Sort(tags)
	if !slices.Equal(tags, recordKeys[:]) {
		t.Errorf("Record's json members %v; the direct canonical form writes %v", tags, recordKeys)
	}
	if !slices.IsSorted(recordKeys[:]) {
		t.Error("recordKeys are not sorted")
	}
}

// TestCanonicalRecordMatchesJCS: the direct canonical form of a record is
// byte for byte the general path's (RFC 8785 by gowebpki/jcs), and what
// it does not take it leaves to the general path.
func TestCanonicalRecordMatchesJCS(t *testing.T) {
	full := func() *Record {
		return &Record{Seq: 42, Prev: "sha256:ab", Hash: "sha256:ignored", Timestamp: Time{time.Date(2026, 11, 29, 3, 4, 5, 678_900_000, time.FixedZone("x", 3600))},
			Kind: "invocation_commit", RequestID: "6f1c1a3e-3f0e-4d8a-9a57-0b6f0c1d2e3f", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			ParentTraceID: "00f067aa0ba902b7", SpanID: "00f067aa0ba902b7", Node: "n1", Epoch: 3,
			Actor: Actor{ID: "agent-1", Kind: ActorAgent}, From: Plan, To: Execute, Tool: "refund", CallID: "call_1",
			Outcome: Success, Reasons: []Reason{ToolFailed, VerificationFailed}, Unique: "jti:1",
			Data: json.RawMessage(`{"b":1,"a":[true,false,null,"x"],"c":{"z":0.5,"y":-0}}`)}
	}
	with := func(f func(r *Record)) *Record { r := full(); f(r); return r }
	taken := []struct {
		name string
		r    *Record
	}{
		{"every member", full()},
		{"the zero record", &Record{}},
		{"no optional member", &Record{Seq: 1, Kind: "run_started", RequestID: "r", TraceID: "t", Outcome: Pending}},
		{"html and separators", with(func(r *Record) { r.Tool = `<a href="x">&</a>` + "\u2028\u2029\u007f" })},
		{"control characters", with(func(r *Record) { r.Node = "\x00\x01\b\t\n\v\f\r\x1f\"\\/" })},
		{"non-ASCII", with(func(r *Record) { r.Actor.ID = "Zoë 😀 \uffff 中文" })},
		{"Seq at 2^53", with(func(r *Record) { r.Seq = 1 << 53 })},
		{"data: numbers", with(func(r *Record) {
			r.Data = json.RawMessage(`[0,-0,1,-1,1.5,0.1,1e21,1e-7,1E+2,123456789012345,1234567890123456,12345678901234567,9007199254740993,-0.0,5e-324,1.7976931348623157e308,100e-2]`)
		})},
		{"data: strings", with(func(r *Record) {
			r.Data = json.RawMessage(`{"s":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t\u0001\u001f\u007f\u2028<>&","t":"plain","e":""}`)
		})},
		{"data: nesting and space", with(func(r *Record) {
			r.Data = json.RawMessage(" { \"b\" : [ { \"d\" : 1 , \"c\" : [ ] } , { } ] ,\n\t\"a\" : { } } ")
		})},
		{"data: key order", with(func(r *Record) { r.Data = json.RawMessage(`{"b":1,"a":2,"aa":3,"A":4,"_":5,"":6}`) })},
		{"data: scalars", with(func(r *Record) { r.Data = json.RawMessage(`"just a string"`) })},
		{"data: null", with(func(r *Record) { r.Data = json.RawMessage(`null`) })},
		// encoding/json writes each invalid byte as \ufffd, which JCS
		// writes as U+FFFD; canonical.AppendString writes U+FFFD directly.
		{"invalid UTF-8", with(func(r *Record) { r.Tool, r.Actor.ID, r.Reasons = "a\xffb", "\xe2\x82", []Reason{"\xed\xa0\x80"} })},
	}
	for _, c := range taken {
		t.Run(c.name, func(t *testing.T) {
			if !checkCanonical(t, c.r) {
				t.Error("the direct path did not take it")
			}
		})
	}
	left := []struct {
		name string
		r    *Record
	}{
		{"Seq beyond 2^53", with(func(r *Record) { r.Seq = 1<<53 + 1 })},
		{"Epoch beyond 2^53", with(func(r *Record) { r.Epoch = math.MaxUint64 })},
		{"data: invalid UTF-8", with(func(r *Record) { r.Data = json.RawMessage("\"a\xffb\"") })},
		{"data: a lone surrogate", with(func(r *Record) { r.Data = json.RawMessage(`"\ud800"`) })},
		{"data: a non-ASCII key", with(func(r *Record) { r.Data = json.RawMessage(`{"é":1,"z":2}`) })},
		{"data: a duplicate key", with(func(r *Record) { r.Data = json.RawMessage(`{"a":1,"a":2}`) })},
		{"data: trailing bytes", with(func(r *Record) { r.Data = json.RawMessage(`{} {}`) })},
		{"data: not JSON", with(func(r *Record) { r.Data = json.RawMessage(`{a:1}`) })},
		{"data: a leading zero", with(func(r *Record) { r.Data = json.RawMessage(`01`) })},
		{"data: too deep", with(func(r *Record) {
			r.Data = json.RawMessage(strings.Repeat("[", canonMaxDepth+2) + strings.Repeat("]", canonMaxDepth+2))
		})},
	}
	for _, c := range left {
		t.Run(c.name, func(t *testing.T) {
			if checkCanonical(t, c.r) {
				t.Error("the direct path took it; it is the general path's")
			}
			// ComputeHash is the general path's answer either way.
			direct, derr := c.r.ComputeHash()
			general, gerr := c.r.computeHashJCS()
			if direct != general || (derr == nil) != (gerr == nil) {
				t.Errorf("ComputeHash = %q, %v; the general path %q, %v", direct, derr, general, gerr)
			}
		})
	}
}

// FuzzCanonicalRecord: wherever the direct canonical form is taken, it is
// the general path's.
func FuzzCanonicalRecord(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[1.5,"x\u00e9"]}`), "refund", "agent-1", uint64(7))
	f.Add([]byte(`[1e21,-0,0.1,"\ud83d\ude00"]`), "<&>\u2028", "\x00", uint64(1<<53))
	f.Add([]byte(`null`), "", "", uint64(0))
	f.Add([]byte(`{"a":"\xff"}`), "\xff\xfeok\xe2\x82", "a\xed\xa0\x80b\xc0\xaf", uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, tool, actor string, seq uint64) {
		r := &Record{Seq: seq, Epoch: seq / 3, Tool: tool, Actor: Actor{ID: actor, Kind: ActorHuman}, Kind: "evidence",
			RequestID: actor + tool, Outcome: Success, Reasons: []Reason{Reason(tool)}, Data: data}
		checkCanonical(t, r)
	})
}

// BenchmarkComputeHash compares the direct canonical form with the
// general path (encoding/json, then JCS) on a typical record.
func BenchmarkComputeHash(b *testing.B) {
	r := &Record{Seq: 41, Prev: "sha256:0d4f1e0c4b8a4f1d9c5e2b7a3f6e8d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e",
		Timestamp: Time{time.Date(2026, 11, 29, 3, 4, 5, 678_000_000, time.UTC)}, Kind: "invocation_intent",
		RequestID: "439e0ddd-0d15-4589-a102-283a8970a4fb", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		Node: "node-1", Epoch: 1, Actor: Actor{ID: "support", Kind: ActorAgent}, Tool: "refund", CallID: "call-1", Outcome: Pending,
		Data: json.RawMessage(`{"tier":"write_high_risk","args_hash":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","rollback":{"type":"refund.reverse","args":{"order_id":"o-1001","amount":30}},"approval_id":"5b0e8a59-7a43-4f0e-8c8e-2f2f5f0e6c11","attempt":1}`)}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.ComputeHash(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jcs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.computeHashJCS(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// payloadCases are JSON texts for PayloadHash: the direct path takes the
// first eight (the last of which PayloadHash refuses before either path:
// checkExactIntegers), the general path the rest (or refuses them).
var payloadCases = []string{`{"ok":true}`, `{"b":1,"a":[1.5,"x\u00e9",null,false],"c":{}}`, ` [ 1e21 , -0 , 0.1 ] `,
	`"s<>&\u2028"`, `123456789012345`, `{"n":9007199254740992}`, `null`, `{"n":9007199254740993}`,
	`{"é":1}`, `{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `{} {}`, `01`, `{a:1}`, `1e400`}

// checkPayloadHash compares PayloadHash's direct path with its general
// one on payload; it returns whether the direct path took it.
func checkPayloadHash(t *testing.T, payload []byte) bool {
	t.Helper()
	direct, ok := canonicalPayloadHash(payload)
	general, err := payloadHashJCS(payload)
	switch {
	case !ok:
		return false
	case err != nil:
		t.Errorf("PayloadHash(%q): the direct path hashed it where the general path fails: %v", payload, err)
	case direct != general:
		t.Errorf("PayloadHash(%q): direct %s, general %s", payload, direct, general)
	}
	return true
}

// TestPayloadHashMatchesJCS: an evidence payload's hash is the same by
// the direct canonical form as by gowebpki/jcs, and what the direct form
// does not take, PayloadHash leaves to jcs.
func TestPayloadHashMatchesJCS(t *testing.T) {
	for i, p := range payloadCases {
		took := checkPayloadHash(t, []byte(p))
		if want := i < 8; took != want {
			t.Errorf("PayloadHash(%q): direct path took it = %t, want %t", p, took, want)
		}
		got, gotErr := PayloadHash(json.RawMessage(p))
		var want string
		wantErr := checkExactIntegers([]byte(p))
		if wantErr == nil {
			want, wantErr = payloadHashJCS([]byte(p))
		}
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("PayloadHash(%q) = %q, %v; the general path %q, %v", p, got, gotErr, want, wantErr)
		}
	}
}

// FuzzPayloadHash: wherever PayloadHash's direct path is taken, it hashes
// what the general path (gowebpki/jcs) hashes.
func FuzzPayloadHash(f *testing.F) {
	for _, p := range payloadCases {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkPayloadHash(t, payload)
	})
}
