package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/google/go-cmp/cmp"
)

// Run checks the provider behind newTarget against the UPP-1.3 behaviour
// the llm package relies on. Each case calls newTarget for a fresh Target.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, k *kit)
	}{
		{"GenerateText", testGenerateText},
		{"StreamText", testStreamText},
		{"History", testHistory},
		{"ParamsPassthrough", testParams},
		{"ToolRoundTrip", func(t *testing.T, k *kit) { testToolRoundTrip(t, k, false) }},
		{"StreamToolRoundTrip", func(t *testing.T, k *kit) { testToolRoundTrip(t, k, true) }},
		{"UnknownTool", testUnknownTool},
		{"StructuredOutput", func(t *testing.T, k *kit) { testStructured(t, k, false) }},
		{"StreamStructuredOutput", func(t *testing.T, k *kit) { testStructured(t, k, true) }},
		{"Reasoning", testReasoning},
		{"ErrorStatus", testErrorStatus},
		{"StreamErrorStatus", testStreamErrorStatus},
		{"RetryAfter", testRetry},
		{"NoRetryByDefault", testNoRetry},
		{"CancelGenerate", testCancelGenerate},
		{"AbortStream", testAbortStream},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, &kit{Target: newTarget(t)})
		})
	}
}

type kit struct{ Target }

func (k *kit) llm(t *testing.T, opts llm.LLMOptions) *llm.LLMInstance {
	t.Helper()
	opts.Model = k.Model
	cfg := k.Config
	if opts.Config.RetryStrategy != nil {
		cfg.RetryStrategy = opts.Config.RetryStrategy
		cfg.RetryAfterMax = opts.Config.RetryAfterMax
	}
	opts.Config = cfg
	if len(k.Params) > 0 {
		p := maps.Clone(k.Params)
		maps.Copy(p, opts.Params)
		opts.Params = p
	}
	inst, err := llm.LLM(&opts)
	if err != nil {
		t.Fatalf("llm.LLM: %v", err)
	}
	return inst
}

func (k *kit) requests(t *testing.T, want int) []Observed {
	t.Helper()
	got := k.Requests()
	if len(got) != want {
		t.Fatalf("the provider made %d request(s), want %d", len(got), want)
	}
	return got
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func collect(t *testing.T, s *llm.StreamResult) ([]llm.StreamEvent, *llm.Turn, error) {
	t.Helper()
	var evs []llm.StreamEvent
	var streamErr error
	for ev, err := range s.Events() {
		if err != nil {
			streamErr = err
			break
		}
		evs = append(evs, ev)
	}
	turn, err := s.Turn()
	if (err == nil) != (streamErr == nil) {
		t.Errorf("Events ended with error %v but Turn returned %v", streamErr, err)
	}
	return evs, turn, err
}

// checkEvents verifies the framing rules every provider's stream follows.
func checkEvents(t *testing.T, evs []llm.StreamEvent) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("stream produced no events")
	}
	open := map[int]bool{}
	started, stopped := false, false
	for i, ev := range evs {
		switch ev.Type {
		case llm.MessageStart:
			started = true
		case llm.MessageStop:
			stopped = true
		case llm.ContentBlockStart:
			open[ev.Index] = true
		case llm.ContentBlockStop:
			if !open[ev.Index] {
				t.Errorf("event %d: content_block_stop for block %d that was not started", i, ev.Index)
			}
			delete(open, ev.Index)
		case llm.TextDelta, llm.ReasoningDelta, llm.ObjectDelta, llm.ToolCallDelta:
			if !started {
				t.Errorf("event %d: %s before message_start", i, ev.Type)
			}
			if !open[ev.Index] {
				t.Errorf("event %d: %s for block %d outside content_block_start/stop", i, ev.Type, ev.Index)
			}
			if stopped {
				t.Errorf("event %d: %s after message_stop", i, ev.Type)
			}
		}
	}
	if !started || !stopped {
		t.Errorf("stream lacks message_start (%v) or message_stop (%v)", started, stopped)
	}
	if len(open) > 0 {
		t.Errorf("content blocks never stopped: %v", open)
	}
}

func concat(evs []llm.StreamEvent, typ llm.StreamEventType) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == typ {
			b.WriteString(ev.Delta.Text)
		}
	}
	return b.String()
}

func testGenerateText(t *testing.T, k *kit) {
	k.Script(Reply{Text: "Hello from the kit.", InputTokens: 11, OutputTokens: 5})
	inst := k.llm(t, llm.LLMOptions{System: "You are terse."})
	turn, err := inst.Generate(ctxFor(t), nil, llm.Text("Say hello"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := turn.Text(); got != "Hello from the kit." {
		t.Errorf("text = %q, want %q", got, "Hello from the kit.")
	}
	checkTurnShape(t, turn, 1, 2)
	if u := turn.Usage; u.InputTokens != 11 || u.OutputTokens != 5 || u.TotalTokens != 16 || len(u.Cycles) != 1 {
		t.Errorf("usage = %+v, want 11 in, 5 out, 16 total, 1 cycle", u)
	}
	if turn.Data != nil {
		t.Errorf("Data = %v without a Structure", turn.Data)
	}
	obs := k.requests(t, 1)[0]
	if obs.Stream {
		t.Error("Generate sent a streaming request")
	}
	if obs.System != "You are terse." {
		t.Errorf("system = %q", obs.System)
	}
	if diff := cmp.Diff([]string{"Say hello"}, obs.UserTexts); diff != "" {
		t.Errorf("user texts (-want +got):\n%s", diff)
	}
}

func checkTurnShape(t *testing.T, turn *llm.Turn, cycles, messages int) {
	t.Helper()
	if turn.Cycles != cycles {
		t.Errorf("cycles = %d, want %d", turn.Cycles, cycles)
	}
	if len(turn.Messages) != messages {
		t.Fatalf("turn has %d messages, want %d", len(turn.Messages), messages)
	}
	if turn.Messages[0].Type() != llm.TypeUser {
		t.Errorf("first message is %s, want the user input", turn.Messages[0].Type())
	}
	if turn.Response == nil || turn.Messages[len(turn.Messages)-1] != llm.Message(turn.Response) {
		t.Error("Response is not the last message")
	}
	for i, m := range turn.Messages {
		if !ids.Valid(m.Info().ID) {
			t.Errorf("message %d id %q is not a UUIDv4", i, m.Info().ID)
		}
		if m.Info().Timestamp.IsZero() {
			t.Errorf("message %d has no timestamp", i)
		}
	}
}

func testStreamText(t *testing.T, k *kit) {
	const text = "One two three, four five six."
	k.Script(Reply{Text: text, InputTokens: 7, OutputTokens: 6})
	inst := k.llm(t, llm.LLMOptions{})
	evs, turn, err := collect(t, inst.Stream(ctxFor(t), nil, llm.Text("Count")))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	checkEvents(t, evs)
	if got := concat(evs, llm.TextDelta); got != text {
		t.Errorf("text deltas = %q, want %q", got, text)
	}
	if turn.Text() != text {
		t.Errorf("turn text = %q, want %q", turn.Text(), text)
	}
	checkTurnShape(t, turn, 1, 2)
	if u := turn.Usage; u.InputTokens != 7 || u.OutputTokens != 6 {
		t.Errorf("usage = %+v, want 7 in, 6 out", u)
	}
	if !k.requests(t, 1)[0].Stream {
		t.Error("Stream sent a non-streaming request")
	}
}

func testHistory(t *testing.T, k *kit) {
	k.Script(Reply{Text: "third"})
	inst := k.llm(t, llm.LLMOptions{})
	history := []llm.Message{
		llm.NewUserMessage(llm.Text("first")),
		llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("answer")}, nil),
	}
	turn, err := inst.Generate(ctxFor(t), history, llm.Text("second"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	checkTurnShape(t, turn, 1, 2)
	obs := k.requests(t, 1)[0]
	if diff := cmp.Diff([]string{"first", "second"}, obs.UserTexts); diff != "" {
		t.Errorf("user texts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"answer"}, obs.AssistantTexts); diff != "" {
		t.Errorf("assistant texts (-want +got):\n%s", diff)
	}
}

func testParams(t *testing.T, k *kit) {
	k.Script(Reply{Text: "ok"})
	inst := k.llm(t, llm.LLMOptions{Params: map[string]any{"x_conformance_marker": "kept-verbatim"}})
	if _, err := inst.Generate(ctxFor(t), nil, llm.Text("hi")); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := k.requests(t, 1)[0].Params["x_conformance_marker"]; got != "kept-verbatim" {
		t.Errorf("params field = %v, want it copied verbatim", got)
	}
}

func kitTools() []llm.Tool {
	return []llm.Tool{
		{Name: "get_weather", Description: "Weather for a city.",
			Parameters: llm.Schema{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}},
			Run: func(_ context.Context, args map[string]any) (any, error) {
				return "sunny in " + args["city"].(string), nil
			}},
		{Name: "get_time", Description: "Current time in a zone.",
			Parameters: llm.Schema{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}},
			Run: func(context.Context, map[string]any) (any, error) {
				return map[string]any{"time": "12:00"}, nil
			}},
	}
}

func testToolRoundTrip(t *testing.T, k *kit, stream bool) {
	k.Script(
		Reply{ToolCalls: []llm.ToolCall{
			{ToolCallID: "call_a", ToolName: "get_weather", Arguments: map[string]any{"city": "Paris"}},
			{ToolCallID: "call_b", ToolName: "get_time", Arguments: map[string]any{"zone": "UTC"}},
		}, InputTokens: 20, OutputTokens: 10},
		Reply{Text: "Sunny, noon.", InputTokens: 40, OutputTokens: 4},
	)
	inst := k.llm(t, llm.LLMOptions{Tools: kitTools()})
	var (
		turn *llm.Turn
		evs  []llm.StreamEvent
		err  error
	)
	if stream {
		evs, turn, err = collect(t, inst.Stream(ctxFor(t), nil, llm.Text("Weather and time?")))
	} else {
		turn, err = inst.Generate(ctxFor(t), nil, llm.Text("Weather and time?"))
	}
	if err != nil {
		t.Fatalf("tool round trip: %v", err)
	}
	checkTurnShape(t, turn, 2, 4)
	asked, ok := turn.Messages[1].(*llm.AssistantMessage)
	if !ok || len(asked.ToolCalls) != 2 {
		t.Fatalf("message 1 = %#v, want an assistant message with 2 tool calls", turn.Messages[1])
	}
	for i, want := range []struct {
		name string
		args map[string]any
	}{{"get_weather", map[string]any{"city": "Paris"}}, {"get_time", map[string]any{"zone": "UTC"}}} {
		c := asked.ToolCalls[i]
		if c.ToolName != want.name || c.ToolCallID == "" {
			t.Errorf("tool call %d = %s (id %q), want %s with an id", i, c.ToolName, c.ToolCallID, want.name)
		}
		if diff := cmp.Diff(want.args, c.Arguments); diff != "" {
			t.Errorf("tool call %d arguments (-want +got):\n%s", i, diff)
		}
	}
	results, ok := turn.Messages[2].(*llm.ToolResultMessage)
	if !ok || len(results.Results) != 2 {
		t.Fatalf("message 2 = %#v, want a tool result message with 2 results", turn.Messages[2])
	}
	for i, r := range results.Results {
		if r.ToolCallID != asked.ToolCalls[i].ToolCallID || r.IsError {
			t.Errorf("result %d = %+v, want the result of call %s", i, r, asked.ToolCalls[i].ToolCallID)
		}
	}
	if len(turn.ToolExecutions) != 2 {
		t.Errorf("%d tool executions, want 2", len(turn.ToolExecutions))
	}
	if turn.Text() != "Sunny, noon." {
		t.Errorf("final text = %q", turn.Text())
	}
	if u := turn.Usage; u.InputTokens != 60 || u.OutputTokens != 14 || len(u.Cycles) != 2 {
		t.Errorf("usage = %+v, want 60 in, 14 out over 2 cycles", u)
	}

	obs := k.requests(t, 2)
	if diff := cmp.Diff([]string{"get_weather", "get_time"}, obs[0].Tools); diff != "" {
		t.Errorf("declared tools (-want +got):\n%s", diff)
	}
	second := obs[1]
	if len(second.ToolResults) != 2 {
		t.Fatalf("second request carried %d tool results, want 2", len(second.ToolResults))
	}
	wantText := []string{"sunny in Paris", `"time":"12:00"`}
	for i, r := range second.ToolResults {
		if r.ToolCallID != "" && r.ToolCallID != asked.ToolCalls[i].ToolCallID {
			t.Errorf("tool result %d sent for call %q, want %q", i, r.ToolCallID, asked.ToolCalls[i].ToolCallID)
		}
		if s, _ := r.Result.(string); !strings.Contains(strings.ReplaceAll(s, " ", ""), strings.ReplaceAll(wantText[i], " ", "")) {
			t.Errorf("tool result %d sent as %q, want it to contain %q", i, r.Result, wantText[i])
		}
	}
	if len(second.ToolCallIDs) > 0 && len(second.ToolCallIDs) != 2 {
		t.Errorf("second request echoed %d tool calls, want 2", len(second.ToolCallIDs))
	}
	if !stream {
		return
	}
	checkEventsPerMessage(t, evs)
	args := map[string]string{}
	names := map[string]string{}
	var starts, ends []string
	for _, ev := range evs {
		switch ev.Type {
		case llm.ToolCallDelta:
			if ev.Delta.ToolCallID == "" {
				t.Errorf("tool_call_delta without a tool call id: %+v", ev)
			}
			args[ev.Delta.ToolCallID] += ev.Delta.ArgumentsJSON
			if ev.Delta.ToolName != "" {
				names[ev.Delta.ToolCallID] = ev.Delta.ToolName
			}
		case llm.ToolExecutionStart:
			starts = append(starts, ev.Delta.ToolCallID)
		case llm.ToolExecutionEnd:
			ends = append(ends, ev.Delta.ToolCallID)
			if ev.Delta.Result == nil || ev.Delta.IsError {
				t.Errorf("tool_execution_end %+v, want a successful result", ev.Delta)
			}
		}
	}
	for _, c := range asked.ToolCalls {
		var got map[string]any
		if err := json.Unmarshal([]byte(args[c.ToolCallID]), &got); err != nil {
			t.Errorf("tool_call_delta fragments for %s = %q: %v", c.ToolCallID, args[c.ToolCallID], err)
		} else if diff := cmp.Diff(c.Arguments, got); diff != "" {
			t.Errorf("streamed arguments for %s (-want +got):\n%s", c.ToolCallID, diff)
		}
		if names[c.ToolCallID] != c.ToolName {
			t.Errorf("streamed tool name for %s = %q, want %q", c.ToolCallID, names[c.ToolCallID], c.ToolName)
		}
	}
	if len(starts) != 2 || len(ends) != 2 {
		t.Errorf("tool execution events: %d starts, %d ends, want 2 each", len(starts), len(ends))
	}
	if got := concat(evs, llm.TextDelta); got != "Sunny, noon." {
		t.Errorf("text deltas = %q", got)
	}
}

// checkEventsPerMessage applies checkEvents to each provider call's part of
// a multi-cycle stream.
func checkEventsPerMessage(t *testing.T, evs []llm.StreamEvent) {
	t.Helper()
	var part []llm.StreamEvent
	for _, ev := range evs {
		switch ev.Type {
		case llm.ToolExecutionStart, llm.ToolExecutionEnd:
			continue
		}
		part = append(part, ev)
		if ev.Type == llm.MessageStop {
			checkEvents(t, part)
			part = nil
		}
	}
	if len(part) > 0 {
		t.Errorf("events after the last message_stop: %v", part)
	}
}

func testUnknownTool(t *testing.T, k *kit) {
	k.Script(
		Reply{ToolCalls: []llm.ToolCall{{ToolCallID: "call_x", ToolName: "no_such_tool", Arguments: map[string]any{}}}},
		Reply{Text: "recovered"},
	)
	inst := k.llm(t, llm.LLMOptions{Tools: kitTools()})
	turn, err := inst.Generate(ctxFor(t), nil, llm.Text("go"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if turn.Text() != "recovered" {
		t.Errorf("text = %q, want the loop to go on", turn.Text())
	}
	obs := k.requests(t, 2)[1]
	if len(obs.ToolResults) != 1 {
		t.Fatalf("second request carried %d tool results, want 1", len(obs.ToolResults))
	}
	if s, _ := obs.ToolResults[0].Result.(string); !strings.Contains(s, "not found") {
		t.Errorf("result sent = %q, want the not-found error", s)
	}
}

func testStructured(t *testing.T, k *kit, stream bool) {
	schema := llm.Schema{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"},
	}, "required": []any{"name", "age"}}
	k.Script(Reply{Object: `{"name":"Ada","age":36}`})
	inst := k.llm(t, llm.LLMOptions{Structure: schema})
	var (
		turn *llm.Turn
		evs  []llm.StreamEvent
		err  error
	)
	if stream {
		evs, turn, err = collect(t, inst.Stream(ctxFor(t), nil, llm.Text("Ada Lovelace, 36")))
	} else {
		turn, err = inst.Generate(ctxFor(t), nil, llm.Text("Ada Lovelace, 36"))
	}
	if err != nil {
		t.Fatalf("structured output: %v", err)
	}
	want := map[string]any{"name": "Ada", "age": float64(36)}
	if diff := cmp.Diff(want, turn.Data); diff != "" {
		t.Errorf("Data (-want +got):\n%s", diff)
	}
	if !k.requests(t, 1)[0].Structured {
		t.Error("the request carried no structured-output schema")
	}
	if stream {
		checkEvents(t, evs)
		var got any
		if err := json.Unmarshal([]byte(concat(evs, llm.ObjectDelta)), &got); err != nil {
			t.Errorf("object_delta fragments do not form JSON: %v", err)
		} else if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("streamed object (-want +got):\n%s", diff)
		}
	}
}

func testReasoning(t *testing.T, k *kit) {
	if !k.Target.Reasoning {
		t.Skip("the target declares no reasoning support")
	}
	k.Script(Reply{Reasoning: "Six times seven.", Text: "42"}, Reply{Reasoning: "Again.", Text: "42 again"}, Reply{Text: "done"})
	inst := k.llm(t, llm.LLMOptions{})
	turn, err := inst.Generate(ctxFor(t), nil, llm.Text("6*7?"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := turn.Response.Reasoning(); got != "Six times seven." {
		t.Errorf("reasoning = %q", got)
	}
	if turn.Text() != "42" {
		t.Errorf("text = %q", turn.Text())
	}
	evs, turn2, err := collect(t, inst.Stream(ctxFor(t), nil, llm.Text("again")))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	checkEvents(t, evs)
	if got := concat(evs, llm.ReasoningDelta); got != "Again." {
		t.Errorf("reasoning deltas = %q", got)
	}
	if got := turn2.Response.Reasoning(); got != "Again." {
		t.Errorf("streamed reasoning = %q", got)
	}
	// The reasoning turn goes back as history.
	if _, err := inst.Generate(ctxFor(t), turn.Messages, llm.Text("thanks")); err != nil {
		t.Fatalf("Generate with reasoning history: %v", err)
	}
	obs := k.requests(t, 3)[2]
	if diff := cmp.Diff([]string{"42"}, obs.AssistantTexts); diff != "" {
		t.Errorf("assistant history (-want +got):\n%s", diff)
	}
}

func asError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return e
}

func testErrorStatus(t *testing.T, k *kit) {
	if k.NoHTTP {
		t.Skip("in-process target")
	}
	for _, c := range []struct {
		status     int
		code       llm.ErrorCode
		retryAfter time.Duration
	}{
		{401, llm.AuthenticationFailed, 0},
		{404, llm.ModelNotFound, 0},
		{429, llm.RateLimited, 2 * time.Second},
		{500, llm.ProviderError, 0},
	} {
		k.Script(Reply{Status: c.status, ErrorMessage: "kit error message", RetryAfter: c.retryAfter})
		_, err := k.llm(t, llm.LLMOptions{}).Generate(ctxFor(t), nil, llm.Text("hi"))
		if err == nil {
			t.Fatalf("HTTP %d: no error", c.status)
		}
		e := asError(t, err)
		if e.Code != c.code || !errors.Is(err, c.code) {
			t.Errorf("HTTP %d: code %s, want %s", c.status, e.Code, c.code)
		}
		if e.StatusCode != c.status {
			t.Errorf("HTTP %d: StatusCode %d", c.status, e.StatusCode)
		}
		if e.Provider != k.Model.Provider.Name() || e.Modality != llm.ModalityLLM {
			t.Errorf("HTTP %d: provider %q modality %q", c.status, e.Provider, e.Modality)
		}
		if e.RetryAfter != c.retryAfter {
			t.Errorf("HTTP %d: RetryAfter %v, want %v", c.status, e.RetryAfter, c.retryAfter)
		}
		if !strings.Contains(e.Error(), "kit error message") {
			t.Errorf("HTTP %d: error %q lacks the vendor's message", c.status, e.Error())
		}
	}
}

func testStreamErrorStatus(t *testing.T, k *kit) {
	if k.NoHTTP {
		t.Skip("in-process target")
	}
	k.Script(Reply{Status: 500, ErrorMessage: "boom"})
	_, _, err := collect(t, k.llm(t, llm.LLMOptions{}).Stream(ctxFor(t), nil, llm.Text("hi")))
	if e := asError(t, err); e.Code != llm.ProviderError {
		t.Errorf("code %s, want PROVIDER_ERROR", e.Code)
	}
}

func testRetry(t *testing.T, k *kit) {
	if k.NoHTTP {
		t.Skip("in-process target")
	}
	k.Script(Reply{Status: 429, ErrorMessage: "slow down", RetryAfter: time.Second}, Reply{Text: "after retry"})
	inst := k.llm(t, llm.LLMOptions{Config: llm.ProviderConfig{
		RetryStrategy: llm.LinearBackoff{MaxRetries: 2, Delay: time.Millisecond},
		RetryAfterMax: 5 * time.Millisecond,
	}})
	turn, err := inst.Generate(ctxFor(t), nil, llm.Text("hi"))
	if err != nil {
		t.Fatalf("Generate with retry: %v", err)
	}
	if turn.Text() != "after retry" {
		t.Errorf("text = %q", turn.Text())
	}
	k.requests(t, 2)
}

func testNoRetry(t *testing.T, k *kit) {
	if k.NoHTTP {
		t.Skip("in-process target")
	}
	k.Script(Reply{Status: 503, ErrorMessage: "unavailable"})
	_, err := k.llm(t, llm.LLMOptions{}).Generate(ctxFor(t), nil, llm.Text("hi"))
	if e := asError(t, err); e.Code != llm.ProviderError {
		t.Errorf("code %s, want PROVIDER_ERROR", e.Code)
	}
	k.requests(t, 1)
}

func waitRequests(t *testing.T, k *kit, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(k.Requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the request never arrived")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func testCancelGenerate(t *testing.T, k *kit) {
	k.Script(Reply{Hang: true})
	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() {
		_, err := k.llm(t, llm.LLMOptions{}).Generate(ctx, nil, llm.Text("hi"))
		done <- err
	}()
	waitRequests(t, k, 1)
	cancel()
	select {
	case err := <-done:
		if e := asError(t, err); e.Code != llm.Cancelled {
			t.Errorf("code %s, want CANCELLED", e.Code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Generate did not return after cancellation")
	}
}

func testAbortStream(t *testing.T, k *kit) {
	k.Script(Reply{Hang: true})
	s := k.llm(t, llm.LLMOptions{}).Stream(ctxFor(t), nil, llm.Text("hi"))
	done := make(chan error, 1)
	go func() {
		_, err := s.Turn()
		done <- err
	}()
	waitRequests(t, k, 1)
	s.Abort()
	select {
	case err := <-done:
		if e := asError(t, err); e.Code != llm.Cancelled {
			t.Errorf("code %s, want CANCELLED", e.Code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Turn did not return after Abort")
	}
}
