package workflow_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/workflow"
)

// refundsWorkflow has a read-only lookup, a low-risk refund whose rollback
// is the compensating cancel_refund task, and a high-risk close_account
// (no rollback declared on the server).
func refundsWorkflow(events *[]string, mu *sync.Mutex) *workflow.Workflow {
	record := func(s string) {
		mu.Lock()
		*events = append(*events, s)
		mu.Unlock()
	}
	task := func(name string, risk govern.Tier, rb *workflow.TaskRollback, run func(args map[string]any) any) *workflow.Task {
		return &workflow.Task{Name: name, Description: name, Risk: risk, Rollback: rb,
			Parameters: llm.Schema{"type": "object"},
			Run: func(ctx context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
				return &workflow.TaskResponse{Result: run(req.Args)}, nil
			}}
	}
	cancel := task("cancel_refund", govern.WriteLowRisk, nil, func(a map[string]any) any {
		record("cancel " + a["order_id"].(string) + " key=" + a["key"].(string))
		return "cancelled"
	})
	return &workflow.Workflow{Name: "refunds", InitialStage: "review",
		Stages: map[string]*workflow.Stage{
			"review": {Tasks: map[string]*workflow.Task{
				"lookup_order": task("lookup_order", govern.ReadOnly, nil, func(a map[string]any) any { return map[string]any{"order": a["order_id"], "paid": 30} }),
			}},
			"act": {Tasks: map[string]*workflow.Task{
				"refund": task("refund", govern.WriteLowRisk, &workflow.TaskRollback{Task: "cancel_refund", Args: map[string]string{"order_id": "order_id", "key": "$call_id"}},
					func(a map[string]any) any { record("refund " + a["order_id"].(string)); return "refunded" }),
				"cancel_refund": cancel,
				"close_account": task("close_account", govern.WriteHighRisk, nil, func(a map[string]any) any { record("close"); return "closed" }),
			}},
			"done": {Tasks: map[string]*workflow.Task{}},
		},
		Transitions: map[string][]string{"review": {"act"}, "act": {"done"}},
	}
}

func TestGovernedAgentDrivesWorkflowAndRollsBackThroughCompensation(t *testing.T) {
	var events []string
	var mu sync.Mutex
	e := workflow.NewEngine(newMapStore(), nil)
	if err := e.Register(refundsWorkflow(&events, &mu)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(e, nil))
	t.Cleanup(srv.Close)
	c := workflow.NewClient(srv.URL, nil)
	ctx := context.Background()

	j := govern.NewMemoryJournal()
	g := newGovernor(t, govern.Options{Journal: j, MaxRepairs: -1,
		Rollbacks: map[string]govern.RollbackFunc{workflow.RollbackType: workflow.RollbackHandler(c)},
		Verifiers: []govern.Verifier{govern.CheckVerifier("never", func(context.Context, govern.VerifyInput) []govern.Check {
			return []govern.Check{{CheckID: "NEVER", Result: govern.CheckFail}}
		})},
		Classes: []govern.TaskClass{{Name: "refund", RequiredVerifiers: []string{"never"}}},
	})
	m := scripted.NewT(t,
		call("lookup_order", map[string]any{"order_id": "o-7"}),
		call(workflow.ToolTransition, map[string]any{"stage": "act"}),
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "refund-1", ToolName: "refund", Arguments: map[string]any{"order_id": "o-7"}}}},
		call(workflow.ToolTransition, map[string]any{"stage": "done"}),
		scripted.Step{Text: "Refunded o-7."},
	)
	ts, err := workflow.NewToolset(ctx, c, "refunds")
	if err != nil {
		t.Fatal(err)
	}
	opts := agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()},
		Middleware: []agent.Middleware{g.Middleware(govern.AgentOptions{TaskClass: "refund"})}}
	_, err = workflow.RunAgent(ctx, ts, opts, llm.Text("Refund order o-7."), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain || !errors.Is(err, govern.VerificationFailed) {
		t.Fatalf("want fail_safe, got %v", err)
	}
	checkWire(t, ge.Envelope)
	// The refund ran once, and its compensation ran in stage "done" with
	// the governed call's ID as idempotency key.
	if want := []string{"refund o-7", "cancel o-7 key=refund-1"}; strings.Join(events, "|") != strings.Join(want, "|") {
		t.Errorf("events = %q, want %q", events, want)
	}
	// One governed run across the three agents RunAgent built.
	starts := 0
	for r, err := range j.Records(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind == govern.KindRunStarted {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("%d runs started, want 1", starts)
	}
}

func TestGovernedAgentRefusesHighRiskTaskWithoutRollback(t *testing.T) {
	var events []string
	var mu sync.Mutex
	e := workflow.NewEngine(newMapStore(), nil)
	if err := e.Register(refundsWorkflow(&events, &mu)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(e, nil))
	t.Cleanup(srv.Close)
	c := workflow.NewClient(srv.URL, nil)
	ctx := context.Background()
	g := newGovernor(t, govern.Options{})
	m := scripted.New(
		call(workflow.ToolTransition, map[string]any{"stage": "act"}),
		call("close_account", map[string]any{}),
		scripted.Step{Text: "Closed."},
	)
	ts, err := workflow.NewToolset(ctx, c, "refunds")
	if err != nil {
		t.Fatal(err)
	}
	opts := agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}, Middleware: []agent.Middleware{g.Middleware(govern.AgentOptions{})}}
	res, err := workflow.RunAgent(ctx, ts, opts, llm.Text("Close the account."), nil)
	// close_account is write_high_risk without a rollback on the server:
	// refused before it could even wait for an approval; the model is told
	// and answers, and nothing reached the service.
	if err != nil {
		t.Fatal(err)
	}
	if env, ok := govern.EnvelopeOf(res.State); ok {
		checkWire(t, env)
	} else {
		t.Error("no envelope in the result state")
	}
	if len(events) != 0 {
		t.Errorf("events = %q", events)
	}
	info, err := c.Workflow(ctx, "refunds")
	if err != nil {
		t.Fatal(err)
	}
	if ti := info.Stages["act"].Tasks["refund"]; ti.RiskTier != "write_low_risk" || ti.Rollback == nil || ti.Rollback.Task != "cancel_refund" {
		t.Errorf("refund task info = %+v", ti)
	}
	if ti := info.Stages["review"].Tasks["lookup_order"]; ti.RiskTier != "read_only" || ti.Rollback != nil {
		t.Errorf("lookup task info = %+v", ti)
	}
}

func TestTaskRollbackValidation(t *testing.T) {
	var events []string
	var mu sync.Mutex
	w := refundsWorkflow(&events, &mu)
	w.Stages["act"].Tasks["refund"].Rollback.Task = "nope"
	w.Stages["review"].Tasks["lookup_order"].Risk = govern.Tier(9)
	err := workflow.NewEngine(newMapStore(), nil).Register(w)
	if err == nil || !strings.Contains(err.Error(), `no stage has a task "nope"`) || !strings.Contains(err.Error(), "invalid risk tier") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadTaskRiskAndRollback(t *testing.T) {
	doc := `
name: w
initial_stage: main
stages:
  main:
    tasks:
      refund:
        description: Refunds.
        risk: write_high_risk
        rollback: {task: cancel, args: {order: order_id, key: $call_id}}
        webhook: {url: "http://127.0.0.1:9/refund"}
      cancel:
        description: Cancels a refund.
        risk: write_low_risk
        webhook: {url: "http://127.0.0.1:9/cancel", idempotent: true}
`
	ws, err := workflow.Load(strings.NewReader(doc), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	refund := ws[0].Stages["main"].Tasks["refund"]
	if refund.Risk != govern.WriteHighRisk || refund.Rollback == nil || refund.Rollback.Task != "cancel" || refund.Rollback.Args["key"] != "$call_id" {
		t.Errorf("refund = %+v %+v", refund, refund.Rollback)
	}
	if err := workflow.NewEngine(newMapStore(), nil).Register(ws[0]); err != nil {
		t.Fatal(err)
	}
}
