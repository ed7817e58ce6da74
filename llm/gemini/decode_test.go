package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/llm"
	"github.com/google/go-cmp/cmp"
)

func TestParseError(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		code   llm.ErrorCode
		msg    string
	}{
		{"RateLimitWithRetryInfo", 429, fixtureString("error_rate_limit.json"), llm.RateLimited, "RESOURCE_EXHAUSTED: You exceeded"},
		{"GenericExhausted", 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, llm.RateLimited, "Resource has been exhausted"},
		{"QuotaNoRetry", 429, `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED"}}`, llm.QuotaExceeded, "current quota"},
		{"Credits", 429, `{"error":{"code":429,"message":"Your prepayment credits are depleted.","status":"RESOURCE_EXHAUSTED"}}`, llm.QuotaExceeded, "credits"},
		{"APIKey", 400, fixtureString("error_api_key.json"), llm.AuthenticationFailed, "API key not valid"},
		{"ContextLength", 400, fixtureString("error_context_length.json"), llm.ContextLengthExceeded, "input token count"},
		{"InvalidArgument", 400, `{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`, llm.InvalidRequest, "Invalid JSON payload"},
		{"FailedPrecondition", 400, `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`, llm.InvalidRequest, "User location"},
		{"PermissionDenied", 403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`, llm.AuthenticationFailed, "unregistered"},
		{"NotFound", 404, fixtureString("error_not_found.json"), llm.ModelNotFound, "not found"},
		{"Unavailable", 503, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`, llm.ProviderError, "overloaded"},
		{"DeadlineExceeded", 504, `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`, llm.ProviderError, "Deadline"},
		{"ArrayForm", 429, `[{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}]`, llm.RateLimited, "slow down"},
		{"UnknownStatus", 418, `{"error":{"code":418,"message":"teapot","status":"TEAPOT"}}`, "", "TEAPOT: teapot"},
		{"NotJSON", 502, `<html>Bad Gateway</html>`, "", ""},
		{"EmptyError", 500, `{"error":{}}`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, code := parseError(c.status, []byte(c.body))
			if code != c.code || !strings.Contains(msg, c.msg) || (c.msg == "" && msg != "") {
				t.Errorf("parseError = (%q, %q), want (%q…, %q)", msg, code, c.msg, c.code)
			}
		})
	}
}

func fixtureString(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestResultObject(t *testing.T) {
	type point struct {
		X int `json:"x"`
	}
	for _, c := range []struct {
		name string
		in   llm.ToolResult
		want map[string]any
	}{
		{"String", llm.ToolResult{Result: "ok"}, map[string]any{"output": "ok"}},
		{"Object", llm.ToolResult{Result: map[string]any{"a": 1}}, map[string]any{"a": float64(1)}},
		{"Struct", llm.ToolResult{Result: point{X: 2}}, map[string]any{"x": float64(2)}},
		{"Array", llm.ToolResult{Result: []int{1, 2}}, map[string]any{"output": []any{float64(1), float64(2)}}},
		{"Number", llm.ToolResult{Result: 3.5}, map[string]any{"output": 3.5}},
		{"Nil", llm.ToolResult{}, map[string]any{"output": nil}},
		{"Raw", llm.ToolResult{Result: json.RawMessage(`{"r":true}`)}, map[string]any{"r": true}},
		{"Error", llm.ToolResult{Result: "boom", IsError: true}, map[string]any{"error": "boom"}},
		{"ErrorObject", llm.ToolResult{Result: map[string]any{"why": "x"}, IsError: true}, map[string]any{"error": map[string]any{"why": "x"}}},
		{"Unencodable", llm.ToolResult{Result: make(chan int)}, map[string]any{"output": "json: unsupported type: chan int"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, resultObject(c.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelPath(t *testing.T) {
	for in, want := range map[string]string{
		"gemini-2.5-flash":         "/models/gemini-2.5-flash",
		"models/gemini-2.5-flash":  "/models/gemini-2.5-flash",
		"tunedModels/my-model-123": "/tunedModels/my-model-123",
		"odd name?":                "/models/odd%20name%3F",
	} {
		if got, err := modelPath(in); err != nil || got != want {
			t.Errorf("modelPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", " ", "models/", "../x", "a//b"} {
		if _, err := modelPath(bad); err == nil {
			t.Errorf("modelPath(%q) succeeded", bad)
		}
	}
}

func TestDecodeResponse_Parts(t *testing.T) {
	body := `{"candidates":[{"content":{"role":"model","parts":[
		{"thoughtSignature":"sig-alone"},
		{"functionCall":{"name":"lookup","args":[1,2]}},
		{"text":"after the call"},
		{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
		{"executableCode":{"language":"PYTHON","code":"print(1)"}},
		{"functionCall":{"id":"v-2","name":"noargs"}, "thoughtSignature":"sig-call"}
	]},"finishReason":"STOP","finishMessage":"done"}],"responseId":"r","usageMetadata":{"promptTokenCount":3,"toolUsePromptTokenCount":2,"candidatesTokenCount":4,"cachedContentTokenCount":1}}`
	resp, err := decodeResponse([]byte(body), false)
	if err != nil {
		t.Fatalf("decodeResponse: %v", err)
	}
	msg := resp.Message
	wantContent := []llm.ContentBlock{
		llm.TextBlock{Text: ""},
		llm.TextBlock{Text: "after the call"},
		llm.ImageFromBytes([]byte("\x89PNG\r\n\x1a\n"), "image/png"),
	}
	if diff := cmp.Diff(wantContent, msg.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if len(msg.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", msg.ToolCalls)
	}
	if c := msg.ToolCalls[0]; c.Arguments != nil || c.RawArguments != "[1,2]" {
		t.Errorf("non-object arguments decoded as %+v", c)
	}
	if c := msg.ToolCalls[1]; c.ToolCallID != "v-2" || c.Arguments == nil || len(c.Arguments) != 0 {
		t.Errorf("argument-less call decoded as %+v", c)
	}
	wantMeta := map[string]any{
		"responseId": "r", "finishReason": "STOP", "finishMessage": "done",
		"thoughtSignatures": map[string]any{"c0": "sig-alone", "t1": "sig-call"},
		"functionCallIds":   map[string]any{"t1": "v-2"},
		"partOrder":         []any{"c0", "t0", "c1", "c2", "t1"},
		"unsupportedParts":  []any{map[string]any{"executableCode": map[string]any{"language": "PYTHON", "code": "print(1)"}}},
	}
	if diff := cmp.Diff(wantMeta, msg.Metadata.Provider(name)); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(llm.TokenUsage{InputTokens: 5, OutputTokens: 4, TotalTokens: 9, CacheReadTokens: 1}, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	// Sent back, the parts come out in their original order with their
	// signatures; the generated id of the first call is not sent.
	contents, err := convertMessages([]llm.Message{llm.NewUserMessage(llm.Text("q")), msg})
	if err != nil {
		t.Fatalf("convertMessages: %v", err)
	}
	got, _ := json.Marshal(contents[1])
	want := `{"role":"model","parts":[` +
		`{"text":"","thoughtSignature":"sig-alone"},` +
		`{"functionCall":{"name":"lookup","args":{}}},` +
		`{"text":"after the call"},` +
		`{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},` +
		`{"functionCall":{"id":"v-2","name":"noargs","args":{}},"thoughtSignature":"sig-call"}]}`
	if string(got) != want {
		t.Errorf("re-sent content:\n got %s\nwant %s", got, want)
	}
}

func TestOrder(t *testing.T) {
	for _, c := range []struct {
		order  []string
		nc, nt int
		want   []string
	}{
		{nil, 2, 1, []string{"c0", "c1", "t0"}},
		{[]string{"t0", "c0", "c1"}, 2, 1, []string{"t0", "c0", "c1"}},
		{[]string{"t0", "c0"}, 2, 1, []string{"c0", "c1", "t0"}},       // wrong length
		{[]string{"t0", "c0", "c0"}, 2, 1, []string{"c0", "c1", "t0"}}, // duplicate
		{[]string{"t0", "c0", "c9"}, 2, 1, []string{"c0", "c1", "t0"}}, // unknown key
	} {
		if got := (msgMeta{partOrder: c.order}).order(c.nc, c.nt); !cmp.Equal(got, c.want) {
			t.Errorf("order(%v, %d, %d) = %v, want %v", c.order, c.nc, c.nt, got, c.want)
		}
	}
}

// TestMetadataAfterJSON checks that a message whose metadata went through
// the llm JSON form (maps and lists of any) still sends its signatures and
// ids back.
func TestMetadataAfterJSON(t *testing.T) {
	msg := llm.NewAssistantMessage(nil, []llm.ToolCall{{ToolCallID: "fc-1", ToolName: "f", Arguments: map[string]any{}}})
	msg.Metadata = llm.Metadata{name: map[string]any{
		"thoughtSignatures": map[string]string{"t0": "s"},
		"functionCallIds":   map[string]any{"t0": "fc-1"},
		"partOrder":         []string{"t0"},
	}}
	data, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := llm.UnmarshalMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []llm.Message{msg, back} {
		contents, err := convertMessages([]llm.Message{m})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(contents)
		if want := `[{"role":"model","parts":[{"functionCall":{"id":"fc-1","name":"f","args":{}},"thoughtSignature":"s"}]}]`; string(got) != want {
			t.Errorf("got %s\nwant %s", got, want)
		}
	}
}

func seedFiles(f *testing.F, pattern string) {
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files %s: %v", pattern, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
}

func FuzzDecodeResponse(f *testing.F) {
	seedFiles(f, "*.json")
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		resp, err := decodeResponse(data, structured)
		if err != nil {
			if _, ok := err.(*llm.Error); !ok {
				t.Fatalf("error %v is not an *llm.Error", err)
			}
			return
		}
		checkResponse(t, resp)
		// Whatever was decoded can be sent back.
		if _, err := convertMessages([]llm.Message{llm.NewUserMessage(llm.Text("q")), resp.Message}); err != nil {
			t.Fatalf("decoded message cannot be sent back: %v", err)
		}
	})
}

func checkResponse(t *testing.T, resp *llm.Response) {
	t.Helper()
	if resp == nil || resp.Message == nil {
		t.Fatal("no error and no message")
	}
	for _, c := range resp.Message.ToolCalls {
		if c.ToolCallID == "" || c.ToolName == "" {
			t.Fatalf("tool call without id or name: %+v", c)
		}
		if (c.Arguments == nil) == (c.RawArguments == "") {
			t.Fatalf("tool call with both or neither of Arguments and RawArguments: %+v", c)
		}
	}
}

func FuzzDecodeStream(f *testing.F) {
	seedFiles(f, "*.sse")
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		var evs []llm.StreamEvent
		resp, err := decodeStream(bytes.NewReader(data), structured, func(ev llm.StreamEvent) { evs = append(evs, ev) })
		if err != nil {
			if _, ok := err.(*llm.Error); !ok {
				t.Fatalf("error %v is not an *llm.Error", err)
			}
			return
		}
		checkResponse(t, resp)
		checkFraming(t, evs)
		// The stream assembles what generateContent would have returned
		// for the same parts: the events rebuild the message's text.
		var text strings.Builder
		for _, ev := range evs {
			if ev.Type == llm.TextDelta || ev.Type == llm.ObjectDelta {
				text.WriteString(ev.Delta.Text)
			}
		}
		var want strings.Builder
		for _, b := range resp.Message.Content {
			if tb, ok := b.(llm.TextBlock); ok {
				want.WriteString(tb.Text)
			}
		}
		if text.String() != want.String() {
			t.Fatalf("deltas %q, message text %q", text.String(), want.String())
		}
	})
}

// checkFraming verifies the event framing llmtest also checks.
func checkFraming(t *testing.T, evs []llm.StreamEvent) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != llm.MessageStart || evs[len(evs)-1].Type != llm.MessageStop {
		t.Fatalf("stream not framed by message_start/message_stop: %v", evs)
	}
	open := map[int]bool{}
	for _, ev := range evs[1 : len(evs)-1] {
		switch ev.Type {
		case llm.ContentBlockStart:
			if open[ev.Index] {
				t.Fatalf("block %d started twice", ev.Index)
			}
			open[ev.Index] = true
		case llm.ContentBlockStop:
			if !open[ev.Index] {
				t.Fatalf("block %d stopped but not open", ev.Index)
			}
			delete(open, ev.Index)
		case llm.MessageStart, llm.MessageStop:
			t.Fatalf("%s inside the message", ev.Type)
		default:
			if !open[ev.Index] {
				t.Fatalf("%s outside block %d", ev.Type, ev.Index)
			}
		}
	}
	if len(open) != 0 {
		t.Fatalf("blocks left open: %v", open)
	}
}

func FuzzParseError(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "error_*.json"))
	for _, name := range files {
		b, _ := os.ReadFile(name)
		f.Add(429, b)
	}
	f.Add(500, []byte(`[{"error":{"code":500}}]`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		msg, code := parseError(status, body)
		if len(msg) > 1100 {
			t.Fatalf("message of %d bytes", len(msg))
		}
		if code != "" && !isCode(code) {
			t.Fatalf("unknown code %q", code)
		}
	})
}

func isCode(c llm.ErrorCode) bool {
	for _, k := range llm.ErrorCodes {
		if k == c {
			return true
		}
	}
	return false
}

func TestRetryDelayFromRetryInfo(t *testing.T) {
	body := []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"slow down","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"23.5s"}]}}`)
	if got := retryDelay(body); got != 23500*time.Millisecond {
		t.Errorf("retryDelay = %v, want 23.5s", got)
	}
	for _, b := range []string{`{}`, `not json`, `{"error":{"code":429,"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"soon"}]}}`} {
		if got := retryDelay([]byte(b)); got != 0 {
			t.Errorf("retryDelay(%s) = %v", b, got)
		}
	}
}
