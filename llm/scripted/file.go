package scripted

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentry-dev/agentry/llm"
	"go.yaml.in/yaml/v3"
)

// maxScriptSize bounds a script file.
const maxScriptSize = 16 << 20

// fileScript is the script file format (YAML, or JSON, which is YAML):
//
//	steps:
//	  - reasoning: "Six times seven."        # optional
//	    text: "Let me calculate."
//	    tool_calls:
//	      - {id: call_1, name: calculate, arguments: {expression: "6*7"}}
//	  - text: "42"
//	  - data: {name: Ada, age: 36}           # structured output
//	  - error: {code: RATE_LIMITED, message: "slow down"}
//	    delay: 250ms
type fileScript struct {
	Steps []fileStep `yaml:"steps"`
}

type fileStep struct {
	Reasoning  string         `yaml:"reasoning"`
	Text       string         `yaml:"text"`
	Chunks     []string       `yaml:"chunks"`
	ToolCalls  []fileToolCall `yaml:"tool_calls"`
	Data       any            `yaml:"data"`
	Error      *fileError     `yaml:"error"`
	Delay      string         `yaml:"delay"`
	ChunkDelay string         `yaml:"chunk_delay"`
	Usage      *fileUsage     `yaml:"usage"`
}

type fileToolCall struct {
	ID        string         `yaml:"id"`
	Name      string         `yaml:"name"`
	Arguments map[string]any `yaml:"arguments"`
}

type fileError struct {
	Code    string `yaml:"code"`
	Message string `yaml:"message"`
}

type fileUsage struct {
	Input  int `yaml:"input"`
	Output int `yaml:"output"`
}

// Load reads a script, YAML or JSON, and returns a model that plays it:
//
//	steps:
//	  - reasoning: "Six times seven."          # optional
//	    text: "Let me calculate."
//	    tool_calls:
//	      - {id: call_1, name: calculate, arguments: {expression: "6*7"}}
//	  - text: "42"
//	  - data: {name: Ada, age: 36}             # structured output
//	  - error: {code: RATE_LIMITED, message: "slow down"}
//	    delay: 250ms                           # also chunk_delay
//	    usage: {input: 10, output: 2}
//
// Unknown fields are errors.
func Load(r io.Reader) (*Model, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxScriptSize+1))
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	if len(data) > maxScriptSize {
		return nil, fmt.Errorf("scripted: script exceeds %d bytes", maxScriptSize)
	}
	var f fileScript
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("scripted: the script is empty")
		}
		return nil, fmt.Errorf("scripted: %w", err)
	}
	if len(f.Steps) == 0 {
		return nil, errors.New("scripted: the script has no steps")
	}
	steps := make([]Step, len(f.Steps))
	for i, fs := range f.Steps {
		s, err := fs.step()
		if err != nil {
			return nil, fmt.Errorf("scripted: steps[%d]: %w", i, err)
		}
		steps[i] = s
	}
	return New(steps...), nil
}

func (fs fileStep) step() (Step, error) {
	s := Step{Reasoning: fs.Reasoning, Text: fs.Text, Chunks: fs.Chunks, Data: normalizeYAML(fs.Data)}
	for j, c := range fs.ToolCalls {
		if c.Name == "" {
			return Step{}, fmt.Errorf("tool_calls[%d]: name missing", j)
		}
		args, _ := normalizeYAML(c.Arguments).(map[string]any)
		if args == nil {
			args = map[string]any{}
		}
		s.ToolCalls = append(s.ToolCalls, llm.ToolCall{ToolCallID: c.ID, ToolName: c.Name, Arguments: args})
	}
	if fs.Error != nil {
		code := llm.ErrorCode(fs.Error.Code)
		known := false
		for _, c := range llm.ErrorCodes {
			known = known || c == code
		}
		if !known {
			return Step{}, fmt.Errorf("error.code %q is not a UPP error code", fs.Error.Code)
		}
		s.Err = llm.NewError(code, providerName, fs.Error.Message, nil)
	}
	var err error
	if s.Delay, err = duration(fs.Delay); err != nil {
		return Step{}, fmt.Errorf("delay: %w", err)
	}
	if s.ChunkDelay, err = duration(fs.ChunkDelay); err != nil {
		return Step{}, fmt.Errorf("chunk_delay: %w", err)
	}
	if fs.Usage != nil {
		s.Usage = llm.TokenUsage{InputTokens: fs.Usage.Input, OutputTokens: fs.Usage.Output}
	}
	if s.Text == "" && s.Reasoning == "" && len(s.ToolCalls) == 0 && s.Data == nil && s.Err == nil {
		return Step{}, errors.New("empty step: give text, tool_calls, data or error")
	}
	return s, nil
}

func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		err = errors.New("negative")
	}
	return d, err
}

// normalizeYAML turns YAML's decoded values into JSON's: map[string]any
// objects (YAML may produce map[any]any for odd keys), float64 numbers.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeYAML(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeYAML(e)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return v
}
