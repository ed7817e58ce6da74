package uiapworkflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/agentry-dev/agentry/workflow"
)

func newEngine(t *testing.T) *workflow.Engine {
	t.Helper()
	e := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := e.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	return e
}

func agentOptions() *uicontrol.AgentOptions {
	return &uicontrol.AgentOptions{
		Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}},
		// Only place_order (write_high_risk) is high risk, which the
		// default policy has the agent confirm; the store's other tasks
		// declare lower tiers and run unconfirmed, so any other
		// confirmation is refused (and the call fails).
		Confirm: func(_ context.Context, c *uicontrol.ActionConfirmation) (bool, error) {
			return c.ActionID == "place_order", nil
		},
	}
}

func actionsOf(t *testing.T, doc *uicontrol.CapabilityDocument) map[string]uiapworkflow.Action {
	t.Helper()
	var as []uiapworkflow.Action
	if err := json.Unmarshal(doc.Actions, &as); err != nil {
		t.Fatal(err)
	}
	out := map[string]uiapworkflow.Action{}
	for _, a := range as {
		out[a.ID] = a
	}
	return out
}

func currentState(t *testing.T, doc *uicontrol.CapabilityDocument) string {
	t.Helper()
	var ss []uiapworkflow.State
	if err := json.Unmarshal(doc.States, &ss); err != nil {
		t.Fatal(err)
	}
	cur := ""
	for _, s := range ss {
		if s.Current {
			if cur != "" {
				t.Errorf("two current states: %s, %s", cur, s.ID)
			}
			cur = s.ID
		}
	}
	return cur
}

func call(t *testing.T, a *uicontrol.Agent, id string, args any) json.RawMessage {
	t.Helper()
	r, err := a.CallAction(context.Background(), &uicontrol.ActionRequest{ActionID: id, Args: args}, nil)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return r.Result
}

// shop drives the store workflow through a UIAP session to a placed
// order, checking the capability document on the way.
func shop(t *testing.T, engine *workflow.Engine, a *uicontrol.Agent) {
	ctx := context.Background()
	caps, err := a.GetCapabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := caps.Capabilities
	if got := currentState(t, doc); got != "browse" {
		t.Fatalf("current state %q, want browse", got)
	}
	acts := actionsOf(t, doc)
	for _, id := range []string{"search_products", "get_product", "transition:cart", uiapworkflow.ActionStateInput} {
		if _, ok := acts[id]; !ok {
			t.Errorf("browse: action %s missing from %v", id, string(doc.Actions))
		}
	}
	if _, ok := acts["add_to_cart"]; ok {
		t.Error("browse offers add_to_cart, a task of another stage")
	}
	if a := acts["search_products"]; a.Risk != uicontrol.RiskLow || !a.ReadOnly || a.Args["type"] != "object" {
		t.Errorf("search_products: %+v (read_only tier is low risk and read-only; args a schema)", a)
	}
	var info uiapworkflow.Info
	if err := json.Unmarshal(doc.Extra["workflow"], &info); err != nil || info.Name != "store" || info.SessionID == "" {
		t.Fatalf("workflow member %s: %v", doc.Extra["workflow"], err)
	}

	if r := call(t, a, "search_products", map[string]any{"query": "beans"}); !strings.Contains(string(r), "SKU-001") {
		t.Errorf("search result %s", r)
	}
	// UAIP's stage rules hold: a task of another stage is refused.
	_, err = a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "add_to_cart", Args: map[string]any{"product_id": "SKU-001", "quantity": 1}}, nil)
	if !errors.Is(err, uicontrol.CodeStateConflict) {
		t.Errorf("add_to_cart in browse: %v, want state_conflict", err)
	}

	next, stop := iter.Pull2(a.Changes(ctx))
	defer stop()
	rev := a.Capabilities().Revision
	call(t, a, "transition:cart", nil)
	ch, err, _ := next()
	if err != nil || ch == nil || ch.Revision == rev || ch.Reason != "stage cart" {
		t.Fatalf("after the transition: %+v, %v", ch, err)
	}
	if got := currentState(t, ch.Capabilities); got != "cart" {
		t.Errorf("current state %q, want cart", got)
	}
	if a, ok := actionsOf(t, ch.Capabilities)["add_to_cart"]; !ok || a.Risk != uicontrol.RiskMedium || a.ReadOnly {
		t.Errorf("cart does not offer add_to_cart (write_low_risk: medium risk, not read-only): %s", ch.Capabilities.Actions)
	}
	call(t, a, "add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 2})
	// Prerequisites hold too: checkout needs user.email.
	_, err = a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "transition:checkout"}, nil)
	var ue *uicontrol.Error
	if !errors.As(err, &ue) || ue.Code != uicontrol.CodeStateConflict || !slices.Contains(anyStrings(ue.Details["missing"]), "user.email") {
		t.Errorf("early checkout: %v (%+v)", err, ue)
	}
	call(t, a, uiapworkflow.ActionStateInput, map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}})
	call(t, a, "transition:checkout", nil)
	if got := currentState(t, a.Capabilities().Capabilities); got != "checkout" {
		t.Errorf("after transition:checkout the agent's document is at %q", got)
	}
	if a := actionsOf(t, a.Capabilities().Capabilities)["place_order"]; a.Risk != uicontrol.RiskHigh || a.ReadOnly {
		t.Errorf("place_order: %+v (write_high_risk is high risk)", a)
	}
	r := call(t, a, "place_order", map[string]any{"payment_method": "invoice"})
	if !strings.Contains(string(r), "order_id") {
		t.Errorf("place_order result %s", r)
	}
	call(t, a, "transition:complete", nil)
	s, err := engine.Session(ctx, info.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stage != "complete" || s.State["order.id"] == nil {
		t.Errorf("UAIP session: stage %s, state %v", s.Stage, s.State)
	}
}

func anyStrings(v any) []string {
	var out []string
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
	}
	return out
}

func TestWorkflowAppOverPair(t *testing.T) {
	engine := newEngine(t)
	srv, err := uiapworkflow.New(engine, "store", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	appT, agentT := uicontrol.Pair()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), appT) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := uicontrol.Connect(ctx, agentT, agentOptions())
	if err != nil {
		t.Fatal(err)
	}
	shop(t, engine, a)
	if err := a.Terminate(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestWorkflowAppOverWebSocket(t *testing.T) {
	engine := newEngine(t)
	mux, err := uiapworkflow.NewMux(engine, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(uicontrol.NewWSHandler(mux.Serve, nil))
	defer hs.Close()
	defer mux.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 { // two sessions, two UAIP sessions
		tr, err := uicontrol.DialWS(ctx, hs.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := uicontrol.Connect(ctx, tr, agentOptions())
		if err != nil {
			t.Fatal(err)
		}
		shop(t, engine, a)
		_ = a.Terminate(ctx, "done")
	}
}

// Each UIAP session has its own UAIP session: one moving on changes
// nothing for the other.
func TestSessionsAreIndependent(t *testing.T) {
	engine := newEngine(t)
	srv, err := uiapworkflow.New(engine, "store", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var agents []*uicontrol.Agent
	for range 2 {
		appT, agentT := uicontrol.Pair()
		go srv.Serve(context.Background(), appT)
		a, err := uicontrol.Connect(ctx, agentT, agentOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		agents = append(agents, a)
	}
	call(t, agents[0], "transition:cart", nil)
	caps, err := agents[1].GetCapabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := currentState(t, caps.Capabilities); got != "browse" {
		t.Errorf("the second session is at %q", got)
	}
}
