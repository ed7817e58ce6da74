package govern_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/uaicpschema"
	"github.com/google/go-cmp/cmp"
)

const decEnvelope = `{
	"uaicp_version": "0.3",
	"request_id": "f47ac10b-58cc-4372-a567-0e02b2c3d479",
	"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
	"state": "execute",
	"timestamp": "2026-01-01T00:00:00.000Z",
	"identity": {"agent_id": "agent:a", "owner_id": "org:o", "control_class": "autonomous"},
	"outcome": "pending"
}`

const decEvidence = `{
	"evidence_id": "ev-1",
	"evidence_type": "tool_result",
	"source": "tool:lookup",
	"hash": "sha256:abc",
	"collected_at": "2026-01-01T00:00:00.000Z"
}`

const decReport = `{
	"report_id": "vr-1",
	"request_id": "f47ac10b-58cc-4372-a567-0e02b2c3d479",
	"status": "pass",
	"checks": [{"check_id": "c1", "result": "pass"}],
	"generated_at": "2026-01-01T00:00:00.000Z"
}`

// decWith returns the JSON object text doc with the member at the
// slash-separated path set to the JSON text v ("" deletes it).
func decWith(t testing.TB, doc, path, v string) string {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	names := strings.Split(path, "/")
	obj := m
	for _, n := range names[:len(names)-1] {
		obj = obj[n].(map[string]any)
	}
	last := names[len(names)-1]
	if v == "" {
		delete(obj, last)
	} else {
		obj[last] = json.RawMessage(v)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type decodeCase struct {
	name string
	doc  string
	path string // want DecodeError.Path
	msg  string // want in DecodeError.Message
}

// runDecodeCases checks that decode refuses each case as it says, and
// that the schema refuses it too unless the case is named in beyond (a
// rule of the decoder stricter than the schema).
func runDecodeCases[T any](t *testing.T, decode func([]byte) (*T, error), validate func([]byte) error, cases []decodeCase, beyond ...string) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			schemaErr := validate([]byte(tt.doc))
			if stricter := slices.Contains(beyond, tt.name); stricter != (schemaErr == nil) {
				t.Errorf("stricter than the schema: %v, but the schema says %v", stricter, schemaErr)
			}
			v, err := decode([]byte(tt.doc))
			var de *govern.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("decoded %+v, err %v; want a *DecodeError", v, err)
			}
			if de.Path != tt.path || !strings.Contains(de.Message, tt.msg) {
				t.Errorf("DecodeError{Path: %q, Message: %q}, want path %q and a message containing %q", de.Path, de.Message, tt.path, tt.msg)
			}
			if v != nil {
				t.Errorf("decoded %+v along with the error", v)
			}
		})
	}
}

func TestUAICP_6_DecodeFixtures(t *testing.T) {
	dir := filepath.Join("..", "internal", "uaicpschema", "testdata", "fixtures")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := govern.DecodeEnvelope(read("message-envelope.valid.json")); err != nil {
		t.Error(err)
	}
	if _, err := govern.DecodeEvidence(read("evidence-object.valid.json")); err != nil {
		t.Error(err)
	}
	if _, err := govern.DecodeReport(read("verification-report.valid.json")); err != nil {
		t.Error(err)
	}
	for _, tt := range []struct {
		file string
		err  error
		path string
	}{
		{"message-envelope.invalid-missing-state.json", decodeErr(govern.DecodeEnvelope(read("message-envelope.invalid-missing-state.json"))), "/state"},
		{"evidence-object.invalid-missing-source.json", decodeErr(govern.DecodeEvidence(read("evidence-object.invalid-missing-source.json"))), "/source"},
		{"verification-report.invalid-missing-checks.json", decodeErr(govern.DecodeReport(read("verification-report.invalid-missing-checks.json"))), "/checks"},
	} {
		var de *govern.DecodeError
		if !errors.As(tt.err, &de) || de.Path != tt.path || de.Message != "required member is missing" {
			t.Errorf("%s: err = %v, want the missing %s", tt.file, tt.err, tt.path)
		}
	}
}

func decodeErr[T any](_ *T, err error) error { return err }

func TestDecodeEnvelopeRefuses(t *testing.T) {
	big := `{"uaicp_version":"` + strings.Repeat("x", govern.MaxObjectSize) + `"}`
	deep := strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001)
	e := decEnvelope
	cases := []decodeCase{
		{"too large", big, "", "more than 1048576"},
		{"invalid UTF-8", decWith(t, e, "trace_id", "\"t\xff\""), "/trace_id", "invalid UTF-8"},
		{"empty", ``, "", "not a JSON document"},
		{"not JSON", `{"uaicp_version":}`, "", "not a JSON document"},
		{"trailing value", e + ` {}`, "", "not a JSON document"},
		{"trailing garbage", e + `x`, "", "not a JSON document"},
		{"too deep", deep, "", "nested deeper than 10000"},
		{"lone surrogate", decWith(t, e, "trace_id", `"t\ud800"`), "/trace_id", "half a surrogate pair"},
		{"array", `[` + e + `]`, "", "must be an object, not an array"},
		{"null", `null`, "", "must be an object, not null"},
		{"duplicate member", strings.Replace(e, `"outcome"`, `"state": "plan", "outcome"`, 1), "/state", `duplicate member "state"`},
		{"duplicate in identity", decWith(t, e, "identity", `{"agent_id":"a","owner_id":"o","control_class":"autonomous","agent_id":"b"}`), "/identity/agent_id", "duplicate member"},
		{"duplicate deep in metadata", decWith(t, e, "metadata", `{"a":[{"b":1},{"c":1,"c":2}]}`), "/metadata/a/1/c", "duplicate member"},
		{"member name in another case", strings.Replace(e, `"request_id"`, `"Request_ID"`, 1), "/Request_ID", `case-sensitive: did you mean "request_id"`},
		{"both cases", decWith(t, e, "STATE", `"deliver"`), "/STATE", "case-sensitive"},
		{"unknown member", decWith(t, e, "x_vendor", `1`), "/x_vendor", "unknown member"},
		{"missing uaicp_version", decWith(t, e, "uaicp_version", ""), "/uaicp_version", "required member is missing"},
		{"missing request_id", decWith(t, e, "request_id", ""), "/request_id", "required member is missing"},
		{"missing trace_id", decWith(t, e, "trace_id", ""), "/trace_id", "required member is missing"},
		{"missing state", decWith(t, e, "state", ""), "/state", "required member is missing"},
		{"missing timestamp", decWith(t, e, "timestamp", ""), "/timestamp", "required member is missing"},
		{"missing identity", decWith(t, e, "identity", ""), "/identity", "required member is missing"},
		{"missing outcome", decWith(t, e, "outcome", ""), "/outcome", "required member is missing"},
		{"uaicp_version not a string", decWith(t, e, "uaicp_version", `0.3`), "/uaicp_version", "must be a string, not a number"},
		{"request_id not-a-uuid", decWith(t, e, "request_id", `"not-a-uuid"`), "/request_id", "is not a UUID"},
		{"request_id urn:uuid form", decWith(t, e, "request_id", `"urn:uuid:f47ac10b-58cc-4372-a567-0e02b2c3d479"`), "/request_id", "is not a UUID"},
		{"request_id braces", decWith(t, e, "request_id", `"{f47ac10b-58cc-4372-a567-0e02b2c3d479}"`), "/request_id", "is not a UUID"},
		{"trace_id empty", decWith(t, e, "trace_id", `""`), "/trace_id", "must not be empty"},
		{"trace_id null", decWith(t, e, "trace_id", `null`), "/trace_id", "must be a string, not null"},
		{"parent_trace_id empty", decWith(t, e, "parent_trace_id", `""`), "/parent_trace_id", "must not be empty"},
		{"state unknown", decWith(t, e, "state", `"done"`), "/state", `"done" is not one of intake, plan, execute, verify, deliver, fail_safe`},
		{"state in another case", decWith(t, e, "state", `"Execute"`), "/state", "is not one of"},
		{"timestamp yesterday", decWith(t, e, "timestamp", `"yesterday"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp without zone", decWith(t, e, "timestamp", `"2026-01-01T00:00:00"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp with a space", decWith(t, e, "timestamp", `"2026-01-01 00:00:00Z"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp February 30", decWith(t, e, "timestamp", `"2026-02-30T00:00:00Z"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp hour 24", decWith(t, e, "timestamp", `"2026-01-01T24:00:00Z"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp offset +24:00", decWith(t, e, "timestamp", `"2026-01-01T00:00:00+24:00"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp offset minutes 60", decWith(t, e, "timestamp", `"2026-01-01T00:00:00+00:60"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp comma fraction", decWith(t, e, "timestamp", `"2026-01-01T00:00:00,5Z"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp empty fraction", decWith(t, e, "timestamp", `"2026-01-01T00:00:00.Z"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp signed field", decWith(t, e, "timestamp", `"2026-01-01T+1:00:00Z"`), "/timestamp", "not an RFC 3339 date-time"},
		{"timestamp leap second", decWith(t, e, "timestamp", `"2016-12-31T23:59:60Z"`), "/timestamp", "leap second"},
		{"timestamp before year 0 in UTC", decWith(t, e, "timestamp", `"0000-01-01T00:00:00+01:00"`), "/timestamp", "outside the years 0000-9999"},
		{"timestamp after year 9999 in UTC", decWith(t, e, "timestamp", `"9999-12-31T23:59:59-01:00"`), "/timestamp", "outside the years 0000-9999"},
		{"timestamp a number", decWith(t, e, "timestamp", `1767225600`), "/timestamp", "must be a string, not a number"},
		{"identity a string", decWith(t, e, "identity", `"agent:a"`), "/identity", "must be an object, not a string"},
		{"identity null", decWith(t, e, "identity", `null`), "/identity", "must be an object, not null"},
		{"identity without agent_id", decWith(t, e, "identity", `{"owner_id":"o","control_class":"autonomous"}`), "/identity/agent_id", "required member is missing"},
		{"identity with Agent_ID", decWith(t, e, "identity", `{"Agent_ID":"a","owner_id":"o","control_class":"autonomous"}`), "/identity/agent_id", `there is "Agent_ID": member names are case-sensitive`},
		{"identity agent_id empty", decWith(t, e, "identity", `{"agent_id":"","owner_id":"o","control_class":"autonomous"}`), "/identity/agent_id", "must not be empty"},
		{"identity without owner_id", decWith(t, e, "identity", `{"agent_id":"a","control_class":"autonomous"}`), "/identity/owner_id", "required member is missing"},
		{"identity user_id empty", decWith(t, e, "identity", `{"agent_id":"a","owner_id":"o","user_id":"","control_class":"autonomous"}`), "/identity/user_id", "must not be empty"},
		{"identity without control_class", decWith(t, e, "identity", `{"agent_id":"a","owner_id":"o"}`), "/identity/control_class", "required member is missing"},
		{"identity control_class unknown", decWith(t, e, "identity", `{"agent_id":"a","owner_id":"o","control_class":"robot"}`), "/identity/control_class", "is not one of autonomous, human-supervised, human-directed"},
		{"identity extension beyond float64", decWith(t, e, "identity", `{"agent_id":"a","owner_id":"o","control_class":"autonomous","acme.n":1e400}`), "/identity/acme.n", "cannot be represented"},
		{"outcome unknown", decWith(t, e, "outcome", `"ok"`), "/outcome", "is not one of success, failure, uncertain, pending"},
		{"streaming an array", decWith(t, e, "streaming", `[]`), "/streaming", "must be an object, not an array"},
		{"streaming chunk_id a number", decWith(t, e, "streaming", `{"chunk_id":1}`), "/streaming/chunk_id", "must be a string"},
		{"streaming is_final a string", decWith(t, e, "streaming", `{"is_final":"yes"}`), "/streaming/is_final", "must be a boolean, not a string"},
		{"streaming stream_index fractional", decWith(t, e, "streaming", `{"stream_index":1.5}`), "/streaming/stream_index", "must be an integer, not 1.5"},
		{"streaming stream_index tiny", decWith(t, e, "streaming", `{"stream_index":1e-99999999999999999999}`), "/streaming/stream_index", "out of range"},
		{"streaming stream_index a string", decWith(t, e, "streaming", `{"stream_index":"1"}`), "/streaming/stream_index", "must be an integer, not a string"},
		{"streaming stream_index huge", decWith(t, e, "streaming", `{"stream_index":1e30}`), "/streaming/stream_index", "out of range"},
		{"streaming stream_index past int64", decWith(t, e, "streaming", `{"stream_index":9223372036854775808}`), "/streaming/stream_index", "out of range"},
		{"streaming stream_index zero with exponent beyond int64", decWith(t, e, "streaming", `{"stream_index":0e99999999999999999999}`), "/streaming/stream_index", "out of range"},
		{"streaming stream_index 1e-1000001", decWith(t, e, "streaming", `{"stream_index":1e-1000001}`), "/streaming/stream_index", "out of range"},
		{"long values are cut in messages", decWith(t, e, "request_id", `"`+strings.Repeat("x", 1000)+`"`), "/request_id", `"` + strings.Repeat("x", 64) + `…" is not a UUID`},
		{"streaming stream_index enormous exponent", decWith(t, e, "streaming", `{"stream_index":1e99999999999999999999}`), "/streaming/stream_index", "out of range"},
		{"rollback_action a string", decWith(t, e, "rollback_action", `"undo"`), "/rollback_action", "must be an object"},
		{"rollback_action type a number", decWith(t, e, "rollback_action", `{"type":1}`), "/rollback_action/type", "must be a string"},
		{"rollback_action payload null", decWith(t, e, "rollback_action", `{"type":"t","payload":null}`), "/rollback_action/payload", "must be an object or a string, not null"},
		{"rollback_action payload an array", decWith(t, e, "rollback_action", `{"type":"t","payload":[1]}`), "/rollback_action/payload", "must be an object or a string, not an array"},
		{"rollback_action payload a number", decWith(t, e, "rollback_action", `{"type":"t","payload":3}`), "/rollback_action/payload", "must be an object or a string, not a number"},
		{"metadata an array", decWith(t, e, "metadata", `[]`), "/metadata", "must be an object, not an array"},
		{"metadata number beyond float64", decWith(t, e, "metadata", `{"n":-1e400}`), "/metadata/n", "cannot be represented"},
		{"pointer escaping", decWith(t, e, "metadata", `{"a/b~c":{"x":1,"x":2}}`), "/metadata/a~1b~0c/x", "duplicate member"},
		{"quote in a member name", decWith(t, e, "metadata", `{"a\"b.c":{"x":1,"x":2}}`), "/metadata/a\"b.c/x", "duplicate member"},
	}
	runDecodeCases(t, govern.DecodeEnvelope, uaicpschema.ValidateEnvelope, cases,
		"invalid UTF-8", "lone surrogate", "duplicate member", "duplicate in identity", "duplicate deep in metadata", "pointer escaping", "quote in a member name",
		"timestamp signed field", "timestamp leap second", "timestamp before year 0 in UTC", "timestamp after year 9999 in UTC",
		"identity extension beyond float64", "metadata number beyond float64",
		"streaming stream_index huge", "streaming stream_index past int64")
}

func TestDecodeEnvelopeAccepts(t *testing.T) {
	e := decEnvelope
	utc := func(s string) govern.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return govern.Time{Time: v.UTC()}
	}
	tests := []struct {
		name  string
		doc   string
		check func(*govern.Envelope) any // returns what to compare with want
		want  any
	}{
		{"fixture version 0.2", decWith(t, e, "uaicp_version", `"0.2"`), func(x *govern.Envelope) any { return x.UAICPVersion }, "0.2"},
		{"empty version", decWith(t, e, "uaicp_version", `""`), func(x *govern.Envelope) any { return x.UAICPVersion }, ""},
		{"upper-case UUID", decWith(t, e, "request_id", `"F47AC10B-58CC-4372-A567-0E02B2C3D479"`), func(x *govern.Envelope) any { return x.RequestID }, "F47AC10B-58CC-4372-A567-0E02B2C3D479"},
		{"lower-case t and z", decWith(t, e, "timestamp", `"2026-01-01t10:20:30z"`), func(x *govern.Envelope) any { return x.Timestamp }, utc("2026-01-01T10:20:30Z")},
		{"offset, in UTC", decWith(t, e, "timestamp", `"2026-01-01T05:30:00+05:30"`), func(x *govern.Envelope) any {
			return x.Timestamp.Location() == time.UTC && x.Timestamp.Equal(utc("2026-01-01T00:00:00Z").Time)
		}, true},
		{"nanoseconds kept", decWith(t, e, "timestamp", `"2026-01-01T00:00:00.123456789Z"`), func(x *govern.Envelope) any { return x.Timestamp.Nanosecond() }, 123456789},
		{"year 0000", decWith(t, e, "timestamp", `"0000-01-01T00:00:00Z"`), func(x *govern.Envelope) any { return x.Timestamp.Year() }, 0},
		{"stream_index 3.0", decWith(t, e, "streaming", `{"stream_index":3.0}`), func(x *govern.Envelope) any { return *x.Streaming }, govern.Streaming{StreamIndex: 3}},
		{"stream_index 0.3e1", decWith(t, e, "streaming", `{"stream_index":0.3e1}`), func(x *govern.Envelope) any { return x.Streaming.StreamIndex }, 3},
		{"stream_index -0", decWith(t, e, "streaming", `{"stream_index":-0}`), func(x *govern.Envelope) any { return x.Streaming.StreamIndex }, 0},
		{"stream_index 0e999999999999999999", decWith(t, e, "streaming", `{"stream_index":0e999999999999999999}`), func(x *govern.Envelope) any { return x.Streaming.StreamIndex }, 0},
		{"stream_index 1e2", decWith(t, e, "streaming", `{"stream_index":1E+2}`), func(x *govern.Envelope) any { return x.Streaming.StreamIndex }, 100},
		{"stream_index min int64", decWith(t, e, "streaming", `{"stream_index":-9223372036854775808}`), func(x *govern.Envelope) any { return int64(x.Streaming.StreamIndex) }, int64(-9223372036854775808)},
		{"streaming extension dropped", decWith(t, e, "streaming", `{"chunk_id":"c","is_final":true,"stream_index":2,"acme.x":1}`), func(x *govern.Envelope) any { return *x.Streaming }, govern.Streaming{ChunkID: "c", IsFinal: true, StreamIndex: 2}},
		{"rollback payload string", decWith(t, e, "rollback_action", `{"type":"t","target":"x","payload":"p"}`), func(x *govern.Envelope) any { return *x.Rollback }, govern.RollbackAction{Type: "t", Target: "x", Payload: "p"}},
		{"rollback payload object", decWith(t, e, "rollback_action", `{"type":"t","payload":{"n":1,"l":[true,null]}}`), func(x *govern.Envelope) any { return x.Rollback.Payload }, map[string]any{"n": 1.0, "l": []any{true, nil}}},
		{"rollback without members", decWith(t, e, "rollback_action", `{}`), func(x *govern.Envelope) any { return *x.Rollback }, govern.RollbackAction{}},
		{"identity extensions", decWith(t, e, "identity", `{"agent_id":"a","owner_id":"o","user_id":"u","control_class":"human-directed","acme.team":"x","Agent_ID":"b"}`),
			func(x *govern.Envelope) any { return x.Identity },
			govern.Identity{AgentID: "a", OwnerID: "o", UserID: "u", ControlClass: govern.HumanDirected, Extra: map[string]any{"acme.team": "x", "Agent_ID": "b"}}},
		{"metadata", decWith(t, e, "metadata", `{"uaicp.reasons":["EVIDENCE_MISSING"],"n":12345678901234567890}`), func(x *govern.Envelope) any { return x.Metadata },
			map[string]any{"uaicp.reasons": []any{"EVIDENCE_MISSING"}, "n": 12345678901234567890.0}},
		{"empty metadata is nil", decWith(t, e, "metadata", `{}`), func(x *govern.Envelope) any { return x.Metadata == nil }, true},
		{"surrounding whitespace", " \n\t" + e + "\r\n ", func(x *govern.Envelope) any { return x.State }, govern.Execute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := govern.DecodeEnvelope([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tt.check(x)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err := uaicpschema.ValidateEnvelope([]byte(tt.doc)); err != nil {
				t.Errorf("the schema refuses what the decoder accepts: %v", err)
			}
			checkRoundTrip(t, x, govern.DecodeEnvelope, uaicpschema.ValidateEnvelope)
		})
	}
}

// TestDecodeCaseSensitiveMemberNames pins the choice the decoders make
// where encoding/json would not: member names match exactly.
func TestDecodeCaseSensitiveMemberNames(t *testing.T) {
	var lax govern.Envelope
	doc := strings.Replace(decEnvelope, `"trace_id"`, `"Trace_ID"`, 1)
	if err := json.Unmarshal([]byte(doc), &lax); err != nil || lax.TraceID == "" {
		t.Fatalf("encoding/json: %v %q (this test assumes it matches names case-insensitively)", err, lax.TraceID)
	}
	if _, err := govern.DecodeEnvelope([]byte(doc)); err == nil {
		t.Error("DecodeEnvelope accepted Trace_ID for trace_id")
	}
	ev := decWith(t, decWith(t, decEvidence, "source", ""), "Source", `"tool:x"`)
	if _, err := govern.DecodeEvidence([]byte(ev)); err == nil || !strings.Contains(err.Error(), `/source: required member is missing (there is "Source"`) {
		t.Errorf("DecodeEvidence with Source: %v", err)
	}
	// Both spellings: the exact one is the member, the other an extension.
	ev = decWith(t, decWith(t, decEvidence, "hash", `"sha256:good"`), "HASH", `"sha256:evil"`)
	x, err := govern.DecodeEvidence([]byte(ev))
	if err != nil {
		t.Fatal(err)
	}
	if x.Hash != "sha256:good" || x.Extra["HASH"] != "sha256:evil" {
		t.Errorf("Hash %q, Extra %v", x.Hash, x.Extra)
	}
	rep := decWith(t, decReport, "checks", `[{"Check_ID":"c","result":"pass"}]`)
	if _, err := govern.DecodeReport([]byte(rep)); err == nil || !strings.Contains(err.Error(), "/checks/0/check_id") {
		t.Errorf("DecodeReport with Check_ID: %v", err)
	}
}

func TestDecodeEvidenceRefuses(t *testing.T) {
	e := decEvidence
	cases := []decodeCase{
		{"missing evidence_id", decWith(t, e, "evidence_id", ""), "/evidence_id", "required member is missing"},
		{"evidence_id empty", decWith(t, e, "evidence_id", `""`), "/evidence_id", "must not be empty"},
		{"missing evidence_type", decWith(t, e, "evidence_type", ""), "/evidence_type", "required member is missing"},
		{"evidence_type unknown", decWith(t, e, "evidence_type", `"screenshot"`), "/evidence_type", "is not one of tool_result, source_citation, test_report, approval_token, custom"},
		{"missing source", decWith(t, e, "source", ""), "/source", "required member is missing"},
		{"source empty", decWith(t, e, "source", `""`), "/source", "must not be empty"},
		{"request_id not-a-uuid", decWith(t, e, "request_id", `"not-a-uuid"`), "/request_id", "is not a UUID"},
		{"request_id empty", decWith(t, e, "request_id", `""`), "/request_id", "is not a UUID"},
		{"trace_id empty", decWith(t, e, "trace_id", `""`), "/trace_id", "must not be empty"},
		{"parent_trace_id empty", decWith(t, e, "parent_trace_id", `""`), "/parent_trace_id", "must not be empty"},
		{"actor a number", decWith(t, e, "actor", `7`), "/actor", "must be a string"},
		{"missing hash", decWith(t, e, "hash", ""), "/hash", "required member is missing"},
		{"hash null", decWith(t, e, "hash", `null`), "/hash", "must be a string, not null"},
		{"missing collected_at", decWith(t, e, "collected_at", ""), "/collected_at", "required member is missing"},
		{"collected_at yesterday", decWith(t, e, "collected_at", `"yesterday"`), "/collected_at", "not an RFC 3339 date-time"},
		{"duplicate in payload", decWith(t, e, "payload", `{"a":{"b":1,"b":1}}`), "/payload/a/b", "duplicate member"},
		{"extension beyond float64", decWith(t, e, "acme.n", `1e400`), "/acme.n", "cannot be represented"},
		{"not an object", `"ev-1"`, "", "must be an object, not a string"},
	}
	runDecodeCases(t, govern.DecodeEvidence, uaicpschema.ValidateEvidence, cases, "duplicate in payload", "extension beyond float64")
}

func TestDecodeEvidenceAccepts(t *testing.T) {
	e := decEvidence
	tests := []struct {
		name    string
		doc     string
		payload string // want Payload ("" for none)
		extra   map[string]any
	}{
		{"no payload", e, "", nil},
		{"null payload", decWith(t, e, "payload", `null`), `null`, nil},
		{"object payload compacted", decWith(t, e, "payload", "{ \"b\" : [1, 2.50, 1e400],\n \"a\": 12345678901234567890 }"), `{"b":[1,2.50,1e400],"a":12345678901234567890}`, nil},
		{"string payload escaped as encoding/json does", decWith(t, e, "payload", `"<a href=\"x\">&</a>"`), `"\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e"`, nil},
		{"array payload", decWith(t, e, "payload", `[true,false,null,"s",{}]`), `[true,false,null,"s",{}]`, nil},
		{"number payload", decWith(t, e, "payload", `-0.5e-3`), `-0.5e-3`, nil},
		{"extensions", decWith(t, decWith(t, e, "acme.region", `"eu"`), "acme.n", `2`), "", map[string]any{"acme.region": "eu", "acme.n": 2.0}},
		{"empty hash and actor", decWith(t, decWith(t, e, "hash", `""`), "actor", `""`), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := govern.DecodeEvidence([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if string(x.Payload) != tt.payload {
				t.Errorf("Payload = %s, want %s", x.Payload, tt.payload)
			}
			if tt.payload == "" && x.Payload != nil {
				t.Errorf("Payload = %q, want nil", x.Payload)
			}
			if diff := cmp.Diff(tt.extra, x.Extra); diff != "" {
				t.Errorf("Extra (-want +got):\n%s", diff)
			}
			if err := uaicpschema.ValidateEvidence([]byte(tt.doc)); err != nil {
				t.Errorf("the schema refuses what the decoder accepts: %v", err)
			}
			checkRoundTrip(t, x, govern.DecodeEvidence, uaicpschema.ValidateEvidence)
		})
	}
}

func TestDecodeReportRefuses(t *testing.T) {
	r := decReport
	cases := []decodeCase{
		{"missing report_id", decWith(t, r, "report_id", ""), "/report_id", "required member is missing"},
		{"report_id empty", decWith(t, r, "report_id", `""`), "/report_id", "must not be empty"},
		{"missing request_id", decWith(t, r, "request_id", ""), "/request_id", "required member is missing"},
		{"request_id not-a-uuid", decWith(t, r, "request_id", `"not-a-uuid"`), "/request_id", "is not a UUID"},
		{"verifier_id empty", decWith(t, r, "verifier_id", `""`), "/verifier_id", "must not be empty"},
		{"evidence_ids a string", decWith(t, r, "evidence_ids", `"ev-1"`), "/evidence_ids", "must be an array, not a string"},
		{"evidence_ids of numbers", decWith(t, r, "evidence_ids", `["ev-1",2]`), "/evidence_ids/1", "must be a string, not a number"},
		{"missing status", decWith(t, r, "status", ""), "/status", "required member is missing"},
		{"status unknown", decWith(t, r, "status", `"ok"`), "/status", "is not one of pass, fail, partial"},
		{"missing checks", decWith(t, r, "checks", ""), "/checks", "required member is missing"},
		{"checks null", decWith(t, r, "checks", `null`), "/checks", "must be an array, not null"},
		{"checks an object", decWith(t, r, "checks", `{"check_id":"c","result":"pass"}`), "/checks", "must be an array, not an object"},
		{"check a string", decWith(t, r, "checks", `["c"]`), "/checks/0", "must be an object, not a string"},
		{"check without check_id", decWith(t, r, "checks", `[{"check_id":"a","result":"pass"},{"result":"pass"}]`), "/checks/1/check_id", "required member is missing"},
		{"check_id empty", decWith(t, r, "checks", `[{"check_id":"","result":"pass"}]`), "/checks/0/check_id", "must not be empty"},
		{"check without result", decWith(t, r, "checks", `[{"check_id":"c"}]`), "/checks/0/result", "required member is missing"},
		{"check result unknown", decWith(t, r, "checks", `[{"check_id":"c","result":"maybe"}]`), "/checks/0/result", "is not one of pass, fail, skip"},
		{"check details a number", decWith(t, r, "checks", `[{"check_id":"c","result":"pass","details":1}]`), "/checks/0/details", "must be a string"},
		{"missing generated_at", decWith(t, r, "generated_at", ""), "/generated_at", "required member is missing"},
		{"generated_at yesterday", decWith(t, r, "generated_at", `"yesterday"`), "/generated_at", "not an RFC 3339 date-time"},
		{"duplicate in a check", decWith(t, r, "checks", `[{"check_id":"c","result":"pass","result":"fail"}]`), "/checks/0/result", "duplicate member"},
	}
	runDecodeCases(t, govern.DecodeReport, uaicpschema.ValidateReport, cases, "duplicate in a check")
}

func TestDecodeReportAccepts(t *testing.T) {
	doc := decWith(t, decWith(t, decWith(t, decReport, "evidence_ids", `[]`), "verifier_id", `"v"`), "acme.duration_ms", `12`)
	doc = decWith(t, doc, "checks", `[{"check_id":"a","result":"pass","details":"ok","acme.weight":1},{"check_id":"b","result":"skip"}]`)
	x, err := govern.DecodeReport([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := &govern.Report{
		ReportID: "vr-1", RequestID: "f47ac10b-58cc-4372-a567-0e02b2c3d479", VerifierID: "v", Status: govern.ReportPass,
		Checks:      []govern.Check{{CheckID: "a", Result: govern.CheckPass, Details: "ok"}, {CheckID: "b", Result: govern.CheckSkip}},
		GeneratedAt: govern.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		Extra:       map[string]any{"acme.duration_ms": 12.0},
	}
	if diff := cmp.Diff(want, x); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkRoundTrip(t, x, govern.DecodeReport, uaicpschema.ValidateReport)

	x, err = govern.DecodeReport([]byte(decWith(t, decReport, "checks", `[]`)))
	if err != nil {
		t.Fatal(err)
	}
	if x.Checks == nil || len(x.Checks) != 0 || x.EvidenceIDs != nil {
		t.Errorf("Checks %#v, EvidenceIDs %#v; want empty non-nil, nil", x.Checks, x.EvidenceIDs)
	}
	checkRoundTrip(t, x, govern.DecodeReport, uaicpschema.ValidateReport)
}

func TestDecodeErrorText(t *testing.T) {
	for _, tt := range []struct {
		err  *govern.DecodeError
		want string
	}{
		{&govern.DecodeError{Message: "not a JSON document: x"}, "govern: decode: not a JSON document: x"},
		{&govern.DecodeError{Path: "/identity/agent_id", Message: "must not be empty"}, "govern: decode: /identity/agent_id: must not be empty"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestUnmarshalJSONExactMemberNames checks the trusted path (the
// UnmarshalJSON methods) against a case variant of a member name: the
// exact member sets the field, the variant stays an extension.
func TestUnmarshalJSONExactMemberNames(t *testing.T) {
	doc := decWith(t, decWith(t, decEvidence, "hash", `"sha256:good"`), "HASH", `"sha256:evil"`)
	var ev govern.Evidence
	if err := json.Unmarshal([]byte(doc), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Hash != "sha256:good" || ev.Extra["HASH"] != "sha256:evil" {
		t.Errorf("Hash %q, Extra %v", ev.Hash, ev.Extra)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"hash":"sha256:good"`) || !strings.Contains(string(b), `"HASH":"sha256:evil"`) {
		t.Errorf("re-encoded as %s", b)
	}
}

// TestTimeUnmarshalJSONIsRFC3339 checks the trusted path's date-times:
// RFC 3339 exactly (time.Parse alone accepts "+24:00" and ",5").
func TestTimeUnmarshalJSONIsRFC3339(t *testing.T) {
	for _, s := range []string{"2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00,5Z", "2026-01-01T00:00:00+00:60", "yesterday"} {
		var v govern.Time
		if err := json.Unmarshal([]byte(`"`+s+`"`), &v); err == nil {
			t.Errorf("%s accepted as %v", s, v)
		}
	}
	var v govern.Time
	if err := json.Unmarshal([]byte(`"2026-01-01t01:00:00+01:00"`), &v); err != nil || !v.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) || v.Location() != time.UTC {
		t.Errorf("got %v, %v", v, err)
	}
}

// truncateTimes returns a copy of x with its date-times cut to the
// millisecond, the precision of the wire form.
func truncateTimes(x any) any {
	cut := func(t govern.Time) govern.Time {
		return govern.Time{Time: t.Add(-time.Duration(t.Nanosecond() % int(time.Millisecond)))}
	}
	switch v := x.(type) {
	case *govern.Envelope:
		c := *v
		c.Timestamp = cut(c.Timestamp)
		return &c
	case *govern.Evidence:
		c := *v
		c.CollectedAt = cut(c.CollectedAt)
		return &c
	case *govern.Report:
		c := *v
		c.GeneratedAt = cut(c.GeneratedAt)
		return &c
	}
	panic(fmt.Sprintf("truncateTimes: %T", x))
}

// checkRoundTrip checks the properties of a decoded object x: encoded with
// encoding/json it validates against the schema, decodes to x (date-times
// at millisecond precision), and encodes again to the same bytes.
func checkRoundTrip[T any](t testing.TB, x *T, decode func([]byte) (*T, error), validate func([]byte) error) {
	t.Helper()
	enc, err := json.Marshal(x)
	if err != nil {
		t.Fatalf("encoding %+v: %v", x, err)
	}
	if err := validate(enc); err != nil {
		t.Fatalf("re-encoded object does not validate: %v\n%s", err, enc)
	}
	y, err := decode(enc)
	if err != nil {
		t.Fatalf("decoder refuses its own encoding: %v\n%s", err, enc)
	}
	if diff := cmp.Diff(truncateTimes(x), y); diff != "" {
		t.Fatalf("decode(encode(x)) differs from x (-x +decoded):\n%s\n%s", diff, enc)
	}
	again, err := json.Marshal(y)
	if err != nil || string(again) != string(enc) {
		t.Fatalf("encoding is not stable: %v\n%s\n%s", err, enc, again)
	}
}

func ExampleDecodeEnvelope() {
	env, err := govern.DecodeEnvelope([]byte(`{
		"uaicp_version": "0.3",
		"request_id": "f47ac10b-58cc-4372-a567-0e02b2c3d479",
		"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
		"state": "fail_safe",
		"timestamp": "2026-01-01T00:00:00.000Z",
		"identity": {"agent_id": "agent:a", "owner_id": "org:o", "control_class": "autonomous"},
		"outcome": "uncertain",
		"metadata": {"uaicp.reasons": ["EVIDENCE_MISSING"]}
	}`))
	fmt.Println(env.State, env.Outcome, env.Metadata["uaicp.reasons"], err)

	_, err = govern.DecodeEnvelope([]byte(`{"uaicp_version": "0.3", "Request_ID": "f47ac10b-58cc-4372-a567-0e02b2c3d479"}`))
	fmt.Println(err)
	// Output:
	// fail_safe uncertain [EVIDENCE_MISSING] <nil>
	// govern: decode: /Request_ID: unknown member (the schema allows no other members; member names are case-sensitive: did you mean "request_id"?)
}
