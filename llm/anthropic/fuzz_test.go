package anthropic

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm"
)

var modes = []outputMode{outputNone, outputTool, outputNative}

func addSeeds(f *testing.F, pattern string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds for %s: %v", pattern, err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

func requireError(t *testing.T, err error) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Provider != name {
		t.Fatalf("error %v (%T) is not an anthropic *llm.Error", err, err)
	}
}

// FuzzDecodeResponse feeds arbitrary bytes to the response decoder and
// sends what it produced back through the request mapping.
func FuzzDecodeResponse(f *testing.F) {
	addSeeds(f, "response_*.json")
	addSeeds(f, "errors/*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeResponse(data)
		if err != nil {
			requireError(t, err)
			return
		}
		for _, mode := range modes {
			resp, err := toResponse(m, mode)
			if err != nil {
				requireError(t, err)
				continue
			}
			if resp.Message == nil || resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
				t.Fatalf("bad response %+v", resp)
			}
			if _, err := convertMessages([]llm.Message{llm.NewUserMessage(llm.Text("q")), resp.Message}); err != nil {
				t.Fatalf("a decoded reply cannot be sent back: %v", err)
			}
		}
	})
}

// FuzzDecodeStream feeds arbitrary bytes to the stream decoder: it must end
// with a message or an *llm.Error, and a successful stream's events must be
// framed by message_start and message_stop and carry the assembled text.
func FuzzDecodeStream(f *testing.F) {
	addSeeds(f, "stream_*.sse")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mode := range modes {
			var evs []llm.StreamEvent
			m, err := decodeStream(bytes.NewReader(data), mode, func(ev llm.StreamEvent) { evs = append(evs, ev) })
			if err != nil {
				requireError(t, err)
				continue
			}
			if len(evs) < 2 || evs[0].Type != llm.MessageStart || evs[len(evs)-1].Type != llm.MessageStop {
				t.Fatalf("events not framed by message_start/message_stop: %v", evs)
			}
			resp, err := toResponse(m, mode)
			if err != nil {
				requireError(t, err)
				continue
			}
			if mode != outputNone {
				continue
			}
			var streamed, final strings.Builder
			for _, ev := range evs {
				if ev.Type == llm.TextDelta {
					streamed.WriteString(ev.Delta.Text)
				}
			}
			for _, b := range resp.Message.Content {
				if tb, ok := b.(llm.TextBlock); ok {
					final.WriteString(tb.Text)
				}
			}
			if streamed.String() != final.String() {
				t.Fatalf("text deltas %q differ from the assembled text %q", streamed.String(), final.String())
			}
		}
	})
}

// FuzzParseError feeds arbitrary error bodies to the error parser.
func FuzzParseError(f *testing.F) {
	addSeeds(f, "errors/*.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, code := parseError(529, body)
		if code != "" && msg == "" {
			t.Fatalf("code %s without a message", code)
		}
		if code != "" && !strings.Contains(strings.Join(codes(), " "), string(code)) {
			t.Fatalf("unknown code %q", code)
		}
	})
}

func codes() []string {
	out := make([]string, len(llm.ErrorCodes))
	for i, c := range llm.ErrorCodes {
		out[i] = string(c)
	}
	return out
}
