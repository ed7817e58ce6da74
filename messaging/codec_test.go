package messaging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/google/go-cmp/cmp"
)

var deltaSeeds = []string{
	`{"delta_seq":0,"stream_id":"str-1","ts":"2025-07-10T10:00:01Z","type":"done","payload":{"answer":4}}`,
	`{"delta_seq":17,"stream_id":"str-42","ts":"2025-07-10T13:38:01.123Z","type":"chunk","payload":{"content":"héllo \"x\" \u00e9\n","n":[1,2.5,-3,true,false,null,{}]}}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"progress"}`,
	`{"type":"patch","ts":"2024-02-29T23:59:59.999999999Z","stream_id":"","delta_seq":9007199254740992}`,
	`{"delta_seq":9007199254740993,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
	`{"delta_seq":1.0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
	`{"delta_seq":1e1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
	`{"delta_seq":-0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
	`{"delta_seq":01,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
	` {"delta_seq": 1, "stream_id":"s","ts":"2025-07-10t13:38:01z","type":"done", "payload" : { "a" : [ 1 , 2 ] } } `,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-02-29T13:38:01Z","type":"done"}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:60Z","type":"done"}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01+02:00","type":"done"}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","x":1}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","type":"done"}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":{"a":1,"a":2}}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":{"a":1,"\u0061":2}}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":{"a":"\ud800"}}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":{"a":"\ud83d\ude00"}}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":{"a":1e400,"b":9007199254740993}}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":{"<a>":"<&>"}}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":[1]}`,
	`{"delta_seq":1,"stream_id":"s\u0000","ts":"2025-07-10T13:38:01Z","type":"DONE"}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":` + strings.Repeat(`{"a":`, 31) + `1` + strings.Repeat(`}`, 31) + `}`,
	`{"delta_seq":1,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done","payload":` + strings.Repeat(`{"a":`, 32) + `1` + strings.Repeat(`}`, 32) + `}`,
	"{\"delta_seq\":1,\"stream_id\":\"\xff\",\"ts\":\"2025-07-10T13:38:01Z\",\"type\":\"done\"}",
}

// jsonValue decodes b as a JSON value with exact numbers.
func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("payload %q: %v", b, err)
	}
	return v
}

// FuzzDecodeDelta: decodeDelta (the fast path and its fallback) accepts
// exactly what envelope.DecodeDelta accepts, refuses with the same
// code, and decodes the same delta, the payload as the same JSON value,
// compact.
func FuzzDecodeDelta(f *testing.F) {
	for _, s := range deltaSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := envelope.DecodeDelta(b)
		got, gerr := decodeDelta(b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("envelope.DecodeDelta: %v; decodeDelta: %v", werr, gerr)
		}
		if werr != nil {
			// The same refusal; the text may differ, since the schema
			// validator lists failures in map order.
			if envelope.AsError(werr).Code != envelope.AsError(gerr).Code {
				t.Fatalf("errors differ: %v / %v", werr, gerr)
			}
			return
		}
		if (want.Payload == nil) != (got.Payload == nil) {
			t.Fatalf("payload %q, want %q", got.Payload, want.Payload)
		}
		if want.Payload != nil {
			if diff := cmp.Diff(jsonValue(t, want.Payload), jsonValue(t, got.Payload)); diff != "" {
				t.Fatalf("payload (-want +got):\n%s", diff)
			}
		}
		if got.Payload != nil {
			var c bytes.Buffer
			json.Compact(&c, got.Payload)
			if !bytes.Equal(c.Bytes(), got.Payload) {
				t.Fatalf("payload %q is not compact", got.Payload)
			}
		}
		want.Payload, got.Payload = nil, nil
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("delta (-want +got):\n%s", diff)
		}
	})
}

func TestUAMP_5_FastDeltaPath(t *testing.T) {
	// The form appendDelta writes takes the fast path.
	ts := time.Date(2025, 7, 10, 13, 38, 1, 123e6, time.UTC)
	b := appendDelta(nil, 42, []byte(`"str-1"`), ts, envelope.DeltaChunk, []byte(`{"content":"hello"}`))
	d, ok := fastDecodeDelta(b)
	if !ok {
		t.Fatalf("fast path refused %s", b)
	}
	want := &envelope.Delta{Seq: 42, StreamID: "str-1", TS: "2025-07-10T13:38:01.123Z", Type: envelope.DeltaChunk, Payload: json.RawMessage(`{"content":"hello"}`)}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if _, err := envelope.DecodeDelta(b); err != nil {
		t.Fatalf("envelope refuses what appendDelta writes: %v", err)
	}
	// Every seed decodes as envelope.DecodeDelta decodes it.
	for _, s := range deltaSeeds {
		_, werr := envelope.DecodeDelta([]byte(s))
		_, gerr := decodeDelta([]byte(s))
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%s: envelope %v, messaging %v", s, werr, gerr)
		}
	}
}

func TestUAMP_5_CheckPayload(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{" { \"a\" : [1, 2] }\n", `{"a":[1,2]}`},
		{`{"a":"\ud83d\ude00"}`, `{"a":"\ud83d\ude00"}`},
		{`{}`, `{}`},
	} {
		got, err := checkPayload([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("checkPayload(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{`[1]`, `"x"`, `{"a":1,"a":2}`, `{"a":1}, "x":1`, `{"a":9007199254740993}`, `{"a":"\ud800"}`, `{`, "{\"a\":\"\xff\"}"} {
		_, err := checkPayload([]byte(in))
		if !errors.Is(err, envelope.CodeBadRequest) {
			t.Errorf("checkPayload(%q) = %v, want 4.00", in, err)
		}
	}
}

func BenchmarkDecodeDelta(b *testing.B) {
	ts := time.Date(2025, 7, 10, 13, 38, 1, 123e6, time.UTC)
	msg := appendDelta(nil, 42, []byte(`"str-1"`), ts, envelope.DeltaChunk, []byte(`{"content":"`+strings.Repeat("x", 87)+`"}`))
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := envelope.DecodeDelta(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("messaging", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeDelta(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
