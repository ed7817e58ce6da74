package uaipagent_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"maps"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/governtest"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/uaipagent"
)

// serve serves w over UAIP and returns a client of it.
func serve(t *testing.T, w *workflow.Workflow) *workflow.Client {
	t.Helper()
	e := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := e.Register(w); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(e, nil))
	t.Cleanup(srv.Close)
	return workflow.NewClient(srv.URL, nil)
}

// newGovernor returns a governor for opts whose journal is audited when
// the test ends.
func newGovernor(t testing.TB, opts govern.Options) *govern.Governor {
	t.Helper()
	g, err := govern.New(context.Background(), &opts)
	if err != nil {
		t.Fatalf("govern.New: %v", err)
	}
	governtest.AuditJournal(t, g.Journal())
	return g
}

// newAgent is an agent on m whose tools are the toolset's, per step.
func newAgent(t *testing.T, m *scripted.Model, ts *uaipagent.Toolset, mw ...agent.Middleware) *agent.Agent {
	t.Helper()
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}, Toolsets: []agent.Toolset{ts}, Middleware: mw})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func call(name string, args map[string]any) scripted.Step {
	return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: name, Arguments: args}}}
}

func offered(m *scripted.Model, i int) []string {
	var names []string
	for _, tool := range m.Requests()[i].Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names
}

// An agent walks the store workflow through the toolset, in one run, and
// is only ever offered the current stage's tools.
func TestToolsetDrivesAnAgentThroughTheStages(t *testing.T) {
	c := serve(t, builtin.Store())
	ctx := context.Background()
	m := scripted.NewT(t,
		call("search_products", map[string]any{"query": "beans"}),
		call(uaipagent.ToolTransition, map[string]any{"stage": "cart"}),
		call("add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 1}),
		call(uaipagent.ToolTransition, map[string]any{"stage": "checkout"}), // fails: prerequisites
		call(uaipagent.ToolStateInput, map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}}),
		call(uaipagent.ToolTransition, map[string]any{"stage": "checkout"}),
		call("place_order", map[string]any{"payment_method": "invoice"}),
		scripted.Step{Text: "Ordered."},
	)
	ts, err := uaipagent.NewToolset(ctx, c, "store")
	if err != nil {
		t.Fatal(err)
	}
	res, err := newAgent(t, m, ts).Generate(ctx, llm.Text("Buy espresso beans."), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Turn.Text() != "Ordered." || ts.Stage() != "checkout" {
		t.Errorf("text %q, stage %s", res.Turn.Text(), ts.Stage())
	}
	want := map[int][]string{
		0: {"get_product", "search_products", uaipagent.ToolStateInput, uaipagent.ToolTransition},
		2: {"add_to_cart", "remove_from_cart", uaipagent.ToolStateInput, uaipagent.ToolTransition, "view_cart"},
		6: {"place_order", uaipagent.ToolStateInput, uaipagent.ToolTransition, "view_cart"},
	}
	for i, w := range want {
		sort.Strings(w)
		if got := offered(m, i); !slices.Equal(got, w) {
			t.Errorf("request %d offered %v, want %v", i, got, w)
		}
	}
	// The failed transition reached the model with the missing keys.
	var failure string
	for _, msg := range res.State.Messages() {
		if tr, ok := msg.(*llm.ToolResultMessage); ok && tr.Results[0].IsError {
			failure = llm.ResultText(tr.Results[0].Result)
		}
	}
	if !strings.Contains(failure, "user.email") || !strings.Contains(failure, uaipagent.ToolStateInput) {
		t.Errorf("failure shown to the model: %q", failure)
	}
	s, _ := c.Session(ctx, ts.SessionID())
	if s.State["order.id"] == nil {
		t.Errorf("order not placed: %+v", s.State)
	}
}

// Each tool declares its task's tier (the bridge's own tools
// write_low_risk); AttachToolset picks a session up where it stands.
func TestToolsetDeclaresTiersAndAttaches(t *testing.T) {
	c := serve(t, builtin.Store())
	ctx := context.Background()
	ts, err := uaipagent.NewToolset(ctx, c, "store")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Transition(ctx, ts.SessionID(), "store", "cart"); err != nil {
		t.Fatal(err)
	}
	attached, err := uaipagent.AttachToolset(ctx, c, ts.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	tools, err := attached.Tools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[string]govern.Tier{}
	for _, tool := range tools {
		d, _ := govern.DeclarationOf(tool)
		tiers[tool.Name] = d.Tier
	}
	want := map[string]govern.Tier{"add_to_cart": govern.WriteLowRisk, "remove_from_cart": govern.WriteLowRisk, "view_cart": govern.ReadOnly,
		uaipagent.ToolTransition: govern.WriteLowRisk, uaipagent.ToolStateInput: govern.WriteLowRisk}
	if attached.Stage() != "cart" || !maps.Equal(tiers, want) {
		t.Errorf("attached at %s with tiers %v, want cart and %v", attached.Stage(), tiers, want)
	}
}

// refundsWorkflow has a read-only lookup, a low-risk refund whose rollback
// is the compensating cancel_refund task, and a high-risk close_account
// (no rollback declared on the server).
func refundsWorkflow(events *[]string, mu *sync.Mutex) *workflow.Workflow {
	record := func(s string) {
		mu.Lock()
		*events = append(*events, s)
		mu.Unlock()
	}
	task := func(name, risk string, rb *workflow.TaskRollback, run func(args map[string]any) any) *workflow.Task {
		return &workflow.Task{Name: name, Description: name, Risk: risk, Rollback: rb,
			Parameters: workflow.Schema{"type": "object"},
			Run: func(ctx context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
				return &workflow.TaskResponse{Result: run(req.Args)}, nil
			}}
	}
	cancel := task("cancel_refund", workflow.RiskWriteLow, nil, func(a map[string]any) any {
		record("cancel " + a["order_id"].(string) + " key=" + a["key"].(string))
		return "cancelled"
	})
	return &workflow.Workflow{Name: "refunds", InitialStage: "review",
		Stages: map[string]*workflow.Stage{
			"review": {Tasks: map[string]*workflow.Task{
				"lookup_order": task("lookup_order", workflow.RiskReadOnly, nil, func(a map[string]any) any { return map[string]any{"order": a["order_id"], "paid": 30} }),
			}},
			"act": {Tasks: map[string]*workflow.Task{
				"refund": task("refund", workflow.RiskWriteLow, &workflow.TaskRollback{Task: "cancel_refund", Args: map[string]string{"order_id": "order_id", "key": "$call_id"}},
					func(a map[string]any) any { record("refund " + a["order_id"].(string)); return "refunded" }),
				"cancel_refund": cancel,
				"close_account": task("close_account", workflow.RiskWriteHigh, nil, func(a map[string]any) any { record("close"); return "closed" }),
			}},
			"done": {Tasks: map[string]*workflow.Task{}},
		},
		Transitions: map[string][]string{"review": {"act"}, "act": {"done"}},
	}
}

// A governed agent drives the workflow through three stages in one
// governed run, verified once at its end; the verification fails, and the
// run's write is rolled back through the compensating task, called in
// stage "done" with the governed call's ID as idempotency key.
func TestGovernedAgentDrivesWorkflowAndRollsBackThroughCompensation(t *testing.T) {
	var events []string
	var mu sync.Mutex
	c := serve(t, refundsWorkflow(&events, &mu))
	ctx := context.Background()

	j := govern.NewMemoryJournal()
	g := newGovernor(t, govern.Options{Journal: j, MaxRepairs: -1,
		Rollbacks: map[string]govern.RollbackFunc{uaipagent.RollbackType: uaipagent.RollbackHandler(c)},
		Verifiers: []govern.Verifier{govern.CheckVerifier("never", func(context.Context, govern.VerifyInput) []govern.Check {
			return []govern.Check{{CheckID: "NEVER", Result: govern.CheckFail}}
		})},
		Classes: []govern.TaskClass{{Name: "refund", RequiredVerifiers: []string{"never"}}},
	})
	m := scripted.NewT(t,
		call("lookup_order", map[string]any{"order_id": "o-7"}),
		call(uaipagent.ToolTransition, map[string]any{"stage": "act"}),
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "refund-1", ToolName: "refund", Arguments: map[string]any{"order_id": "o-7"}}}},
		call(uaipagent.ToolTransition, map[string]any{"stage": "done"}),
		scripted.Step{Text: "Refunded o-7."},
	)
	ts, err := uaipagent.NewToolset(ctx, c, "refunds")
	if err != nil {
		t.Fatal(err)
	}
	_, err = newAgent(t, m, ts, g.Middleware(&govern.AgentOptions{TaskClass: "refund"})).Generate(ctx, llm.Text("Refund order o-7."), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain || !errors.Is(err, govern.VerificationFailed) {
		t.Fatalf("want fail_safe, got %v", err)
	}
	governtest.CheckWire(t, ge.Envelope)
	if want := []string{"refund o-7", "cancel o-7 key=refund-1"}; strings.Join(events, "|") != strings.Join(want, "|") {
		t.Errorf("events = %q, want %q", events, want)
	}
	// One governed run across the three stages, verified once.
	starts, verifications := 0, 0
	for r, err := range j.Records(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Kind == recordkind.RunStarted:
			starts++
		case r.Kind == recordkind.Transition && r.To == govern.Verify:
			verifications++
		}
	}
	if starts != 1 || verifications != 1 {
		t.Errorf("%d runs started, %d verifications; want 1 and 1", starts, verifications)
	}
}

// close_account is write_high_risk without a rollback on the server: the
// governor refuses it before it could even wait for an approval; the
// model is told and answers, and nothing reaches the service.
func TestGovernedAgentRefusesHighRiskTaskWithoutRollback(t *testing.T) {
	var events []string
	var mu sync.Mutex
	c := serve(t, refundsWorkflow(&events, &mu))
	ctx := context.Background()
	g := newGovernor(t, govern.Options{})
	m := scripted.New(
		call(uaipagent.ToolTransition, map[string]any{"stage": "act"}),
		call("close_account", map[string]any{}),
		scripted.Step{Text: "Closed."},
	)
	ts, err := uaipagent.NewToolset(ctx, c, "refunds")
	if err != nil {
		t.Fatal(err)
	}
	res, err := newAgent(t, m, ts, g.Middleware(&govern.AgentOptions{})).Generate(ctx, llm.Text("Close the account."), nil)
	if err != nil {
		t.Fatal(err)
	}
	if env, ok := govern.EnvelopeOf(res.State); ok {
		governtest.CheckWire(t, env)
	} else {
		t.Error("no envelope in the result state")
	}
	if len(events) != 0 {
		t.Errorf("events = %q", events)
	}
}

// A governed agent pauses at place_order (write_high_risk, with its
// rollback declared) until a human approves; ResumeAgent then redoes the
// call with the tool the toolset offers for the paused state — the
// checkout stage's place_order — which runs once, and the run delivers.
func TestGovernedAgentResumesAtTheStageItPausedIn(t *testing.T) {
	ctx := context.Background()
	c := serve(t, builtin.Store())
	keys := newApprover(t)
	g := newGovernor(t, govern.Options{Keyring: keys.ring,
		Rollbacks: map[string]govern.RollbackFunc{uaipagent.RollbackType: uaipagent.RollbackHandler(c)}})
	m := scripted.NewT(t,
		call(uaipagent.ToolTransition, map[string]any{"stage": "cart"}),
		call("add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 1}),
		call(uaipagent.ToolStateInput, map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}}),
		call(uaipagent.ToolTransition, map[string]any{"stage": "checkout"}),
		call("place_order", map[string]any{"payment_method": "card"}),
		scripted.Step{Text: "Ordered."},
	)
	ts, err := uaipagent.NewToolset(ctx, c, "store")
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, m, ts, g.Middleware(&govern.AgentOptions{}))
	_, err = a.Generate(ctx, llm.Text("Order espresso beans."), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) || ge.ApprovalID == "" {
		t.Fatalf("place_order: %v, want a pending approval", err)
	}
	keys.approve(t, g, ge.ApprovalID)
	res, err := govern.ResumeAgent(ctx, g, a, ge.Envelope.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if env, ok := govern.EnvelopeOf(res.State); !ok || env.Outcome != govern.Success || res.Turn.Text() != "Ordered." {
		t.Fatalf("resumed run: %q, envelope %+v", res.Turn.Text(), env)
	}
	s, err := c.Session(ctx, ts.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	if s.Stage != "checkout" || s.State["order.id"] == nil {
		t.Errorf("session at %s with state %v: the order should be placed", s.Stage, s.State)
	}
}

// approver is a human approver's key, trusted by a keyring.
type approver struct {
	ring *govern.Keyring
	priv ed25519.PrivateKey
}

func newApprover(t *testing.T) *approver {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	ring := govern.NewKeyring()
	if _, err := ring.Add("alice", pub); err != nil {
		t.Fatal(err)
	}
	return &approver{ring: ring, priv: priv}
}

// approve signs a token for the approval and decides it.
func (a *approver) approve(t *testing.T, g *govern.Governor, id string) {
	t.Helper()
	ctx := context.Background()
	req, err := g.Approval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := govern.SignApproval(a.priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "jti-" + id,
		IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(ctx, id, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
		t.Fatal(err)
	}
}
