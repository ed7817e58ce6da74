package execution_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

var researchSchema = llm.MustSchema(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)

// researcher is a sub-agent that uses the echo tool once, then answers.
func researcher(t *testing.T) *agent.Agent {
	m := scripted.NewFunc(func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Type() == llm.TypeToolResult {
			return scripted.Step{Text: "found: " + last.Text()}, nil
		}
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "sub-1", ToolName: "echo", Arguments: map[string]any{"v": last.Text()}}}}, nil
	})
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref(), Tools: []llm.Tool{echo()}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestUAP_8_1_SubagentSchemaIsExplicit(t *testing.T) {
	if _, err := agent.SubagentTool(researcher(t), &agent.SubagentOptions{Name: "research", Description: "d"}); err == nil {
		t.Error("a sub-agent tool without a schema was created")
	}
}

func TestUAP_8_4_8_5_SubagentEventsAndTracesInEveryStrategy(t *testing.T) {
	callSub := scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "parent-1", ToolName: "research", Arguments: map[string]any{"query": "go iterators"}}}}
	strategies := map[string]func() (llm.ModelReference, agent.ExecutionStrategy){
		"loop": func() (llm.ModelReference, agent.ExecutionStrategy) {
			return scripted.New(callSub, scripted.Step{Text: "done"}).Ref(), execution.Loop(&execution.LoopOptions{})
		},
		"react": func() (llm.ModelReference, agent.ExecutionStrategy) {
			return scripted.New(scripted.Step{Text: "delegate"}, callSub, scripted.Step{Text: "ok"}, scripted.Step{Text: "done"}).Ref(), execution.ReAct(&execution.ReActOptions{})
		},
		"plan": func() (llm.ModelReference, agent.ExecutionStrategy) {
			pm := &planModel{plans: []any{planOf([3]string{"r", "call research", ""})}}
			m := scripted.NewFunc(func(ctx context.Context, req *llm.Request) (scripted.Step, error) {
				s, err := pm.reply(ctx, req)
				for i := range s.ToolCalls {
					s.ToolCalls[i].Arguments = map[string]any{"query": "go iterators"}
				}
				return s, err
			})
			return m.Ref(), mustPlan(&execution.PlanOptions{})
		},
	}
	for name, b := range strategies {
		for _, streaming := range []bool{false, true} {
			tool, err := agent.SubagentTool(researcher(t), &agent.SubagentOptions{Name: "research", Description: "Researches a question.", Parameters: researchSchema})
			if err != nil {
				t.Fatal(err)
			}
			ref, strategy := b()
			parent := newAgent(t, ref, strategy, agent.Options{LLMOptions: llm.LLMOptions{Tools: []llm.Tool{tool}}})
			res, evs, err := run(parent, streaming, llm.Text("research go iterators"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			traces := res.State.SubagentTraces()
			if len(traces) != 1 {
				t.Fatalf("%s streaming=%v: %d traces", name, streaming, len(traces))
			}
			tr := traces[0]
			if !tr.Success || tr.SubagentType != "research" || tr.Prompt != "go iterators" || tr.Result != "found: go iterators" ||
				len(tr.ToolExecutions) != 1 || tr.Usage == nil || tr.EndTime.Before(tr.StartTime) || tr.ParentToolCallID == "" {
				t.Errorf("%s: trace %+v", name, tr)
			}
			// The trace survives serialization (checkpoint recovery).
			b, _ := res.State.MarshalJSON()
			back, err := agent.FromJSON(b)
			if err != nil || len(back.SubagentTraces()) != 1 || back.SubagentTraces()[0].Result != tr.Result {
				t.Errorf("%s: trace lost in JSON: %v", name, err)
			}
			if !streaming {
				continue
			}
			var kinds []string
			inner := 0
			for _, e := range evs {
				if e.Source != agent.SourceUAP || !strings.HasPrefix(string(e.UAP.Type), "subagent_") {
					continue
				}
				kinds = append(kinds, string(e.UAP.Type))
				if e.UAP.Data["subagentId"] != tr.SubagentID {
					t.Errorf("%s: event for subagent %v", name, e.UAP.Data["subagentId"])
				}
				if e.UAP.Type == agent.EventSubagentEvent {
					inner++
					if _, ok := e.UAP.Data["event"].(agent.Event); !ok {
						t.Errorf("%s: subagent_event without the forwarded event", name)
					}
				}
			}
			if len(kinds) < 3 || kinds[0] != "subagent_start" || kinds[len(kinds)-1] != "subagent_end" || inner == 0 {
				t.Errorf("%s: subagent events %v", name, kinds)
			}
		}
	}
}
