package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/google/go-cmp/cmp"
)

// minimal is a valid envelope with only the required members.
const minimal = `{"id":"urn:uuid:11111111-1111-4111-8111-111111111111","ts":"2025-07-10T10:00:00Z","from":"did:web:client","to":["did:web:calc"],"intent":"ask","body":{"type":"text/plain","content":"2+2"},"sig":"x..y"}`

// with returns minimal with member name set to the JSON text v (added
// at the end when absent).
func with(t *testing.T, name, v string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(minimal), &m); err != nil {
		t.Fatal(err)
	}
	m[name] = json.RawMessage(v)
	return string(mustJSON(t, m))
}

// TestUAMP_4_StrictDecoding pins what Decode refuses beyond the schema,
// and what it accepts: each case with the code it answers.
func TestUAMP_4_StrictDecoding(t *testing.T) {
	ok := envelope.Code("")
	cases := []struct {
		name string
		in   string
		want envelope.Code
	}{
		{"minimal", minimal, ok},
		{"bare uuid id", strings.Replace(minimal, "urn:uuid:", "", 1), ok},
		{"upper-case URN and hex", strings.Replace(minimal, "urn:uuid:1111", "URN:UUID:ABCD", 1), ok},
		{"lower-case t and z", strings.Replace(minimal, "2025-07-10T10:00:00Z", "2025-07-10t10:00:00z", 1), ok},
		{"offset and fraction", strings.Replace(minimal, "2025-07-10T10:00:00Z", "2025-07-10T12:00:00.123456789+02:00", 1), ok},
		{"surrogate pair", with(t, "ext", `{"smile":"\ud83d\ude00"}`), ok},
		{"integer 2^53", with(t, "ext", `{"n":9007199254740992}`), ok},
		{"integer -2^53", with(t, "ext", `{"n":-9007199254740992}`), ok},
		{"fraction below 2^53", with(t, "ext", `{"n":9007199254740991.5}`), ok},
		{"fraction beyond 2^53", with(t, "ext", `{"n":9007199254740993.5}`), envelope.CodeBadRequest},
		{"fraction just beyond 2^53", with(t, "ext", `{"n":9007199254740992.001}`), envelope.CodeBadRequest},
		{"1e300", with(t, "ext", `{"n":1.5e300}`), envelope.CodeBadRequest},
		{"tiny number", with(t, "ext", `{"n":1e-400}`), ok},
		{"delta_window 1.0", with(t, "delta_window", `1.0`), ok},
		{"empty ext and context", with(t, "ext", `{}`), ok},
		{"whitespace around", " \n" + minimal + "\r\n\t", ok},

		{"not JSON", `{"id":`, envelope.CodeBadRequest},
		{"two values", minimal + minimal, envelope.CodeBadRequest},
		{"array", `[` + minimal + `]`, envelope.CodeBadRequest},
		{"BOM", "\ufeff" + minimal, envelope.CodeBadRequest},
		{"invalid UTF-8", strings.Replace(minimal, "2+2", "2\xff2", 1), envelope.CodeBadRequest},
		{"overlong UTF-8", strings.Replace(minimal, "2+2", "\xc0\xaf", 1), envelope.CodeBadRequest},
		{"lone high surrogate", strings.Replace(minimal, "2+2", `\ud800`, 1), envelope.CodeBadRequest},
		{"lone low surrogate", strings.Replace(minimal, "2+2", `\udc00x`, 1), envelope.CodeBadRequest},
		{"high surrogate then letter", strings.Replace(minimal, "2+2", `\ud800\u0041`, 1), envelope.CodeBadRequest},
		{"reversed pair", strings.Replace(minimal, "2+2", `\ude00\ud83d`, 1), envelope.CodeBadRequest},
		{"lone surrogate in a member name", with(t, "ext", `{"\udfff":1}`), envelope.CodeBadRequest},
		{"duplicate top-level member", strings.Replace(minimal, `"intent":"ask"`, `"intent":"ask","intent":"inform"`, 1), envelope.CodeBadRequest},
		{"duplicate escaped member", strings.Replace(minimal, `"intent":"ask"`, `"intent":"ask","\u0069ntent":"ask"`, 1), envelope.CodeBadRequest},
		{"duplicate body.content", strings.Replace(minimal, `"content":"2+2"`, `"content":"2+2","content":"2+3"`, 1), envelope.CodeBadRequest},
		{"duplicate deep in ext", with(t, "ext", `{"a":[{"b":1,"c":{"d":1,"d":2}}]}`), envelope.CodeBadRequest},
		{"integer 2^53+1", with(t, "ext", `{"n":9007199254740993}`), envelope.CodeBadRequest},
		{"integer -2^53-1", with(t, "ext", `{"n":-9007199254740993}`), envelope.CodeBadRequest},
		{"integer 1e16", with(t, "ext", `{"n":1e16}`), envelope.CodeBadRequest},
		{"integer in fraction notation", with(t, "ext", `{"n":9007199254740993.0}`), envelope.CodeBadRequest},
		{"huge number", with(t, "ext", `{"n":1e400}`), envelope.CodeBadRequest},
		{"huge exponent", with(t, "ext", `{"n":1e99999999999999999999}`), envelope.CodeBadRequest},
		{"huge delta_window", with(t, "delta_window", `18446744073709551616`), envelope.CodeBadRequest},
		{"deep nesting", with(t, "ext", `{"a":`+strings.Repeat("[", 40)+strings.Repeat("]", 40)+`}`), envelope.CodeBadRequest},
		{"unknown member", with(t, "priority", `1`), envelope.CodeBadRequest},
		{"member in other case", strings.Replace(minimal, `"intent"`, `"Intent"`, 1), envelope.CodeBadRequest},
		// §6.3: a sig that is absent, empty or not a string is a missing
		// signature (4.01) once the rest is well formed, a malformed
		// envelope (4.00) otherwise.
		{"missing sig", strings.Replace(minimal, `,"sig":"x..y"`, ``, 1), envelope.CodeUnauthenticated},
		{"sig not a string", with(t, "sig", `{"alg":"none"}`), envelope.CodeUnauthenticated},
		{"sig null", with(t, "sig", `null`), envelope.CodeUnauthenticated},
		{"missing sig, missing id", strings.Replace(strings.Replace(minimal, `,"sig":"x..y"`, ``, 1), `"id":"urn:uuid:11111111-1111-4111-8111-111111111111",`, ``, 1), envelope.CodeBadRequest},
		{"missing sig, empty stream_id", strings.Replace(with(t, "stream_id", `""`), `,"sig":"x..y"`, ``, 1), envelope.CodeBadRequest},
		{"missing sig, lone surrogate", strings.Replace(strings.Replace(minimal, `,"sig":"x..y"`, ``, 1), "2+2", `\ud800`, 1), envelope.CodeBadRequest},
		{"empty optional string", with(t, "stream_id", `""`), envelope.CodeBadRequest},
		{"empty sig", with(t, "sig", `""`), envelope.CodeUnauthenticated},
		{"empty body.encoding", strings.Replace(minimal, `"content":"2+2"`, `"content":"2+2","encoding":""`, 1), envelope.CodeBadRequest},
		{"id not a uuid", strings.Replace(minimal, "11111111-1111-4111-8111-111111111111", "1111", 1), envelope.CodeBadRequest},
		{"id with braces", strings.Replace(minimal, "urn:uuid:11111111-1111-4111-8111-111111111111", "{11111111-1111-4111-8111-111111111111}", 1), envelope.CodeBadRequest},
		{"ts not a date-time", strings.Replace(minimal, "2025-07-10T10:00:00Z", "…", 1), envelope.CodeBadRequest},
		{"ts leap second", strings.Replace(minimal, "2025-07-10T10:00:00Z", "2016-12-31T23:59:60Z", 1), envelope.CodeBadRequest},
		{"from not a URI", strings.Replace(minimal, `"from":"did:web:client"`, `"from":"client"`, 1), envelope.CodeBadRequest},
		{"to empty", strings.Replace(minimal, `["did:web:calc"]`, `[]`, 1), envelope.CodeBadRequest},
		{"unknown intent", strings.Replace(minimal, `"ask"`, `"order"`, 1), envelope.CodeBadRequest},
		{"delta_window 0", with(t, "delta_window", `0`), envelope.CodeBadRequest},
		{"delta_window 1.5", with(t, "delta_window", `1.5`), envelope.CodeBadRequest},
		{"context hash upper case", with(t, "context", `[{"id":"11111111-1111-4111-8111-111111111111","hash":"sha256:`+strings.Repeat("A", 64)+`"}]`), envelope.CodeBadRequest},
		{"body without content", strings.Replace(minimal, `,"content":"2+2"`, ``, 1), envelope.CodeBadRequest},
		{"ext not an object", with(t, "ext", `[]`), envelope.CodeBadRequest},
		{"too large", with(t, "ext", `{"pad":"`+strings.Repeat("x", envelope.MaxEnvelopeSize)+`"}`), envelope.CodePayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := envelope.Decode([]byte(c.in))
			if c.want == ok {
				if err != nil {
					t.Fatal(err)
				}
				// What Decode accepts, the schema accepts.
				if err := envelope.ValidateEnvelope([]byte(c.in)); err != nil && !strings.Contains(c.in, "\ufeff") {
					t.Errorf("schema: %v", err)
				}
				checkRoundTrip(t, []byte(c.in), e)
				return
			}
			if e != nil {
				t.Errorf("decoded %+v along with an error", e)
			}
			wantCode(t, err, c.want)
		})
	}
}

// checkRoundTrip checks that a decoded envelope encodes to the same
// canonical form as the bytes it was decoded from, and decodes again
// to itself.
func checkRoundTrip(t *testing.T, in []byte, e *envelope.Envelope) {
	t.Helper()
	var doc map[string]any
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "sig")
	want, err := canonicalOf(mustJSON(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonical form of the decoded envelope\n got %s\nwant %s", got, want)
	}
	again, err := envelope.Decode(mustJSON(t, e))
	if err != nil {
		t.Fatalf("re-encoded envelope does not decode: %v", err)
	}
	if diff := cmp.Diff(e, again); diff != "" {
		t.Fatalf("decode(encode(e)) != e (-e +again):\n%s", diff)
	}
}

// TestUAMP_4_IDs checks the two accepted id forms, the emitted one and
// their shared normal form.
func TestUAMP_4_IDs(t *testing.T) {
	id := envelope.NewID()
	bare, ok := envelope.ParseID(id)
	if !strings.HasPrefix(id, "urn:uuid:") || !ok || "urn:uuid:"+bare != id {
		t.Fatalf("NewID %q (bare %q, %v)", id, bare, ok)
	}
	for _, s := range []string{"6F1C2A4E-8D3B-4C1A-9E2F-0A1B2C3D4E5F", "urn:uuid:6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f", "Urn:Uuid:6f1C2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f"} {
		if got, ok := envelope.ParseID(s); !ok || got != "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f" {
			t.Errorf("ParseID(%q) = %q, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "urn:uuid:", "1111", "urn:uuid:1111", "6f1c2a4e8d3b4c1a9e2f0a1b2c3d4e5f", "{6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f}",
		"urn:uuid:urn:uuid:6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f", "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5g", "uuid:6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f"} {
		if got, ok := envelope.ParseID(s); ok {
			t.Errorf("ParseID(%q) = %q, accepted", s, got)
		}
	}
}

// TestUAMP_5_DeltaDecoding pins the delta decoder.
func TestUAMP_5_DeltaDecoding(t *testing.T) {
	const good = `{"delta_seq":17,"stream_id":"str-42","ts":"2025-07-10T13:38:01Z","type":"chunk","payload":{"text":"ab","n":[1,2.5]}}`
	d, err := envelope.DecodeDelta([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := &envelope.Delta{Seq: 17, StreamID: "str-42", TS: "2025-07-10T13:38:01Z", Type: envelope.DeltaChunk, Payload: json.RawMessage(`{"n":[1,2.5],"text":"ab"}`)}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if d, err := envelope.DecodeDelta([]byte(`{"delta_seq":9007199254740992,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`)); err != nil || d.Seq != 1<<53 || d.Payload != nil {
		t.Errorf("max seq, no payload: %+v, %v", d, err)
	}
	for name, in := range map[string]string{
		"negative seq":    `{"delta_seq":-1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
		"seq beyond 2^53": `{"delta_seq":9007199254740993,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
		"fractional seq":  `{"delta_seq":1.5,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
		"missing seq":     `{"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
		"missing ts":      `{"delta_seq":0,"stream_id":"s","type":"done"}`,
		"unknown type":    `{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"ack"}`,
		"payload array":   `{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":[]}`,
		"unknown member":  `{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","ack":1}`,
		"duplicate seq":   `{"delta_seq":0,"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
		"lone surrogate":  `{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"chunk","payload":{"t":"\udbff"}}`,
		"big int payload": `{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"chunk","payload":{"n":12345678901234567890}}`,
	} {
		_, err := envelope.DecodeDelta([]byte(in))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		wantCode(t, err, envelope.CodeBadRequest)
	}
	_, err = envelope.DecodeDelta([]byte(`{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"chunk","payload":{"p":"` + strings.Repeat("x", envelope.MaxDeltaSize) + `"}}`))
	wantCode(t, err, envelope.CodePayloadTooLarge)
}

// TestUAMP_8_ManifestDecoding pins the manifest decoder on the corrected
// schema.
func TestUAMP_8_ManifestDecoding(t *testing.T) {
	const good = `{"agent":"uamp/1.0","description":"calculator","intents":["ask","cancel"],"body_types":["text/plain"],"auth":["mtls","oauth2"],"limits":{"max_body_kb":256,"rate_lph":3600}}`
	m, err := envelope.DecodeManifest([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := &envelope.Manifest{Agent: "uamp/1.0", Description: "calculator", Intents: []string{"ask", "cancel"}, BodyTypes: []string{"text/plain"},
		Auth: []string{"mtls", "oauth2"}, Limits: envelope.Limits{MaxBodyKB: 256, RateLPH: 3600}}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, in := range map[string]string{
		"agent uamp/2.0": strings.Replace(good, "uamp/1.0", "uamp/2.0", 1),
		"agent uamp/1x0": strings.Replace(good, "uamp/1.0", "uamp/1x0", 1),
		"auth basic":     strings.Replace(good, `"mtls"`, `"basic"`, 1),
		"unknown limit":  strings.Replace(good, `"rate_lph"`, `"rate_lps"`, 1),
		"unknown member": strings.Replace(good, `"auth"`, `"keys":[],"auth"`, 1),
		"missing limits": strings.Replace(good, `,"limits":{"max_body_kb":256,"rate_lph":3600}`, ``, 1),
		"fractional max": strings.Replace(good, `256`, `2.5`, 1),
	} {
		_, err := envelope.DecodeManifest([]byte(in))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		wantCode(t, err, envelope.CodeBadRequest)
	}
}

// TestUAMP_A_Schemas: the published manifest schema (A.3) is not JSON;
// the embedded copy differs from it by exactly the one escape, and the
// envelope and delta schemas are embedded verbatim (schemas/SOURCES.txt).
func TestUAMP_A_Schemas(t *testing.T) {
	published := `"pattern": "^uamp/1\.[0-9]+$"`
	corrected := `"pattern": "^uamp/1\\.[0-9]+$"`
	var v any
	if err := json.Unmarshal([]byte(`{`+published+`}`), &v); err == nil {
		t.Error("the published pattern parses as JSON")
	}
	b, err := os.ReadFile(filepath.Join("schemas", "manifest-1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(corrected)) || bytes.Count(b, []byte(`\`)) != 2 {
		t.Errorf("the embedded manifest schema does not carry exactly the corrected escape")
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	// The schemas compile (the validators run) and assert formats.
	if err := envelope.ValidateEnvelope([]byte(minimal)); err != nil {
		t.Error(err)
	}
	var ve *envelope.ValidationError
	err = envelope.ValidateEnvelope([]byte(strings.Replace(minimal, "2025-07-10T10:00:00Z", "yesterday", 1)))
	if !errors.As(err, &ve) || len(ve.Failures) != 1 || ve.Failures[0].Path != "/ts" || ve.Failures[0].Keyword != "/properties/ts/format" {
		t.Errorf("format not asserted: %v", err)
	}
	if err := envelope.ValidateManifest([]byte(`{"agent":"uamp/1.10","description":"","intents":[],"body_types":[],"auth":[],"limits":{}}`)); err != nil {
		t.Error(err)
	}
	if err := envelope.ValidateDelta([]byte(`{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T10:00:00Z","type":"done"}`)); err != nil {
		t.Error(err)
	}
}

// TestUAMP_4_WireFormat pins the spec's member names with golden files:
// a signed envelope (EdDSA is deterministic) with every member, a delta,
// a manifest, an error envelope and a public JWK set.
func TestUAMP_4_WireFormat(t *testing.T) {
	e, k := signed(t)
	got := goldenFile(t, "envelope.json", mustJSON(t, e))
	if _, err := envelope.Open(ctx, got, keySet(t, k)); err != nil {
		t.Errorf("the golden envelope does not verify: %v", err)
	}
	d := envelope.Delta{Seq: 17, StreamID: "str-42", TS: "2025-07-10T13:38:01.000Z", Type: envelope.DeltaChunk, Payload: json.RawMessage(`{"text":"sheep"}`)}
	if _, err := envelope.DecodeDelta(goldenFile(t, "delta.json", mustJSON(t, d))); err != nil {
		t.Error(err)
	}
	m := envelope.Manifest{Agent: "uamp/1.0", Description: "Draws sheep.", Intents: []string{"ask", "cancel"}, BodyTypes: []string{"text/markdown"},
		Auth: []string{"mtls"}, Limits: envelope.Limits{MaxBodyKB: 1024, RateLPH: 3600}}
	if _, err := envelope.DecodeManifest(goldenFile(t, "manifest.json", mustJSON(t, m))); err != nil {
		t.Error(err)
	}
	empty := envelope.Manifest{Agent: "uamp/1.0"}
	if _, err := envelope.DecodeManifest(mustJSON(t, empty)); err != nil {
		t.Errorf("a manifest with nil lists: %v", err)
	}
	ee := envelope.NewErrorEnvelope("did:web:worker.example", []string{sampleFrom}, e.ID, envelope.NewError(envelope.CodeBusy, "", nil))
	ee.ID, ee.TS = "urn:uuid:00000000-0000-4000-8000-000000000001", "2025-07-10T13:37:06.000Z"
	if err := envelope.Sign(ee, edKey(t, "did:web:worker.example#key-1")); err != nil {
		t.Fatal(err)
	}
	back, err := envelope.Decode(goldenFile(t, "error-envelope.json", mustJSON(t, ee)))
	if err != nil {
		t.Fatal(err)
	}
	if werr, err := envelope.ParseErrorBody(back.Body); err != nil || werr.Code != envelope.CodeBusy || !werr.Retry {
		t.Errorf("error body: %+v, %v", werr, err)
	}
	goldenFile(t, "jwks.json", mustJSON(t, keySet(t, k)))
}

// TestUAMP_4_StringEncoding: the encoder writes every Go string as a
// JSON string with the value encoding/json gives it (invalid UTF-8 as
// U+FFFD), so that the wire form and the canonical form agree.
func TestUAMP_4_StringEncoding(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " backslash \ slash /`, "\x00\x01\x1f\x7f", "\n\r\t\b\f", "<>&", "\u2028\u2029",
		"é€😀", "bad \xff utf8 \xc0\xaf", "\xed\xa0\x80 surrogate bytes", strings.Repeat("x", 300)} {
		e := sampleEnvelope()
		e.Body.Content = s
		e.StreamID = "s" + s
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := envelope.Decode(append(b[:len(b)-1], []byte(`,"sig":"x..y"}`)...))
		if err != nil {
			t.Fatalf("%q: %v\n%s", s, err, b)
		}
		var want string
		wb, _ := json.Marshal(s)
		json.Unmarshal(wb, &want)
		if got.Body.Content != want || got.StreamID != "s"+want {
			t.Errorf("%q decodes as %q, want %q", s, got.Body.Content, want)
		}
	}
}
