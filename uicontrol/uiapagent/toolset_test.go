package uiapagent_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapagent"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/agentry-dev/agentry/workflow"
)

func toolCall(name string, args map[string]any) scripted.Step {
	return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: name, Arguments: args}}}
}

// newAgent is an agent on m whose tools are the toolset's, per step.
func newAgent(t *testing.T, m *scripted.Model, ts *uiapagent.Toolset, mw ...agent.Middleware) *agent.Agent {
	t.Helper()
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}, Toolsets: []agent.Toolset{ts}, Middleware: mw})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A scripted model drives the store workflow, served as a UIAP app, in
// one run, through the app's actions as tools, which follow
// capabilities.changed from one step to the next.
func TestToolsetDrivesTheStoreWorkflowApp(t *testing.T) {
	engine, a := storeSession(t)
	ctx := t.Context()
	ts, err := uiapagent.NewToolset(ctx, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := scripted.NewT(t,
		toolCall("search_products", map[string]any{"query": "beans"}),
		toolCall("transition_cart", nil),
		toolCall("add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 1}),
		toolCall("transition_checkout", nil), // fails: user.email missing
		toolCall("state_input", map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}}),
		toolCall("transition_checkout", nil),
		toolCall("place_order", map[string]any{"payment_method": "card"}),
		scripted.Step{Text: "Ordered."},
	)
	res, err := newAgent(t, m, ts).Generate(ctx, llm.Text("Buy espresso beans."), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Turn.Text() != "Ordered." {
		t.Errorf("final text %q", res.Turn.Text())
	}
	offered := func(i int) []string {
		var names []string
		for _, tool := range m.Requests()[i].Tools {
			names = append(names, tool.Name)
		}
		sort.Strings(names)
		return names
	}
	want := map[int][]string{
		0: {"get_product", "search_products", "state_input", "transition_cart"},
		2: {"add_to_cart", "remove_from_cart", "state_input", "transition_browse", "transition_checkout", "view_cart"},
		6: {"place_order", "state_input", "transition_cart", "transition_complete", "view_cart"},
	}
	for i, w := range want {
		if got := offered(i); !slices.Equal(got, w) {
			t.Errorf("request %d offered %v, want %v", i, got, w)
		}
	}
	var failure string
	for _, msg := range res.State.Messages() {
		if tr, ok := msg.(*llm.ToolResultMessage); ok && tr.Results[0].IsError {
			failure = llm.ResultText(tr.Results[0].Result)
		}
	}
	if !strings.Contains(failure, "state_conflict") || !strings.Contains(failure, "user.email") {
		t.Errorf("failure shown to the model: %q", failure)
	}
	if s := uaipSession(t, engine, a); s.Stage != "checkout" || s.State["order.id"] == nil {
		t.Errorf("UAIP session at %s with state %v", s.Stage, s.State)
	}
	// Each tool declares the tier its action's risk maps to: the store's
	// tasks declare theirs (view_cart read_only, place_order
	// write_high_risk); transitions and the state input are medium risk.
	tools, err := ts.Tools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[string]govern.Tier{}
	for _, tool := range tools {
		if d, ok := govern.DeclarationOf(tool); ok {
			tiers[tool.Name] = d.Tier
		}
	}
	wantTiers := map[string]govern.Tier{"view_cart": govern.ReadOnly, "place_order": govern.WriteHighRisk,
		"state_input": govern.WriteLowRisk, "transition_cart": govern.WriteLowRisk, "transition_complete": govern.WriteLowRisk}
	if !maps.Equal(tiers, wantTiers) {
		t.Errorf("tools declare %v, want %v", tiers, wantTiers)
	}
}

// A governed agent gates the tools by the tiers their actions' risks map
// to: a read (read_only), cart changes, the state input and transitions
// (write_low_risk) run, but place_order is write_high_risk and a UIAP
// action carries no rollback, so the governor refuses it before it
// reaches the app.
func TestGovernedAgentGatesTheTools(t *testing.T) {
	engine, a := storeSession(t)
	ctx := t.Context()
	ts, err := uiapagent.NewToolset(ctx, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := govern.New(ctx, &govern.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := scripted.NewT(t,
		toolCall("search_products", map[string]any{"query": "beans"}),
		toolCall("transition_cart", nil),
		toolCall("add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 1}),
		toolCall("state_input", map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}}),
		toolCall("transition_checkout", nil),
		toolCall("place_order", map[string]any{"payment_method": "card"}),
		scripted.Step{Text: "Could not order it."},
	)
	j := g.Journal()
	res, err := newAgent(t, m, ts, g.Middleware(&govern.AgentOptions{})).Generate(ctx, llm.Text("Order espresso beans."), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Turn.Text() != "Could not order it." {
		t.Errorf("final text %q", res.Turn.Text())
	}
	var failed []bool // per tool result, in order
	refusal := ""
	for _, msg := range res.State.Messages() {
		if tr, ok := msg.(*llm.ToolResultMessage); ok {
			failed = append(failed, tr.Results[0].IsError)
			if tr.Results[0].IsError {
				refusal = llm.ResultText(tr.Results[0].Result)
			}
		}
	}
	if want := []bool{false, false, false, false, false, true}; !slices.Equal(failed, want) {
		t.Errorf("tool results failed %v, want %v (only place_order refused)", failed, want)
	}
	if !strings.Contains(refusal, "write_high_risk") {
		t.Errorf("place_order was not refused by the governor: %q", refusal)
	}
	s := uaipSession(t, engine, a)
	if cart, _ := s.State["cart"].(map[string]any); s.Stage != "checkout" || cart["SKU-001"] != 1.0 || s.State["order.id"] != nil {
		t.Errorf("UAIP session at %s with state %v: the lower tiers should have run, place_order not", s.Stage, s.State)
	}
	// One governed run across the app's screens, delivered once.
	starts, delivered := 0, 0
	for r, err := range j.Records(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Kind == recordkind.RunStarted:
			starts++
		case r.Kind == recordkind.Transition && r.To == govern.Deliver:
			delivered++
		}
	}
	if starts != 1 || delivered != 1 {
		t.Errorf("%d runs started, %d delivered; want 1 and 1", starts, delivered)
	}
}

// storeSession serves the store workflow as a UIAP app and connects an
// agent that confirms what the app's policy asks it to.
func storeSession(t *testing.T) (*workflow.Engine, *uicontrol.Agent) {
	t.Helper()
	engine := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := engine.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	srv, err := uiapworkflow.New(engine, "store", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	appT, agentT := uicontrol.Pair()
	go srv.Serve(context.Background(), appT)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := uicontrol.Connect(ctx, agentT, &uicontrol.AgentOptions{
		Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}},
		Confirm:    func(context.Context, *uicontrol.ActionConfirmation) (bool, error) { return true, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return engine, a
}

// uaipSession returns the UAIP session behind a's UIAP session.
func uaipSession(t *testing.T, engine *workflow.Engine, a *uicontrol.Agent) *workflow.Session {
	t.Helper()
	var info uiapworkflow.Info
	if err := json.Unmarshal(a.Capabilities().Capabilities.Extra["workflow"], &info); err != nil {
		t.Fatal(err)
	}
	s, err := engine.Session(context.Background(), info.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestToolsetReadsTheDocument(t *testing.T) {
	app := uicontrol.NewApp(nil)
	doc, err := uicontrol.DecodeCapabilityDocument([]byte(`{
		"actions": [
			{"id": "cart.view", "description": "Show the cart.", "readOnly": true, "risk": "low"},
			{"id": "cart.add", "args": {"type": "object", "properties": {"sku": {"type": "string"}}}},
			{"id": "pay", "name": "Pay"},
			{"id": "cart:add"},
			{"description": "no id: skipped"}
		],
		"risk": {"cart.add": "low", "pay": {"level": "HIGH"}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := app.SetCapabilities(ctx, doc, ""); err != nil {
		t.Fatal(err)
	}
	appT, agentT := uicontrol.Pair()
	go app.Serve(ctx, appT)
	defer app.Close()
	a, err := uicontrol.Connect(ctx, agentT, &uicontrol.AgentOptions{CapabilityDelivery: uicontrol.DeliveryDeferred})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ts, err := uiapagent.NewToolset(ctx, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		name, desc string
		tier       govern.Tier
		props      bool
	}
	tools, err := ts.Tools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var gots []got
	for _, tool := range tools {
		d, _ := govern.DeclarationOf(tool)
		_, props := tool.Parameters["properties"].(map[string]any)
		gots = append(gots, got{tool.Name, tool.Description, d.Tier, props})
	}
	want := []got{
		{"cart_view", "Show the cart. Risk: low.", govern.ReadOnly, true},
		{"cart_add", "Run the app's action cart.add. Risk: low.", govern.WriteLowRisk, true},
		{"pay", "Pay. Risk: high.", govern.WriteHighRisk, true},
		{"cart_add_2", "Run the app's action cart:add.", govern.WriteHighRisk, true},
	}
	if !slices.Equal(gots, want) {
		t.Errorf("tools\n got %+v\nwant %+v", gots, want)
	}

	// The app replaces its document: the next resolution follows it.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a safety net: the change comes at once
	defer cancel()
	changes := a.Changes(wctx)
	doc.Actions = []byte(`[{"id":"pay"}]`)
	if _, err := app.SetCapabilities(ctx, doc, "fewer"); err != nil {
		t.Fatal(err)
	}
	for _, err := range changes {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if tools, err := ts.Tools(ctx, nil); err != nil || len(tools) != 1 || tools[0].Name != "pay" {
		t.Errorf("after capabilities.changed: %d tools (%v), want pay alone", len(tools), err)
	}
}
