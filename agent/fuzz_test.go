package agent_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
)

// fuzzSeedState is a state using every part of AgentStateJSON (UAP-1.1
// §12.1).
func fuzzSeedState() *agent.State {
	user := llm.NewUserMessage(llm.Text("hi <there> & \u2028"), llm.ImageFromBytes([]byte{0, 1, 2, 0xff}, "image/png"),
		llm.DocumentFromText("doc", "title"), llm.AudioFromBytes([]byte{9, 8}, "audio/wav"))
	user.Metadata = llm.Metadata{"openai": map[string]any{"k": []any{1.5, "x", nil, true}}}
	asst := llm.NewAssistantMessage([]llm.ContentBlock{llm.ReasoningBlock{Text: "think"}, llm.Text("calling")},
		[]llm.ToolCall{{ToolCallID: "c1", ToolName: "t", Arguments: map[string]any{"a": 1.0, "b": map[string]any{"c": "d"}}},
			{ToolCallID: "c2", ToolName: "t", RawArguments: "{not json"}})
	res := llm.NewToolResultMessage([]llm.ToolResult{{ToolCallID: "c1", Result: map[string]any{"ok": true}}, {ToolCallID: "c2", Result: "bad", IsError: true}})
	start := ids.Now()
	return agent.Initial().WithMessages(user, asst, res, llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("done")}, nil)).
		WithStep(2).WithMetadata(agent.MetadataAgentID, ids.New()).WithMetadata("n", 1e21).WithMetadata("nested", map[string]any{"x": []any{}}).
		WithReasoning("r1").WithReasoning("").
		WithPlan([]agent.PlanStep{{ID: "a", Description: "first", Tool: "t", Status: agent.PlanCompleted},
			{ID: "b", Description: "second", DependsOn: []string{"a"}, Status: agent.PlanPending}}).
		WithSubagentTrace(agent.SubagentTrace{SubagentID: ids.New(), SubagentType: "sub", ParentToolCallID: "c1", Prompt: "p",
			StartTime: start, EndTime: start.Add(time.Second), Success: false, Error: "boom",
			ToolExecutions: []agent.ToolExecutionTrace{{ToolName: "t", Arguments: map[string]any{}, Result: "r", IsError: true, Duration: 3}},
			Usage:          &llm.TokenUsage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}})
}

var fuzzStateSeeds = []string{
	`{"version":"1.1.0","id":"0c6d3f43-52a4-4b8e-9d6e-6c1f0e7b8a21","messages":[],"step":0,"metadata":{},"reasoning":[]}`,
	`{"version":"1.0.0","id":"0c6d3f43-52a4-4b8e-9d6e-6c1f0e7b8a21","messages":[{"role":"user","content":"What is the weather?"},` +
		`{"role":"assistant","content":{"content":[{"type":"text","text":"Let me check."}],"toolCalls":[{"toolCallId":"call_1","toolName":"weather","arguments":{"city":"Paris"}}]}},` +
		`{"role":"tool_result","content":[{"toolCallId":"call_1","result":{"sky":"sunny"}}]},{"role":"assistant","content":{"content":"Sunny."}}],` +
		`"step":1,"metadata":{"agentId":"x"},"reasoning":[]}`,
	`{"version":"1.1.0","id":"0c6d3f43-52a4-4b8e-9d6e-6c1f0e7b8a21","messages":[],"step":3,"metadata":{"a":null},"reasoning":["x"],` +
		`"plan":[{"id":"1","description":"d","dependsOn":[],"status":"pending"},{"id":"2","description":"e","tool":"t","dependsOn":["1"],"status":"failed"}]}`,
	`{"version":"1.1.0","id":"0c6d3f43-52a4-4b8e-9d6e-6c1f0e7b8a21","messages":[],"step":0,"metadata":{},"plan":[]}`,
	`{"version":"1.1.0","id":"0c6d3f43-52a4-4b8e-9d6e-6c1f0e7b8a21","messages":[],"step":0,"metadata":{},` +
		`"subagentTraces":[{"subagentId":"s","subagentType":"t","parentToolCallId":"c","prompt":"p","startTime":-1,"endTime":9223372036854775807,"success":true}]}`,
	`{"version":"1.1.0","id":"0c6d3f43-52a4-4b8e-9d6e-6c1f0e7b8a21","messages":[{"id":"m","type":"user","timestamp":"2025-01-01T00:00:00.123456789+02:00","content":[{"type":"text","text":"x"}]}],"step":0,"metadata":{}}`,
	`{"version":"2.0.0"}`,
	`null`,
	`{"version":"1.1.0","id":"0c6d3f43-52a4-4b8e-9d6e-6c1f0e7b8a21","messages":[],"step":-1,"metadata":{}}`,
}

// FuzzFromJSON checks agent.FromJSON, which decodes untrusted bytes (a
// checkpoint file, a database row): it never panics, and what it accepts
// encodes, and decodes again to the same JSON.
func FuzzFromJSON(f *testing.F) {
	seed, err := fuzzSeedState().MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	for _, s := range fuzzStateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := agent.FromJSON(data)
		if err != nil {
			if s != nil {
				t.Fatalf("FromJSON returned a state and an error: %v", err)
			}
			return
		}
		j1, err := s.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted state does not encode: %v", err)
		}
		s2, err := agent.FromJSON(j1)
		if err != nil {
			t.Fatalf("re-encoded state is rejected: %v\n%s", err, j1)
		}
		j2, err := s2.MarshalJSON()
		if err != nil {
			t.Fatalf("second encoding: %v", err)
		}
		if !bytes.Equal(j1, j2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", j1, j2)
		}
	})
}

// FuzzCheckpointMetadata checks CheckpointMetadata.UnmarshalJSON (the
// file store's metadata.json): what it accepts encodes, and decodes again
// to the same JSON and the same fields.
func FuzzCheckpointMetadata(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s","checkpointId":"9a7e0d4c-3b2f-4e1a-8c5d-6f7a8b9c0d1e","timestamp":"2025-06-01T12:34:56.789Z","step":1,"agentId":"a"}`,
		`{"sessionId":"s","checkpointId":"9a7e0d4c-3b2f-4e1a-8c5d-6f7a8b9c0d1e","timestamp":"2025-06-01T12:34:56.123456789+05:30","step":0,"agentId":""}`,
		`{"sessionId":"s","checkpointId":"9a7e0d4c-3b2f-4e1a-8c5d-6f7a8b9c0d1e","timestamp":"0000-01-01T00:00:00Z","step":9007199254740993}`,
		`{"sessionId":"s","checkpointId":"9a7e0d4c-3b2f-4e1a-8c5d-6f7a8b9c0d1e","timestamp":"9999-12-31T23:59:59.999-01:00","step":1}`,
		`{"sessionId":"","checkpointId":"x","timestamp":"","step":-1}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m agent.CheckpointMetadata
		if err := m.UnmarshalJSON(data); err != nil {
			return
		}
		j1, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted metadata does not encode: %v", err)
		}
		var m2 agent.CheckpointMetadata
		if err := m2.UnmarshalJSON(j1); err != nil {
			t.Fatalf("re-encoded metadata is rejected: %v\n%s", err, j1)
		}
		j2, err := m2.MarshalJSON()
		if err != nil || !bytes.Equal(j1, j2) {
			t.Fatalf("encoding is not stable (%v):\n%s\n%s", err, j1, j2)
		}
		if m2.SessionID != m.SessionID || m2.CheckpointID != m.CheckpointID || m2.Step != m.Step || m2.AgentID != m.AgentID ||
			!m2.Timestamp.Equal(m.Timestamp.Truncate(time.Millisecond)) {
			t.Fatalf("fields changed in a round trip: %+v became %+v", m, m2)
		}
	})
}

// FuzzEventJSON checks Event.UnmarshalJSON, which decodes untrusted bytes
// (a remote agent's progress deltas carry events): it never panics, and
// what it accepts encodes, and decodes again to the same JSON.
func FuzzEventJSON(f *testing.F) {
	for _, s := range []string{
		`{"source":"upp","upp":{"type":"text_delta","index":0,"delta":{"text":"hi"}},"unverified":true,"metadata":{"uaicp.request_id":"r","uaicp.streaming":{"chunk_id":"c","is_final":false,"stream_index":3}}}`,
		`{"source":"uap","uap":{"type":"step_end","step":1,"agentId":"a","data":{"phase":"x"}},"metadata":null}`,
		`{"source":"upp","upp":{"type":"image_delta","index":2,"delta":{"data":"AAEC","timestamp":1700000000000}},"unverified":false}`,
		`{"source":"uap","upp":{"type":"text_delta","index":0,"delta":{}}}`,
		`{"source":"upp","upp":{"type":"nope","index":0,"delta":{}}}`,
		`{"source":"uap","uap":{"type":"x","step":0,"agentId":"","data":null},"metadata":{"n":1e400}}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev agent.Event
		if err := ev.UnmarshalJSON(data); err != nil {
			return
		}
		j1, err := ev.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		var ev2 agent.Event
		if err := ev2.UnmarshalJSON(j1); err != nil {
			t.Fatalf("re-encoded event is rejected: %v\n%s", err, j1)
		}
		j2, err := ev2.MarshalJSON()
		if err != nil || !bytes.Equal(j1, j2) {
			t.Fatalf("encoding is not stable (%v):\n%s\n%s", err, j1, j2)
		}
		if ev2.Unverified != ev.Unverified || len(ev2.Metadata) != len(ev.Metadata) {
			t.Fatalf("marking changed in a round trip: %+v became %+v", ev, ev2)
		}
	})
}
