package sse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// llmStream returns an Anthropic Messages-style stream of about size bytes:
// a message_start, text deltas of a few words each with periodic pings,
// and the closing events.
func llmStream(size int) ([]byte, []Event) {
	var evs []Event
	var buf bytes.Buffer
	add := func(typ, data string) {
		evs = append(evs, Event{Type: typ, Data: []byte(data)})
		if err := Write(&buf, evs[len(evs)-1]); err != nil {
			panic(err)
		}
	}
	add("message_start", `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message",`+
		`"role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,`+
		`"usage":{"input_tokens":472,"output_tokens":2}}}`)
	add("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	words := strings.Fields("The quick brown fox jumps over the lazy dog while the model explains " +
		"how server-sent events carry \"quoted\" text, newlines\nand unicode — like ü and ✓ — to the client.")
	for i := 0; buf.Len() < size-400; i++ {
		text, err := json.Marshal(" " + strings.Join(words[i%len(words):min(i%len(words)+3, len(words))], " "))
		if err != nil {
			panic(err)
		}
		add("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(text)+`}}`)
		if i%100 == 99 {
			add("ping", `{"type": "ping"}`)
		}
	}
	add("content_block_stop", `{"type":"content_block_stop","index":0}`)
	add("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15000}}`)
	add("message_stop", `{"type":"message_stop"}`)
	return buf.Bytes(), evs
}

func TestLLMStream(t *testing.T) {
	stream, evs := llmStream(1 << 20)
	got := decode(bytes.NewReader(stream), 0)
	if got.Err != io.EOF || got.Truncated || len(got.Events) != len(evs) {
		t.Fatalf("decoded %d events, err %v, truncated %v; want %d events", len(got.Events), got.Err, got.Truncated, len(evs))
	}
	if got.Events[2].Type != "content_block_delta" || !json.Valid([]byte(got.Events[2].Data)) {
		t.Errorf("third event = %+v, want a content_block_delta with JSON data", got.Events[2])
	}
}

func BenchmarkDecode(b *testing.B) {
	stream, evs := llmStream(1 << 20)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(bytes.NewReader(stream))
		n := 0
		for {
			_, err := d.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != len(evs) {
			b.Fatalf("decoded %d events, want %d", n, len(evs))
		}
	}
}

// BenchmarkBaselineSplitLines only splits the stream of BenchmarkDecode into
// lines: the floor any decoder is measured against.
func BenchmarkBaselineSplitLines(b *testing.B) {
	stream, _ := llmStream(1 << 20)
	want := bytes.Count(stream, []byte("\n"))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		s := bufio.NewScanner(bytes.NewReader(stream))
		n := 0
		for s.Scan() {
			n++
		}
		if err := s.Err(); err != nil {
			b.Fatal(err)
		}
		if n != want {
			b.Fatalf("split %d lines, want %d", n, want)
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	stream, evs := llmStream(1 << 20)
	var buf bytes.Buffer
	buf.Grow(len(stream))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		for _, ev := range evs {
			if err := Write(&buf, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	if buf.Len() != len(stream) {
		b.Fatalf("wrote %d bytes, want %d", buf.Len(), len(stream))
	}
}
