package workflow_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/workflow"
)

// tieredWorkflow has a read-only lookup, a low-risk refund whose rollback
// is the compensating cancel_refund task, and a high-risk close_account
// without one.
func tieredWorkflow() *workflow.Workflow {
	task := func(name, risk string, rb *workflow.TaskRollback) *workflow.Task {
		return &workflow.Task{Name: name, Description: name, Risk: risk, Rollback: rb,
			Parameters: workflow.Schema{"type": "object"},
			Run: func(context.Context, *workflow.TaskRequest) (*workflow.TaskResponse, error) {
				return &workflow.TaskResponse{Result: name}, nil
			}}
	}
	return &workflow.Workflow{Name: "refunds", InitialStage: "review",
		Stages: map[string]*workflow.Stage{
			"review": {Tasks: map[string]*workflow.Task{"lookup_order": task("lookup_order", workflow.RiskReadOnly, nil)}},
			"act": {Tasks: map[string]*workflow.Task{
				"refund":        task("refund", workflow.RiskWriteLow, &workflow.TaskRollback{Task: "cancel_refund", Args: map[string]string{"order_id": "order_id", "key": "$call_id"}}),
				"cancel_refund": task("cancel_refund", workflow.RiskWriteLow, nil),
				"close_account": task("close_account", workflow.RiskWriteHigh, nil),
				"undeclared":    task("undeclared", "", nil),
			}},
		},
		Transitions: map[string][]string{"review": {"act"}},
	}
}

// A task's declared tier and rollback reach clients in the workflow
// schema as "risk_tier" and "rollback"; an undeclared tier is omitted.
func TestUAICP_5_3_TaskInfoCarriesRiskAndRollback(t *testing.T) {
	e := workflow.NewEngine(newMapStore(), nil)
	if err := e.Register(tieredWorkflow()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(e, nil))
	t.Cleanup(srv.Close)
	info, err := workflow.NewClient(srv.URL, nil).Workflow(context.Background(), "refunds")
	if err != nil {
		t.Fatal(err)
	}
	if ti := info.Stages["act"].Tasks["refund"]; ti.RiskTier != "write_low_risk" || ti.Rollback == nil || ti.Rollback.Task != "cancel_refund" {
		t.Errorf("refund task info = %+v", ti)
	}
	if ti := info.Stages["review"].Tasks["lookup_order"]; ti.RiskTier != "read_only" || ti.Rollback != nil {
		t.Errorf("lookup task info = %+v", ti)
	}
	if ti := info.Stages["act"].Tasks["close_account"]; ti.RiskTier != "write_high_risk" {
		t.Errorf("close_account task info = %+v", ti)
	}
	if ti := info.Stages["act"].Tasks["undeclared"]; ti.RiskTier != "" {
		t.Errorf("undeclared task info = %+v", ti)
	}
}

// Register refuses a rollback naming no task and a tier that is none of
// UAICP's three (the names are case-sensitive).
func TestTaskRollbackValidation(t *testing.T) {
	for _, risk := range []string{"medium", "READ_ONLY", "write_high"} {
		w := tieredWorkflow()
		w.Stages["act"].Tasks["refund"].Rollback.Task = "nope"
		w.Stages["review"].Tasks["lookup_order"].Risk = risk
		err := workflow.NewEngine(newMapStore(), nil).Register(w)
		if err == nil || !strings.Contains(err.Error(), `no stage has a task "nope"`) || !strings.Contains(err.Error(), `unknown risk tier "`+risk+`"`) {
			t.Errorf("risk %q: err = %v", risk, err)
		}
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
	if refund.Risk != workflow.RiskWriteHigh || refund.Rollback == nil || refund.Rollback.Task != "cancel" || refund.Rollback.Args["key"] != "$call_id" {
		t.Errorf("refund = %+v %+v", refund, refund.Rollback)
	}
	if err := workflow.NewEngine(newMapStore(), nil).Register(ws[0]); err != nil {
		t.Fatal(err)
	}
}

// A workflow file's task risk must be one of the three tiers; the error
// points at the field.
func TestLoadRejectsUnknownRiskTier(t *testing.T) {
	doc := `
name: w
initial_stage: main
stages:
  main:
    tasks:
      refund:
        description: Refunds.
        risk: medium
        webhook: {url: "http://127.0.0.1:9/refund"}
`
	_, err := workflow.Load(strings.NewReader(doc), "w.yaml")
	if err == nil || !strings.Contains(err.Error(), "w.yaml:9") || !strings.Contains(err.Error(), "risk") {
		t.Fatalf("err = %v, want one at w.yaml:9 about the risk", err)
	}
}
