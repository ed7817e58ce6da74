package turns

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/llm"
)

func TestMerge(t *testing.T) {
	in := llm.NewUserMessage(llm.Text("go"))
	r1 := llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("a")}, nil)
	r2 := llm.NewAssistantMessage([]llm.ContentBlock{llm.Text("b")}, nil)
	t1 := &llm.Turn{Messages: []llm.Message{in, r1}, Response: r1, Cycles: 1,
		Usage: llm.TokenUsage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}, Data: "first"}
	t2 := &llm.Turn{Messages: []llm.Message{r2}, Response: r2, Cycles: 2,
		Usage: llm.TokenUsage{InputTokens: 10, OutputTokens: 20, TotalTokens: 30}}
	tests := []struct {
		name  string
		input llm.Message
		turns []*llm.Turn
		want  []llm.Message
	}{
		{"input not repeated", in, []*llm.Turn{t1, nil, t2}, []llm.Message{in, r1, r2}},
		{"no input", nil, []*llm.Turn{t1, t2}, []llm.Message{in, r1, r2}},
		{"input only", in, nil, []llm.Message{in}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Merge(tt.input, tt.turns...)
			if len(got.Messages) != len(tt.want) {
				t.Fatalf("%d messages, want %d", len(got.Messages), len(tt.want))
			}
			for i := range tt.want {
				if got.Messages[i] != tt.want[i] {
					t.Errorf("message %d is %s, want %s", i, got.Messages[i].Info().ID, tt.want[i].Info().ID)
				}
			}
			if len(tt.turns) == 0 {
				return
			}
			if got.Response != r2 || got.Data != "first" || got.Cycles != 3 {
				t.Errorf("response %v, data %v, cycles %d", got.Response, got.Data, got.Cycles)
			}
			if diff := cmp.Diff(llm.TokenUsage{InputTokens: 11, OutputTokens: 22, TotalTokens: 33}, got.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}
