package openai

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry-dev/agentry/llm"
)

// addSeeds adds every fixture of testdata/<dir> ending in ext.
func addSeeds(f *testing.F, dir, ext string) {
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds in testdata/%s: %v", dir, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
		f.Add(data, true)
	}
}

// checkDecoded checks the invariants of any decoder result.
func checkDecoded(t *testing.T, resp *llm.Response, err error) {
	if err != nil {
		var e *llm.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
		}
		if resp != nil {
			t.Fatal("both a response and an error")
		}
		return
	}
	if resp == nil || resp.Message == nil {
		t.Fatal("no error and no message")
	}
	for _, c := range resp.Message.ToolCalls {
		if c.ToolCallID == "" {
			t.Error("tool call without an id")
		}
		if (c.Arguments == nil) == (c.RawArguments == "") {
			t.Errorf("tool call %+v: want exactly one of Arguments and RawArguments", c)
		}
	}
	if resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
		t.Errorf("usage %+v: total is not input+output", resp.Usage)
	}
}

// checkStream checks the decoded stream's events frame correctly.
func checkStream(t *testing.T, evs []llm.StreamEvent, resp *llm.Response, err error) {
	checkDecoded(t, resp, err)
	open := map[int]bool{}
	for i, ev := range evs {
		switch ev.Type {
		case llm.ContentBlockStart:
			if open[ev.Index] {
				t.Fatalf("event %d: block %d started twice", i, ev.Index)
			}
			open[ev.Index] = true
		case llm.ContentBlockStop:
			if !open[ev.Index] {
				t.Fatalf("event %d: block %d stopped but not open", i, ev.Index)
			}
			delete(open, ev.Index)
		case llm.TextDelta, llm.ObjectDelta, llm.ReasoningDelta, llm.ToolCallDelta:
			if ev.Delta.Text == "" && ev.Delta.ArgumentsJSON == "" {
				t.Errorf("event %d: empty %s", i, ev.Type)
			}
		}
	}
	if err == nil && len(open) > 0 {
		t.Errorf("blocks never stopped: %v", open)
	}
}

func FuzzDecodeChatResponse(f *testing.F) {
	addSeeds(f, "chat", ".json")
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		resp, err := decodeChatResponse(data, decodeOptions{provider: "openai", structured: structured})
		checkDecoded(t, resp, err)
	})
}

func FuzzDecodeResponsesResponse(f *testing.F) {
	addSeeds(f, "responses", ".json")
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		resp, err := decodeResponsesResponse(data, decodeOptions{provider: "openai", structured: structured})
		checkDecoded(t, resp, err)
	})
}

func FuzzDecodeChatStream(f *testing.F) {
	addSeeds(f, "chat", ".sse")
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		var evs []llm.StreamEvent
		resp, err := decodeChatStream(bytes.NewReader(data), decodeOptions{provider: "openai", structured: structured},
			func(ev llm.StreamEvent) { evs = append(evs, ev) })
		checkStream(t, evs, resp, err)
	})
}

func FuzzDecodeResponsesStream(f *testing.F) {
	addSeeds(f, "responses", ".sse")
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		var evs []llm.StreamEvent
		resp, err := decodeResponsesStream(bytes.NewReader(data), decodeOptions{provider: "openai", structured: structured},
			func(ev llm.StreamEvent) { evs = append(evs, ev) })
		checkStream(t, evs, resp, err)
	})
}

func FuzzParseError(f *testing.F) {
	addSeeds(f, "errors", ".json")
	f.Fuzz(func(t *testing.T, data []byte, _ bool) {
		msg, code := parseError(400, data)
		if code != "" {
			valid := false
			for _, c := range llm.ErrorCodes {
				valid = valid || c == code
			}
			if !valid {
				t.Errorf("code %q is not a UPP code", code)
			}
		}
		_ = msg
	})
}
