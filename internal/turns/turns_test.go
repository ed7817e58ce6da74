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

// Merge's usage is what adding the turns' usages with TokenUsage.Add
// gives, the per-call breakdown included (nil when no turn has one), and
// shares no array with the turns.
func TestMergeUsageIsTheSumOfTheTurns(t *testing.T) {
	usage := func(in int, cycles []llm.CycleUsage) *llm.Turn {
		return &llm.Turn{Usage: llm.TokenUsage{InputTokens: in, OutputTokens: 2 * in, TotalTokens: 3 * in, CacheReadTokens: 1, Cycles: cycles}}
	}
	c := func(in ...int) []llm.CycleUsage {
		out := []llm.CycleUsage{}
		for _, n := range in {
			out = append(out, llm.CycleUsage{InputTokens: n, OutputTokens: 2 * n})
		}
		return out
	}
	tests := []struct {
		name  string
		turns []*llm.Turn
	}{
		{"none", nil},
		{"no breakdowns", []*llm.Turn{usage(1, nil), usage(2, nil)}},
		{"one breakdown after none", []*llm.Turn{usage(1, nil), nil, usage(2, c(2))}},
		{"an empty breakdown", []*llm.Turn{usage(1, nil), usage(2, c())}},
		{"breakdowns", []*llm.Turn{usage(1, c(1)), usage(2, c(2, 3)), usage(4, c(4))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want llm.TokenUsage
			for _, x := range tt.turns {
				if x != nil {
					want = want.Add(x.Usage)
				}
			}
			got := Merge(nil, tt.turns...).Usage
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("usage (-Add +Merge):\n%s", diff)
			}
			if (want.Cycles == nil) != (got.Cycles == nil) {
				t.Errorf("breakdown nil: %v, want %v", got.Cycles == nil, want.Cycles == nil)
			}
			for _, x := range tt.turns {
				if x != nil && len(x.Usage.Cycles) > 0 && len(got.Cycles) > 0 && &x.Usage.Cycles[0] == &got.Cycles[0] {
					t.Error("the merged breakdown shares a turn's array")
				}
			}
		})
	}
}
