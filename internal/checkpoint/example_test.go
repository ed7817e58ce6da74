package checkpoint_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/checkpoint"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// An agent checkpointing into a directory, and a second agent resuming
// the session after the first stopped mid-run (say, the process died).
func ExampleFile() {
	dir, _ := os.MkdirTemp("", "checkpoints")
	defer os.RemoveAll(dir)
	store, err := checkpoint.File(dir)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lookup := llm.Tool{Name: "lookup", Run: func(context.Context, map[string]any) (any, error) { return "4 °C", nil }}
	call := scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "c1", ToolName: "lookup", Arguments: map[string]any{}}}}

	// The first run stops after its first step (here: its model fails).
	first, _ := agent.New(&agent.Options{
		LLMOptions:  llm.LLMOptions{Model: scripted.New(call, scripted.Step{Err: fmt.Errorf("crash")}).Ref(), Tools: []llm.Tool{lookup}},
		Checkpoints: store, SessionID: "oslo-weather",
	})
	first.Generate(ctx, llm.Text("How cold is Oslo?"), nil)
	first.FlushCheckpoints(ctx)
	meta, _ := store.LoadMetadata(ctx, "oslo-weather")
	fmt.Println("checkpoint at step", meta.Step)

	second, _ := agent.New(&agent.Options{
		LLMOptions:  llm.LLMOptions{Model: scripted.New(scripted.Step{Text: "It is 4 °C in Oslo."}).Ref(), Tools: []llm.Tool{lookup}},
		Checkpoints: store,
	})
	res, err := second.Resume(ctx, "oslo-weather")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Turn.Text(), "— step", res.State.Step())
	// Output:
	// checkpoint at step 1
	// It is 4 °C in Oslo. — step 2
}
