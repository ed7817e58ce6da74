package builtin_test

import (
	"context"
	"errors"
	"maps"
	"net/http/httptest"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/uaipagent"
)

// Every task of the store declares its tier; only place_order, which
// pays, is write_high_risk, with cancel_order as its rollback.
func TestStoreDeclaresRiskTiers(t *testing.T) {
	want := map[string]string{
		"search_products": "read_only", "get_product": "read_only", "view_cart": "read_only",
		"order_status": "read_only", "add_to_cart": "write_low_risk", "remove_from_cart": "write_low_risk",
		"cancel_order": "write_low_risk", "place_order": "write_high_risk",
	}
	got := map[string]string{}
	for _, st := range builtin.Store().Stages {
		for name, tk := range st.Tasks {
			got[name] = tk.Risk
			if rb := tk.Rollback; (name == "place_order") != (rb != nil) || (rb != nil && rb.Task != "cancel_order") {
				t.Errorf("%s: rollback %+v", name, rb)
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("tiers %v, want %v", got, want)
	}
}

func storeServer(t *testing.T) *workflow.Client {
	t.Helper()
	e := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := e.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(e, nil))
	t.Cleanup(srv.Close)
	return workflow.NewClient(srv.URL, nil)
}

func toolCall(name string, args map[string]any) scripted.Step {
	return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: name, Arguments: args}}}
}

// A governed agent shops without approvals, and place_order waits for a
// human's approval (its rollback is declared) instead of being refused.
// The rollback action the governor recorded cancels a placed order, and
// running it again changes nothing.
func TestGovernedAgentOrdersWithApprovalAndRollback(t *testing.T) {
	ctx := context.Background()
	c := storeServer(t)
	g, err := govern.New(ctx, &govern.Options{
		Rollbacks: map[string]govern.RollbackFunc{uaipagent.RollbackType: uaipagent.RollbackHandler(c)}})
	if err != nil {
		t.Fatal(err)
	}
	m := scripted.NewT(t,
		toolCall("search_products", map[string]any{"query": "beans"}),
		toolCall(uaipagent.ToolTransition, map[string]any{"stage": "cart"}),
		toolCall("add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 1}),
		toolCall(uaipagent.ToolStateInput, map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}}),
		toolCall(uaipagent.ToolTransition, map[string]any{"stage": "checkout"}),
		toolCall("place_order", map[string]any{"payment_method": "card"}),
	)
	ts, err := uaipagent.NewToolset(ctx, c, "store")
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}, Toolsets: []agent.Toolset{ts},
		Middleware: []agent.Middleware{g.Middleware(&govern.AgentOptions{})}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Generate(ctx, llm.Text("Order espresso beans."), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) || ge.ApprovalID == "" {
		t.Fatalf("place_order: %v, want a pending approval", err)
	}
	req, err := g.Approval(ctx, ge.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if req.Tool != "place_order" || req.Tier != govern.WriteHighRisk || req.Rollback == nil || req.Rollback.Type != uaipagent.RollbackType {
		t.Fatalf("approval request %+v", req)
	}
	s, err := c.Session(ctx, ts.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	if s.Stage != "checkout" || s.State["cart"] == nil || s.State["order.id"] != nil {
		t.Fatalf("session at %s with state %v: shopping should have run, place_order not", s.Stage, s.State)
	}

	// The order placed, the recorded rollback cancels it, idempotently.
	r, err := c.Call(ctx, ts.SessionID(), "store", "place_order", map[string]any{"payment_method": "card"})
	if err != nil {
		t.Fatal(err)
	}
	order := r.State["order.id"]
	rollback := uaipagent.RollbackHandler(c)
	for range 2 {
		if err := rollback(ctx, *req.Rollback); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		s, err := c.Session(ctx, ts.SessionID())
		if err != nil {
			t.Fatal(err)
		}
		if order == nil || s.State["order.id"] != nil || s.State["order.cancelled"] != order {
			t.Errorf("after the rollback of %v: state %v", order, s.State)
		}
	}
	if _, err := c.Call(ctx, ts.SessionID(), "store", "place_order", map[string]any{"payment_method": "invoice"}); err != nil {
		t.Errorf("ordering again after the cancellation: %v", err)
	}
}
