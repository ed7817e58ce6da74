package envelope_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

// sseData returns the data: payloads of an SSE transcript, one per line,
// and the lines that are not data: lines.
func sseData(t *testing.T, path string) (data [][]byte, other []string) {
	t.Helper()
	f, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, []byte(d))
		} else if sc.Text() != "" {
			other = append(other, sc.Text())
		}
	}
	return data, other
}

// TestUAMP_13_AppendixC_Verbatim pins why none of the Appendix C
// examples decodes as published (testdata/spec, verbatim).
func TestUAMP_13_AppendixC_Verbatim(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "spec", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	expect := func(name string, err error, wants ...string) {
		t.Helper()
		wantCode(t, err, envelope.CodeBadRequest)
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not say %q", name, err, w)
			}
		}
	}
	_, err := envelope.Decode(read("example-c1-ask.json"))
	expect("C.1 ask", err, "/id: 'urn:uuid:1111' is not valid uuid")
	_, err = envelope.DecodeDelta(read("example-c1-delta.json"))
	expect("C.1 delta", err, "/ts: '…' is not valid date-time")
	_, err = envelope.Decode(read("example-c2-request.json"))
	expect("C.2 request", err, "/id: 'urn:uuid:imgreq' is not valid uuid", "/ts: '…' is not valid date-time")
	data, other := sseData(t, filepath.Join("testdata", "spec", "example-c2-stream.sse"))
	if len(other) != 1 || other[0] != "…" {
		t.Errorf("non-data lines %q", other)
	}
	for i, d := range data {
		_, err := envelope.DecodeDelta(d)
		want := []string{"missing properties 'stream_id', 'ts'"}
		if i == 2 {
			want = []string{"not a JSON document"} // "delta_seq":N
		}
		expect("C.2 delta "+string(d), err, want...)
	}
	// With the placeholder sig "…" fixed up, C.1's only other fault is its
	// id: the spec's own sig placeholder is a string the schema accepts.
	fixed := bytes.Replace(read("example-c1-ask.json"), []byte("urn:uuid:1111"), []byte("urn:uuid:11111111-1111-4111-8111-111111111111"), 1)
	e, err := envelope.Decode(fixed)
	if err != nil {
		t.Fatal(err)
	}
	_, err = envelope.Open(ctx, fixed, keySet(t, edKey(t, "did:web:client#key-1")))
	wantCode(t, err, envelope.CodeUnauthenticated)
	if e.Sig != "…" {
		t.Errorf("sig %q", e.Sig)
	}
}

var placeholderSig = regexp.MustCompile(`"sig":"[^"]*"`)

// TestUAMP_13_AppendixC_Corrected decodes the corrected examples
// (testdata/examples): the requests verify with the test keys, the
// deltas of each stream decode in sequence. With -update the requests
// are re-signed in place.
func TestUAMP_13_AppendixC_Corrected(t *testing.T) {
	for _, c := range []struct{ file, kid string }{
		{"c1-ask.json", "did:web:client#key-1"},
		{"c2-request.json", "did:web:ui#key-1"},
	} {
		path := filepath.Join("testdata", "examples", c.file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		k := edKey(t, c.kid)
		if *update {
			e, err := envelope.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := envelope.Sign(e, k); err != nil {
				t.Fatal(err)
			}
			b = placeholderSig.ReplaceAll(b, []byte(`"sig":"`+e.Sig+`"`))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		e, err := envelope.Open(ctx, b, keySet(t, k))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if e.Intent != envelope.IntentAsk || e.Body.Type != "text/plain" {
			t.Errorf("%s: %+v", c.file, e)
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "examples", "c1-delta.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := envelope.DecodeDelta(b)
	if err != nil || d.Type != envelope.DeltaDone || string(d.Payload) != `{"answer":4}` {
		t.Errorf("C.1 delta: %+v, %v", d, err)
	}
	data, other := sseData(t, filepath.Join("testdata", "examples", "c2-stream.sse"))
	if len(other) != 0 || len(data) != 3 {
		t.Fatalf("C.2 stream: %d data lines, other lines %q", len(data), other)
	}
	// The stream's last delta, and only it, ends the request (§10).
	for i, line := range data {
		d, err := envelope.DecodeDelta(line)
		if err != nil {
			t.Fatalf("C.2 delta %d: %v", i, err)
		}
		if d.Seq != int64(i) || d.StreamID != "str-img" {
			t.Errorf("C.2 delta %d: %+v", i, d)
		}
		if d.Type.Final() != (i == len(data)-1) || i == len(data)-1 && d.Type != envelope.DeltaDone {
			t.Errorf("C.2 delta %d of %d is %s", i, len(data), d.Type)
		}
	}
}
