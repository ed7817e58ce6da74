package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// event is Event with Data as a string, so that tables read well and
// results can be kept past the next call to Next.
type event struct {
	Type, Data, ID string
	Retry          int
}

// result is everything a decoder reports for one stream.
type result struct {
	Events    []event
	Err       error // the error that ended decoding; io.EOF for a clean end
	Truncated bool
}

// decode drains a decoder over r; max 0 keeps the default limit.
func decode(r io.Reader, max int) result {
	d := NewDecoder(r)
	if max != 0 {
		d.SetMaxEventSize(max)
	}
	var res result
	for {
		ev, err := d.Next()
		if err != nil {
			res.Err, res.Truncated = err, d.Truncated()
			return res
		}
		res.Events = append(res.Events, event{ev.Type, string(ev.Data), ev.ID, ev.Retry})
	}
}

// msg is a dispatched event of the default type with no id or retry.
func msg(data string) event { return event{Data: data, Retry: -1} }

var errRead = errors.New("read failed")

// decoderTests pin the rules of the HTML Living Standard §9.2.6
// "Interpreting an event stream"; each name starts with the rule.
var decoderTests = []decoderTest{
	// The stream is UTF-8 decoded, which drops one leading BOM.
	{name: "bom/leading BOM is stripped", in: "\xEF\xBB\xBFdata: a\n\n", want: []event{msg("a")}},
	{name: "bom/only one BOM is stripped", in: "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", want: []event{msg("b")}},
	{name: "bom/BOM after the start is data", in: "data: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []event{msg("a")}},
	{name: "bom/BOM in a value is kept", in: "data: \xEF\xBB\xBFa\n\n", want: []event{msg("\xEF\xBB\xBFa")}},
	{name: "bom/partial BOM is a field name", in: "\xEF\xBBdata: a\n\ndata: b\n\n", want: []event{msg("b")}},
	{name: "bom/stream is only a BOM", in: "\xEF\xBB\xBF"},
	{name: "bom/stream shorter than a BOM", in: "\xEF\xBB", trunc: true},

	// Lines end in CRLF, LF or CR.
	{name: "eol/LF", in: "data: a\n\n", want: []event{msg("a")}},
	{name: "eol/CRLF", in: "data: a\r\n\r\n", want: []event{msg("a")}},
	{name: "eol/CR", in: "data: a\r\r", want: []event{msg("a")}},
	{name: "eol/mixed", in: "data: a\rdata: b\r\ndata: c\n\r\n", want: []event{msg("a\nb\nc")}},
	{name: "eol/CRLF is one line ending", in: "data: a\r\ndata: b\r\n\r\n", want: []event{msg("a\nb")}},
	{name: "eol/LF CR is two line endings", in: "data: a\n\rdata: b\n\n", want: []event{msg("a"), msg("b")}},
	{name: "eol/CR CR LF is a blank line", in: "data: a\r\r\ndata: b\n\n", want: []event{msg("a"), msg("b")}},
	{name: "eol/CR inside a value ends the line", in: "data: a\rb\n\n", want: []event{msg("a")}},

	// "data" appends the value and a LF; dispatch removes the last LF.
	{name: "data/lines are joined with LF", in: "data: a\ndata: b\ndata: c\n\n", want: []event{msg("a\nb\nc")}},
	{name: "data/empty value dispatches empty data", in: "data:\n\n", want: []event{msg("")}},
	{name: "data/field without colon has empty value", in: "data\n\n", want: []event{msg("")}},
	{name: "data/two empty values are one LF", in: "data\ndata\n\n", want: []event{msg("\n")}},
	{name: "data/empty line inside", in: "data: a\ndata:\ndata: b\n\n", want: []event{msg("a\n\nb")}},
	{name: "data/value keeps later colons", in: "data: a: b:c\n\n", want: []event{msg("a: b:c")}},
	{name: "data/value is bytes not text", in: "data: \xff\x00\xfe\n\n", want: []event{msg("\xff\x00\xfe")}},
	{name: "data/events are independent", in: "data: a\n\ndata: b\n\n", want: []event{msg("a"), msg("b")}},

	// One leading space after the colon is removed, nothing else.
	{name: "space/one leading space is stripped", in: "data: a\n\n", want: []event{msg("a")}},
	{name: "space/only one space is stripped", in: "data:  a\n\n", want: []event{msg(" a")}},
	{name: "space/no space", in: "data:a\n\n", want: []event{msg("a")}},
	{name: "space/tab is kept", in: "data:\ta\n\n", want: []event{msg("\ta")}},
	{name: "space/trailing spaces are kept", in: "data: a \n\n", want: []event{msg("a ")}},
	{name: "space/lone space is empty value", in: "data: \n\n", want: []event{msg("")}},

	// Field names are matched exactly.
	{name: "field/unknown field is ignored", in: "foo: bar\ndata: a\n\n", want: []event{msg("a")}},
	{name: "field/names are case sensitive", in: "Data: a\n\n"},
	{name: "field/space before colon is part of the name", in: "data : a\n\n"},
	{name: "field/leading space is part of the name", in: " data: a\n\n"},

	// A line starting with a colon is a comment.
	{name: "comment/is ignored", in: ": hello\ndata: a\n\n", want: []event{msg("a")}},
	{name: "comment/bare colon", in: ":\ndata: a\n:\n\n", want: []event{msg("a")}},
	{name: "comment/does not dispatch", in: ": ping\n\n"},
	{name: "comment/between data lines", in: "data: a\n: x\ndata: b\n\n", want: []event{msg("a\nb")}},
	{name: "comment/data after comment colon is not a field", in: ":data: a\n\n"},

	// "event" sets the event type buffer, reset at every dispatch.
	{name: "event/sets the type", in: "event: add\ndata: 1\n\n", want: []event{{Type: "add", Data: "1", Retry: -1}}},
	{name: "event/last one wins", in: "event: a\nevent: b\ndata: 1\n\n", want: []event{{Type: "b", Data: "1", Retry: -1}}},
	{name: "event/type is reset after dispatch", in: "event: add\ndata: 1\n\ndata: 2\n\n",
		want: []event{{Type: "add", Data: "1", Retry: -1}, msg("2")}},
	{name: "event/type is reset by a dispatch without data", in: "event: add\n\ndata: 2\n\n", want: []event{msg("2")}},
	{name: "event/after data", in: "data: 1\nevent: add\n\n", want: []event{{Type: "add", Data: "1", Retry: -1}}},
	{name: "event/empty value is the default type", in: "event\ndata: 1\n\n", want: []event{msg("1")}},

	// "id" sets the last event ID unless the value contains NUL; it persists.
	{name: "id/sets the id", in: "id: 7\ndata: a\n\n", want: []event{{Data: "a", ID: "7", Retry: -1}}},
	{name: "id/persists across events", in: "id: 7\ndata: a\n\ndata: b\n\n",
		want: []event{{Data: "a", ID: "7", Retry: -1}, {Data: "b", ID: "7", Retry: -1}}},
	{name: "id/with NUL is ignored", in: "id: 7\ndata: a\n\nid: 8\x009\ndata: b\n\n",
		want: []event{{Data: "a", ID: "7", Retry: -1}, {Data: "b", ID: "7", Retry: -1}}},
	{name: "id/empty value resets it", in: "id: 7\ndata: a\n\nid\ndata: b\n\n",
		want: []event{{Data: "a", ID: "7", Retry: -1}, msg("b")}},
	{name: "id/set by an event without data", in: "id: 7\n\ndata: a\n\n", want: []event{{Data: "a", ID: "7", Retry: -1}}},
	{name: "id/last one wins", in: "id: 1\nid: 2\ndata: a\n\n", want: []event{{Data: "a", ID: "2", Retry: -1}}},

	// "retry" sets the reconnection time when the value is all ASCII digits.
	{name: "retry/digits set it", in: "retry: 1500\ndata: a\n\n", want: []event{{Data: "a", Retry: 1500}}},
	{name: "retry/zero", in: "retry: 0\ndata: a\n\n", want: []event{{Data: "a", Retry: 0}}},
	{name: "retry/persists across events", in: "retry: 5\ndata: a\n\ndata: b\n\n",
		want: []event{{Data: "a", Retry: 5}, {Data: "b", Retry: 5}}},
	{name: "retry/sign is ignored", in: "retry: -5\ndata: a\n\nretry: +5\ndata: b\n\n", want: []event{msg("a"), msg("b")}},
	{name: "retry/non-digits are ignored", in: "retry: 5s\ndata: a\n\nretry: 1.5\ndata: b\n\n", want: []event{msg("a"), msg("b")}},
	{name: "retry/extra space is ignored", in: "retry:  5\ndata: a\n\n", want: []event{msg("a")}},
	{name: "retry/empty value is ignored", in: "retry: 5\nretry\ndata: a\n\n", want: []event{{Data: "a", Retry: 5}}},
	{name: "retry/out of range is ignored", in: "retry: 99999999999999999999999\ndata: a\n\n", want: []event{msg("a")}},
	{name: "retry/set by an event without data", in: "retry: 5\n\ndata: a\n\n", want: []event{{Data: "a", Retry: 5}}},

	// A blank line dispatches; an event without data is not dispatched.
	{name: "dispatch/without data nothing is dispatched", in: "event: x\nid: 1\nretry: 2\n\n"},
	{name: "dispatch/blank lines alone", in: "\n\r\n\r\n\n"},
	{name: "dispatch/extra blank lines between events", in: "data: a\n\n\n\ndata: b\n\n", want: []event{msg("a"), msg("b")}},

	// At the end of the stream the pending event is discarded.
	{name: "eof/empty stream", in: ""},
	{name: "eof/complete stream is not truncated", in: "data: a\n\n", want: []event{msg("a")}},
	{name: "eof/incomplete event is discarded", in: "data: a\n\ndata: b\n", want: []event{msg("a")}, trunc: true},
	{name: "eof/final line without end is discarded", in: "data: a\n\ndata: b", want: []event{msg("a")}, trunc: true},
	{name: "eof/event ended by CR only at end is discarded", in: "data: a\r", trunc: true},
	{name: "eof/pending comment is truncation", in: "data: a\n\n: ping\n", want: []event{msg("a")}, trunc: true},

	// The size limit bounds an event's data and a line.
	{name: "limit/data at the limit", in: "data: abcd\n\n", max: 4, want: []event{msg("abcd")}},
	{name: "limit/data over the limit", in: "data: abcde\n\n", max: 4, err: ErrTooLarge},
	{name: "limit/joined data at the limit", in: "data: ab\ndata: c\n\n", max: 4, want: []event{msg("ab\nc")}},
	{name: "limit/joined data over the limit", in: "data: ab\ndata: cd\n\n", max: 4, err: ErrTooLarge},
	{name: "limit/applies per event", in: "data: abcd\n\ndata: efgh\n\n", max: 4, want: []event{msg("abcd"), msg("efgh")}},
	{name: "limit/events before the error are returned", in: "data: a\n\ndata: abcde\n\n", max: 4, want: []event{msg("a")}, err: ErrTooLarge},
	{name: "limit/line over the limit", in: ": " + strings.Repeat("x", 100) + "\n\ndata: a\n\n", max: 16, err: ErrTooLarge},
	{name: "limit/long line under a large limit", in: "data: " + strings.Repeat("x", 100<<10) + "\n\n", max: 1 << 20,
		want: []event{msg(strings.Repeat("x", 100<<10))}},
	{name: "limit/data line at a limit above the buffer size", in: "data: " + strings.Repeat("x", 40000) + "\n\n", max: 40000,
		want: []event{msg(strings.Repeat("x", 40000))}},
	{name: "limit/data line over a limit above the buffer size", in: "data:" + strings.Repeat("x", 40001) + "\n\n", max: 40000,
		err: ErrTooLarge},
	{name: "limit/unterminated line over the limit", in: "data: " + strings.Repeat("x", 100), max: 16, err: ErrTooLarge},
}

type decoderTest struct {
	name  string
	in    string
	max   int // 0: default
	want  []event
	err   error // io.EOF unless set
	trunc bool
}

func (tt *decoderTest) result() result {
	err := tt.err
	if err == nil {
		err = io.EOF
	}
	return result{Events: tt.want, Err: err, Truncated: tt.trunc}
}

var cmpErr = cmp.Comparer(func(a, b error) bool { return a == b || errors.Is(a, b) || errors.Is(b, a) })

// TestInterpretingAnEventStream runs decoderTests: HTML §9.2.6.
func TestInterpretingAnEventStream(t *testing.T) {
	for i := range decoderTests {
		tt := &decoderTests[i]
		t.Run(tt.name, func(t *testing.T) {
			got := decode(strings.NewReader(tt.in), tt.max)
			if diff := cmp.Diff(tt.result(), got, cmpErr); diff != "" {
				t.Errorf("decode(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// chunkReader returns its input in reads of the given sizes, then of one
// byte each.
type chunkReader struct {
	data  []byte
	sizes []int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n, r.sizes = r.sizes[0], r.sizes[1:]
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// randomChunks returns a reader of data in random-size reads of 1 to 64 bytes.
func randomChunks(data []byte, rng *rand.Rand) io.Reader {
	r := &chunkReader{data: data}
	for left := len(data); left > 0; {
		n := 1 + rng.IntN(64)
		r.sizes = append(r.sizes, n)
		left -= n
	}
	return r
}

// TestDecoderReadSizes checks that how the input is split into reads does
// not change the events: one byte per read, random chunks, every split in
// two (which puts a CR and its LF in different reads), and data arriving
// with io.EOF.
func TestDecoderReadSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range decoderTests {
		tt := &decoderTests[i]
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			want := decode(bytes.NewReader(in), tt.max)
			readers := map[string]func() io.Reader{
				"one byte":   func() io.Reader { return iotest.OneByteReader(bytes.NewReader(in)) },
				"half":       func() io.Reader { return iotest.HalfReader(bytes.NewReader(in)) },
				"data + EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) },
				"random":     func() io.Reader { return randomChunks(in, rng) },
			}
			if len(in) < 200 {
				for split := 1; split < len(in); split++ {
					readers[fmt.Sprintf("split at %d", split)] = func() io.Reader {
						return &chunkReader{data: in, sizes: []int{split, len(in)}}
					}
				}
			}
			for name, r := range readers {
				if diff := cmp.Diff(want, decode(r(), tt.max), cmpErr); diff != "" {
					t.Errorf("%s: events differ from whole reads (-whole +%s):\n%s", name, name, diff)
				}
			}
		})
	}
}

func TestDecoderCRLFAcrossReads(t *testing.T) {
	// If the LF after a CR that ended a read were taken as a blank line,
	// "a" and "b" would be two events.
	r := &chunkReader{data: []byte("data: a\r\ndata: b\r\n\r\n"), sizes: []int{8, 100}}
	got := decode(r, 0)
	want := result{Events: []event{msg("a\nb")}, Err: io.EOF}
	if diff := cmp.Diff(want, got, cmpErr); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestDecoderReadError(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(errRead))
	got := decode(r, 0)
	want := result{Events: []event{msg("a")}, Err: errRead, Truncated: true}
	if diff := cmp.Diff(want, got, cmpErr); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestDecoderUnlimited(t *testing.T) {
	// A limit near MaxInt must not overflow into a tiny one.
	line := strings.Repeat("x", 100<<10)
	got := decode(strings.NewReader(": "+line+"\ndata: "+line+"\n\n"), math.MaxInt)
	want := result{Events: []event{msg(line)}, Err: io.EOF}
	if diff := cmp.Diff(want, got, cmpErr); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestDecoderEOFIsSticky(t *testing.T) {
	d := NewDecoder(strings.NewReader("data: a\n\n"))
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := d.Next(); err != io.EOF {
			t.Fatalf("Next after the end = %v, want io.EOF", err)
		}
	}
}

// roundTripEvents cover every field and the line endings Write must split.
var roundTripEvents = []Event{
	{Data: []byte("hello"), Retry: -1},
	{Type: "content_block_delta", ID: "1", Data: []byte(`{"type":"text_delta","text":"a: b"}`), Retry: 3000},
	{Data: []byte("line 1\nline 2\r\nline 3\rline 4"), ID: "2"},
	{Data: []byte(" leading space"), Type: " spaced type", ID: " 3"},
	{Data: []byte(""), Type: "empty"},
	{Data: nil, Type: "nil"},
	{Data: []byte("\n\n"), Type: "only newlines"},
	{Data: []byte("trailing newline\n")},
	{Data: []byte(": not a comment"), ID: "id:with:colons"},
	{Data: []byte("ünïcødé ✓"), Type: "ünï"},
	{Data: []byte("\xEF\xBB\xBFbom"), Retry: 1},
}

// wantRoundTrip is what decoding Write's output yields: data line endings
// normalized to LF, and the id and retry persisting as the standard says.
func wantRoundTrip(evs []Event) []event {
	var out []event
	id, retry := "", -1
	for _, ev := range evs {
		if ev.ID != "" {
			id = ev.ID
		}
		if ev.Retry > 0 {
			retry = ev.Retry
		}
		data := strings.ReplaceAll(string(ev.Data), "\r\n", "\n")
		data = strings.ReplaceAll(data, "\r", "\n")
		out = append(out, event{Type: ev.Type, Data: data, ID: id, Retry: retry})
	}
	return out
}

func TestWriteRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, ev := range roundTripEvents {
		if err := Write(&buf, ev); err != nil {
			t.Fatalf("Write(%+v): %v", ev, err)
		}
	}
	got := decode(&buf, 0)
	want := result{Events: wantRoundTrip(roundTripEvents), Err: io.EOF}
	if diff := cmp.Diff(want, got, cmpErr); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestWriteFormat(t *testing.T) {
	var buf bytes.Buffer
	ev := Event{Type: "add", ID: "42", Retry: 10, Data: []byte("a\nb")}
	if err := Write(&buf, ev); err != nil {
		t.Fatal(err)
	}
	const want = "id: 42\nevent: add\nretry: 10\ndata: a\ndata: b\n\n"
	if got := buf.String(); got != want {
		t.Errorf("Write = %q, want %q", got, want)
	}
}

func TestWriteRejectsLineBreaks(t *testing.T) {
	for _, ev := range []Event{
		{Type: "a\nb"}, {Type: "a\r"}, {Type: "\r\n"},
		{ID: "1\n2"}, {ID: "1\r"}, {ID: "1\x002"},
	} {
		var buf bytes.Buffer
		if err := Write(&buf, ev); err == nil {
			t.Errorf("Write(%q, %q) succeeded, want an error", ev.Type, ev.ID)
		}
		if buf.Len() != 0 {
			t.Errorf("Write(%q, %q) wrote %q before failing", ev.Type, ev.ID, buf.String())
		}
	}
}

func TestWriteError(t *testing.T) {
	w := errWriter{}
	if err := Write(w, Event{Data: []byte("a")}); !errors.Is(err, errRead) {
		t.Errorf("Write = %v, want the writer's error", err)
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errRead }

func FuzzDecoder(f *testing.F) {
	for _, tt := range decoderTests {
		if len(tt.in) < 1<<10 {
			f.Add([]byte(tt.in), uint16(tt.max))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		limit := int(max)
		if limit == 0 {
			limit = DefaultMaxEventSize
		}
		whole := decodeChecked(t, bytes.NewReader(in), limit, len(in))
		if diff := cmp.Diff(reference(string(in), limit), whole, cmpErr); diff != "" {
			t.Fatalf("decoder differs from the reference (-reference +decoder):\n%s", diff)
		}
		for name, r := range map[string]io.Reader{
			"one byte":   iotest.OneByteReader(bytes.NewReader(in)),
			"data + EOF": iotest.DataErrReader(bytes.NewReader(in)),
		} {
			if diff := cmp.Diff(whole, decodeChecked(t, r, limit, len(in)), cmpErr); diff != "" {
				t.Fatalf("%s reads differ from whole reads (-whole +%s):\n%s", name, name, diff)
			}
		}
	})
}

// decodeChecked decodes like decode and fails when the decoder makes no
// progress, returns an oversized event or an unexpected error.
func decodeChecked(t *testing.T, r io.Reader, limit, size int) result {
	d := NewDecoder(r)
	d.SetMaxEventSize(limit)
	var res result
	for calls := 0; ; calls++ {
		if calls > size {
			t.Fatalf("more than %d events from %d bytes", calls, size)
		}
		ev, err := d.Next()
		if err != nil {
			if err != io.EOF && err != ErrTooLarge {
				t.Fatalf("unexpected error %v", err)
			}
			res.Err, res.Truncated = err, d.Truncated()
			return res
		}
		if len(ev.Data) > limit {
			t.Fatalf("event of %d bytes over the %d limit", len(ev.Data), limit)
		}
		res.Events = append(res.Events, event{ev.Type, string(ev.Data), ev.ID, ev.Retry})
	}
}

// reference decodes a whole stream as literally as §9.2.6 reads, with the
// decoder's limits: an event's data at most limit bytes, a line at most
// limit plus len("data: ").
func reference(in string, limit int) result {
	in = strings.TrimPrefix(in, "\xEF\xBB\xBF")
	var (
		res     result
		data    []string
		size    int
		typ, id string
		retry   = -1
		pending bool // a line since the last blank line
	)
	for {
		i := strings.IndexAny(in, "\r\n")
		if i > limit+len("data: ") || i < 0 && len(in) > limit+len("data: ") {
			res.Err = ErrTooLarge
			return res
		}
		if i < 0 {
			res.Err, res.Truncated = io.EOF, pending || in != ""
			return res
		}
		line := in[:i]
		if strings.HasPrefix(in[i:], "\r\n") {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
		if line == "" {
			if data != nil {
				res.Events = append(res.Events, event{typ, strings.Join(data, "\n"), id, retry})
			}
			data, size, typ, pending = nil, 0, "", false
			continue
		}
		pending = true
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ = value
		case "data":
			if data != nil {
				size++
			}
			if size += len(value); size > limit {
				res.Err = ErrTooLarge
				return res
			}
			data = append(data, value)
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		case "retry":
			if n, err := strconv.Atoi(value); err == nil && strings.Trim(value, "0123456789") == "" {
				retry = n
			}
		}
	}
}

func FuzzWriteRoundTrip(f *testing.F) {
	for _, ev := range roundTripEvents {
		f.Add(ev.Type, ev.ID, ev.Data, ev.Retry)
	}
	f.Fuzz(func(t *testing.T, typ, id string, data []byte, retry int) {
		ev := Event{Type: typ, ID: id, Data: data, Retry: retry}
		var buf bytes.Buffer
		if err := Write(&buf, ev); err != nil {
			if !strings.ContainsAny(typ, "\r\n") && !strings.ContainsAny(id, "\r\n\x00") {
				t.Fatalf("Write rejected a valid event: %v", err)
			}
			return
		}
		got := decode(&buf, 0)
		want := result{Events: wantRoundTrip([]Event{ev}), Err: io.EOF}
		if diff := cmp.Diff(want, got, cmpErr); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestDecoderLongLineInSmallReads(t *testing.T) {
	// Rescanning a pending line on every read made this quadratic: 1 MiB
	// in 16-byte reads took seconds; now it is linear.
	line := strings.Repeat("x", 1<<20)
	r := &chunkReader{data: []byte("data: " + line + "\n\n")}
	for range len(r.data)/16 + 1 {
		r.sizes = append(r.sizes, 16)
	}
	got := decode(r, 0)
	want := result{Events: []event{msg(line)}, Err: io.EOF}
	if diff := cmp.Diff(want, got, cmpErr); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
