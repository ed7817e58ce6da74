package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
)

// version is the UAP version written in AgentStateJSON.
const version = "1.1.0"

// versionTS is the version the TypeScript implementation writes; FromJSON
// reads it too.
const versionTS = "1.0.0"

// MaxStateJSON bounds the size FromJSON accepts.
const MaxStateJSON = 256 << 20

type stateJSON struct {
	Version        string            `json:"version"`
	ID             string            `json:"id"`
	Messages       []json.RawMessage `json:"messages"`
	Step           *int              `json:"step"`
	Metadata       map[string]any    `json:"metadata"`
	Reasoning      []string          `json:"reasoning"`
	Plan           *[]PlanStep       `json:"plan,omitempty"`
	SubagentTraces []SubagentTrace   `json:"subagentTraces,omitempty"`
}

// MarshalJSON writes AgentStateJSON (UAP-1.1 §12.1, toJSON): version 1.1.0,
// messages in UPP MessageJSON form (ids, timestamps and base64 bytes kept),
// reasoning always, plan when set, subagentTraces when not empty.
func (s *State) MarshalJSON() ([]byte, error) {
	id := s.ID()
	if s == nil {
		s = &State{}
	}
	step := s.step
	j := stateJSON{Version: version, ID: id, Step: &step, Metadata: s.metadataOrEmpty(),
		Reasoning: s.reasoning, SubagentTraces: s.traces, Messages: make([]json.RawMessage, 0, len(s.messages))}
	if j.Reasoning == nil {
		j.Reasoning = []string{}
	}
	if s.plan != nil {
		p := s.plan
		j.Plan = &p
	}
	for i, m := range s.messages {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("agent: state message %d: %w", i, err)
		}
		j.Messages = append(j.Messages, b)
	}
	return json.Marshal(j)
}

// FromJSON decodes and validates AgentStateJSON. It accepts versions 1.1.0
// and 1.0.0 and messages in UPP MessageJSON form or in the TypeScript
// implementation's {role, content} form (which carries no ids or
// timestamps: such messages get new ones). It rejects, with an error naming
// the field, anything it cannot trust: an unknown version, a missing or
// non-UUIDv4 id, a negative step, missing metadata, malformed messages, a
// plan with missing, duplicate or dangling step ids or an unknown status,
// traces without ids.
func FromJSON(data []byte) (*State, error) {
	if len(data) > MaxStateJSON {
		return nil, fmt.Errorf("agent: state JSON exceeds %d bytes", MaxStateJSON)
	}
	var j stateJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("agent: state JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("agent: state JSON: trailing data")
	}
	switch {
	case j.Version != version && j.Version != versionTS:
		return nil, fmt.Errorf("agent: state JSON: unsupported version %q (want %s or %s)", j.Version, version, versionTS)
	case !ids.Valid(j.ID):
		return nil, fmt.Errorf("agent: state JSON: id %q is not a UUIDv4", j.ID)
	case j.Step == nil || *j.Step < 0:
		return nil, errors.New("agent: state JSON: step missing or negative")
	case j.Metadata == nil:
		return nil, errors.New("agent: state JSON: metadata missing")
	case j.Messages == nil:
		return nil, errors.New("agent: state JSON: messages missing")
	}
	s := &State{step: *j.Step, metadata: j.Metadata, reasoning: j.Reasoning, traces: j.SubagentTraces}
	s.setID(j.ID)
	s.messages = make([]llm.Message, 0, len(j.Messages))
	for i, raw := range j.Messages {
		m, err := decodeMessage(raw)
		if err != nil {
			return nil, fmt.Errorf("agent: state JSON: messages[%d]: %w", i, err)
		}
		s.messages = append(s.messages, m)
	}
	if j.Plan != nil {
		if err := validatePlan(*j.Plan); err != nil {
			return nil, fmt.Errorf("agent: state JSON: %w", err)
		}
		s.plan = make([]PlanStep, len(*j.Plan))
		for i, p := range *j.Plan {
			s.plan[i] = p.clone()
		}
	}
	for i, t := range s.traces {
		if t.SubagentID == "" {
			return nil, fmt.Errorf("agent: state JSON: subagentTraces[%d]: subagentId missing", i)
		}
	}
	return s, nil
}

// UnmarshalJSON is FromJSON into s.
func (s *State) UnmarshalJSON(data []byte) error {
	v, err := FromJSON(data)
	if err != nil {
		return err
	}
	s.id.Store(v.id.Load())
	s.lazyID = false
	s.messages, s.step, s.metadata, s.reasoning, s.plan, s.traces = v.messages, v.step, v.metadata, v.reasoning, v.plan, v.traces
	return nil
}

func validatePlan(plan []PlanStep) error {
	seen := make(map[string]bool, len(plan))
	for i, p := range plan {
		if p.ID == "" {
			return fmt.Errorf("plan[%d]: id missing", i)
		}
		if seen[p.ID] {
			return fmt.Errorf("plan[%d]: duplicate id %q", i, p.ID)
		}
		seen[p.ID] = true
		switch p.Status {
		case PlanPending, PlanInProgress, PlanCompleted, PlanFailed:
		default:
			return fmt.Errorf("plan[%d]: unknown status %q", i, p.Status)
		}
	}
	for i, p := range plan {
		for _, d := range p.DependsOn {
			if !seen[d] {
				return fmt.Errorf("plan[%d]: depends on unknown step %q", i, d)
			}
		}
	}
	return nil
}

// tsMessage is the TypeScript implementation's message form.
type tsMessage struct {
	Role     string          `json:"role"`
	Content  json.RawMessage `json:"content"`
	Metadata llm.Metadata    `json:"metadata"`
}

func decodeMessage(raw json.RawMessage) (llm.Message, error) {
	var probe struct {
		Type *string `json:"type"`
		Role *string `json:"role"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, err
	}
	if probe.Type != nil || probe.Role == nil {
		return llm.UnmarshalMessage(raw)
	}
	var m tsMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	info := llm.MessageInfo{ID: ids.New(), Timestamp: ids.Now(), Metadata: m.Metadata}
	switch m.Role {
	case "user":
		blocks, err := decodeTSContent(m.Content)
		if err != nil {
			return nil, err
		}
		return &llm.UserMessage{MessageInfo: info, Content: blocks}, nil
	case "assistant":
		var c struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls []llm.ToolCall  `json:"toolCalls"`
		}
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return nil, fmt.Errorf("assistant content: %w", err)
		}
		blocks, err := decodeTSContent(c.Content)
		if err != nil {
			return nil, err
		}
		return &llm.AssistantMessage{MessageInfo: info, Content: blocks, ToolCalls: c.ToolCalls}, nil
	case "tool_result":
		var results []llm.ToolResult
		if err := json.Unmarshal(m.Content, &results); err != nil {
			return nil, fmt.Errorf("tool_result content: %w", err)
		}
		return &llm.ToolResultMessage{MessageInfo: info, Results: results}, nil
	}
	return nil, fmt.Errorf("unknown message role %q", m.Role)
}

// decodeTSContent reads content given as a string or as an array of blocks.
func decodeTSContent(raw json.RawMessage) ([]llm.ContentBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("content missing")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []llm.ContentBlock{llm.Text(s)}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	blocks := make([]llm.ContentBlock, 0, len(items))
	for i, it := range items {
		b, err := llm.UnmarshalBlock(it)
		if err != nil {
			return nil, fmt.Errorf("content[%d]: %w", i, err)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

type traceJSON struct {
	SubagentID       string               `json:"subagentId"`
	SubagentType     string               `json:"subagentType"`
	ParentToolCallID string               `json:"parentToolCallId"`
	Prompt           string               `json:"prompt"`
	StartTime        int64                `json:"startTime"`
	EndTime          int64                `json:"endTime"`
	Success          bool                 `json:"success"`
	Result           string               `json:"result,omitempty"`
	Error            string               `json:"error,omitempty"`
	ToolExecutions   []ToolExecutionTrace `json:"toolExecutions,omitempty"`
	Usage            *llm.TokenUsage      `json:"usage,omitempty"`
}

// MarshalJSON writes SubagentTraceJSON; times are Unix milliseconds.
func (t SubagentTrace) MarshalJSON() ([]byte, error) {
	return json.Marshal(traceJSON{t.SubagentID, t.SubagentType, t.ParentToolCallID, t.Prompt,
		t.StartTime.UnixMilli(), t.EndTime.UnixMilli(), t.Success, t.Result, t.Error, t.ToolExecutions, t.Usage})
}

// UnmarshalJSON reads SubagentTraceJSON.
func (t *SubagentTrace) UnmarshalJSON(data []byte) error {
	var j traceJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*t = SubagentTrace{j.SubagentID, j.SubagentType, j.ParentToolCallID, j.Prompt,
		time.UnixMilli(j.StartTime).UTC(), time.UnixMilli(j.EndTime).UTC(), j.Success, j.Result, j.Error, j.ToolExecutions, j.Usage}
	return nil
}
