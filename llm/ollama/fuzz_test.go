package ollama

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm"
)

// seeds adds every testdata file with the given suffix to the corpus.
func seeds(f *testing.F, suffix string) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*"+suffix))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no %s fixtures: %v", suffix, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, strings.Contains(p, "structured"))
	}
}

func FuzzDecodeResponse(f *testing.F) {
	seeds(f, ".json")
	f.Add([]byte(`{"error":"boom"}`), false)
	f.Add([]byte(`{"message":{"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]},"done":true}`), false)
	f.Add([]byte(`{"message":{"tool_calls":[{"function":{"arguments":[1]}}]}}`), true)
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		resp, err := decodeResponse(data, structured)
		if err != nil {
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *llm.Error", err)
			}
			return
		}
		checkResponse(t, resp)
	})
}

func FuzzDecodeStream(f *testing.F) {
	seeds(f, ".ndjson")
	f.Add([]byte(`{"message":{"thinking":"a","content":"b","tool_calls":[{"function":{"name":"f"}}]},"done":true}`), true)
	f.Add([]byte("{\"done\":false}\n\n\r\n{\"done\":true}"), false)
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		var events []llm.StreamEvent
		resp, err := decodeStream(bytes.NewReader(data), structured, func(ev llm.StreamEvent) { events = append(events, ev) })
		if err != nil {
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *llm.Error", err)
			}
			return
		}
		checkResponse(t, resp)
		checkEvents(t, events, resp)
	})
}

func checkResponse(t *testing.T, resp *llm.Response) {
	t.Helper()
	if resp == nil || resp.Message == nil {
		t.Fatal("nil response without error")
	}
	for _, c := range resp.Message.ToolCalls {
		if c.ToolCallID == "" {
			t.Error("tool call without ID")
		}
		if (c.Arguments != nil) == (c.RawArguments != "") {
			t.Errorf("tool call %+v: want exactly one of Arguments and RawArguments", c)
		}
	}
	if resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
		t.Errorf("usage %+v", resp.Usage)
	}
}

// checkEvents checks that the events are well formed and carry what the
// response holds.
func checkEvents(t *testing.T, events []llm.StreamEvent, resp *llm.Response) {
	t.Helper()
	if len(events) < 2 || events[0].Type != llm.MessageStart || events[len(events)-1].Type != llm.MessageStop {
		t.Fatalf("events not framed by message_start/message_stop: %v", events)
	}
	open, next, calls := -1, 0, 0
	var text, reasoning strings.Builder
	for _, ev := range events[1 : len(events)-1] {
		switch ev.Type {
		case llm.ContentBlockStart:
			if open != -1 || ev.Index != next {
				t.Fatalf("block %d starts while %d is open (next %d)", ev.Index, open, next)
			}
			open, next = ev.Index, next+1
		case llm.ContentBlockStop:
			if ev.Index != open {
				t.Fatalf("block %d stops while %d is open", ev.Index, open)
			}
			open = -1
		case llm.TextDelta, llm.ObjectDelta:
			text.WriteString(ev.Delta.Text)
		case llm.ReasoningDelta:
			reasoning.WriteString(ev.Delta.Text)
		case llm.ToolCallDelta:
			if ev.Delta.ToolCallID != resp.Message.ToolCalls[calls].ToolCallID {
				t.Errorf("tool_call_delta ID %q, response has %q", ev.Delta.ToolCallID, resp.Message.ToolCalls[calls].ToolCallID)
			}
			calls++
		}
		if ev.Type != llm.ContentBlockStart && ev.Type != llm.ContentBlockStop && ev.Index != open {
			t.Fatalf("%s for block %d while %d is open", ev.Type, ev.Index, open)
		}
	}
	if open != -1 {
		t.Errorf("block %d left open", open)
	}
	var gotText, gotReasoning strings.Builder
	for _, b := range resp.Message.Content {
		switch b := b.(type) {
		case llm.TextBlock:
			gotText.WriteString(b.Text)
		case llm.ReasoningBlock:
			gotReasoning.WriteString(b.Text)
		}
	}
	if text.String() != gotText.String() || reasoning.String() != gotReasoning.String() || calls != len(resp.Message.ToolCalls) {
		t.Errorf("events and response differ: text %q/%q, reasoning %q/%q, calls %d/%d",
			text.String(), gotText.String(), reasoning.String(), gotReasoning.String(), calls, len(resp.Message.ToolCalls))
	}
}
