package agent_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixedIDs makes ids and times deterministic for golden files.
type fixedIDs struct{ n int }

func (f *fixedIDs) NewID() string {
	f.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", f.n)
}
func (f *fixedIDs) Now() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }

func sampleState() *agent.State {
	user := llm.NewUserMessage(llm.Text("Plan a trip"), llm.ImageFromBytes([]byte{1, 2, 3}, "image/png"))
	asst := llm.NewAssistantMessage([]llm.ContentBlock{llm.ReasoningBlock{Text: "Check the weather."}, llm.Text("Checking.")},
		[]llm.ToolCall{{ToolCallID: "call_1", ToolName: "weather", Arguments: map[string]any{"city": "Oslo"}}})
	asst.Metadata = llm.Metadata{"anthropic": map[string]any{"stop_reason": "tool_use"}}
	res := llm.NewToolResultMessage([]llm.ToolResult{{ToolCallID: "call_1", Result: map[string]any{"temp": 4.0}}})
	usage := llm.TokenUsage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
	return agent.Initial().WithMessages(user, asst, res).WithStep(2).WithMetadata("agentId", "a").WithMetadata("n", 3.0).
		WithReasoning("Check the weather.").
		WithPlan([]agent.PlanStep{{ID: "s1", Description: "get weather", Tool: "weather", DependsOn: []string{}, Status: agent.PlanCompleted},
			{ID: "s2", Description: "book", DependsOn: []string{"s1"}, Status: agent.PlanPending}}).
		WithSubagentTrace(agent.SubagentTrace{SubagentID: "sub-1", SubagentType: "research", ParentToolCallID: "call_9", Prompt: "p",
			StartTime: time.UnixMilli(1793527200000).UTC(), EndTime: time.UnixMilli(1793527201500).UTC(), Success: true, Result: "r",
			ToolExecutions: []agent.ToolExecutionTrace{{ToolName: "t", ToolCallID: "c", Arguments: map[string]any{}, Result: "ok", Duration: 12}},
			Usage:          &usage})
}

func TestUAP_12_1_StateJSONRoundTrip(t *testing.T) {
	restore := ids.Set(&fixedIDs{})
	s := sampleState()
	restore()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	const path = "testdata/state.golden.json"
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, b, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), string(b)); diff != "" {
		t.Errorf("AgentStateJSON (-golden +got):\n%s", diff)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	for _, k := range []string{"version", "id", "messages", "step", "metadata", "reasoning", "plan", "subagentTraces"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	if raw["version"] != "1.1.0" {
		t.Errorf("version %v", raw["version"])
	}
	back, err := agent.FromJSON(want)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.MarshalIndent(back, "", "  ")
	if !bytes.Equal(append(again, '\n'), want) {
		t.Error("decode + encode is not the identity")
	}
	if diff := cmp.Diff(s.Messages(), back.Messages()); diff != "" {
		t.Errorf("messages (ids, timestamps, bytes) (-want +got):\n%s", diff)
	}
}

func TestUAP_12_1_FromJSONReadsTheTypeScriptForm(t *testing.T) {
	src := `{"version":"1.0.0","id":"3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e","step":1,"metadata":{"agentId":"x"},"reasoning":[],
	"messages":[
	  {"role":"user","content":[{"type":"text","text":"hi"}]},
	  {"role":"user","content":"plain string"},
	  {"role":"assistant","content":{"content":[{"type":"text","text":"calling"}],"toolCalls":[{"toolCallId":"c1","toolName":"t","arguments":{"a":1}}]},"metadata":{"openai":{"id":"r"}}},
	  {"role":"tool_result","content":[{"toolCallId":"c1","result":"ok"}]}
	],
	"plan":[{"id":"a","description":"d","dependsOn":[],"status":"completed"}]}`
	s, err := agent.FromJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:hi", "user:plain string", "assistant:calling", "tool_result:ok"}
	if diff := cmp.Diff(want, types(s)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	for i, m := range s.Messages() {
		if !ids.Valid(m.Info().ID) || m.Info().Timestamp.IsZero() {
			t.Errorf("message %d got no id/timestamp", i)
		}
	}
	a := s.Messages()[2].(*llm.AssistantMessage)
	if a.ToolCalls[0].Arguments["a"] != 1.0 || a.Info().Metadata.Provider("openai")["id"] != "r" {
		t.Errorf("assistant %+v", a)
	}
}

func TestUAP_15_3_FromJSONValidates(t *testing.T) {
	good := func(mut func(map[string]any)) string {
		m := map[string]any{"version": "1.1.0", "id": "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e", "messages": []any{}, "step": 0, "metadata": map[string]any{}, "reasoning": []any{}}
		mut(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := map[string]string{
		"version":       good(func(m map[string]any) { m["version"] = "2.0.0" }),
		"id":            good(func(m map[string]any) { m["id"] = "not-a-uuid" }),
		"no step":       good(func(m map[string]any) { delete(m, "step") }),
		"negative step": good(func(m map[string]any) { m["step"] = -1 }),
		"no metadata":   good(func(m map[string]any) { delete(m, "metadata") }),
		"no messages":   good(func(m map[string]any) { delete(m, "messages") }),
		"bad message":   good(func(m map[string]any) { m["messages"] = []any{map[string]any{"type": "user"}} }),
		"bad role":      good(func(m map[string]any) { m["messages"] = []any{map[string]any{"role": "system", "content": "x"}} }),
		"plan dup":      good(func(m map[string]any) { m["plan"] = []any{planJSON("a", nil), planJSON("a", nil)} }),
		"plan dangling": good(func(m map[string]any) { m["plan"] = []any{planJSON("a", []any{"b"})} }),
		"plan status": good(func(m map[string]any) {
			m["plan"] = []any{map[string]any{"id": "a", "description": "d", "dependsOn": []any{}, "status": "done"}}
		}),
		"trace no id": good(func(m map[string]any) { m["subagentTraces"] = []any{map[string]any{"subagentType": "x"}} }),
		"trailing":    good(func(map[string]any) {}) + " {}",
		"not json":    "{",
	}
	for name, src := range cases {
		if _, err := agent.FromJSON([]byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := agent.FromJSON([]byte(good(func(map[string]any) {}))); err != nil {
		t.Errorf("valid minimal state rejected: %v", err)
	}
}

func planJSON(id string, deps []any) map[string]any {
	if deps == nil {
		deps = []any{}
	}
	return map[string]any{"id": id, "description": "d", "dependsOn": deps, "status": "pending"}
}
