package workflow_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/agentry-dev/agentry/workflow"
)

func TestClientSpeaksUAIP(t *testing.T) {
	srv, _ := newServer(t, nil)
	c := workflow.NewClient(srv.URL, nil)
	ctx := context.Background()
	init, err := c.Initialize(ctx, "store")
	if err != nil {
		t.Fatal(err)
	}
	if init.InitialStage != "browse" || init.Next == nil || init.Next.Tasks["search_products"].Parameters == nil {
		t.Errorf("initialize = %+v", init)
	}
	r, err := c.Call(ctx, init.SessionID, "store", "get_product", map[string]any{"product_id": "SKU-003"})
	if err != nil || r.CurrentStage != "browse" || len(r.Result) == 0 {
		t.Fatalf("call: %v %+v", err, r)
	}
	if _, err := c.Transition(ctx, init.SessionID, "store", "cart"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Transition(ctx, init.SessionID, "store", "checkout")
	var we *workflow.Error
	if !errors.Is(err, workflow.ErrPrerequisites) || !errors.As(err, &we) || !slices.Equal(we.Missing, []string{"user.email", "cart"}) || we.Status != 422 {
		t.Errorf("prerequisites error = %#v", err)
	}
	for kind, call := range map[error]func() error{
		workflow.ErrTaskNotInStage:    func() error { _, err := c.Call(ctx, init.SessionID, "store", "place_order", nil); return err },
		workflow.ErrInvalidTransition: func() error { _, err := c.Transition(ctx, init.SessionID, "store", "complete"); return err },
		workflow.ErrInvalidArguments: func() error {
			_, err := c.Call(ctx, init.SessionID, "store", "add_to_cart", map[string]any{"product_id": "SKU-001"})
			return err
		},
		workflow.ErrTaskFailed: func() error {
			_, err := c.Call(ctx, init.SessionID, "store", "add_to_cart", map[string]any{"product_id": "SKU-004", "quantity": 50})
			return err
		},
		workflow.ErrSessionNotFound:  func() error { _, err := c.Session(ctx, "nope"); return err },
		workflow.ErrWorkflowNotFound: func() error { _, err := c.Initialize(ctx, "bank"); return err },
		workflow.ErrInvalidAction: func() error {
			_, err := c.Execute(ctx, init.SessionID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "fly"})
			return err
		},
	} {
		if err := call(); !errors.Is(err, kind) {
			t.Errorf("want %v, got %v", kind, err)
		}
	}
	if _, err := c.SetState(ctx, init.SessionID, "store", map[string]any{"user.email": "a@b.c"}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Session(ctx, init.SessionID)
	if err != nil || s.Stage != "cart" || s.State["user.email"] != "a@b.c" {
		t.Errorf("session %+v %v", s, err)
	}
	ws, err := c.Workflows(ctx)
	if err != nil || len(ws) != 1 || ws[0].Name != "store" {
		t.Errorf("workflows %v %v", ws, err)
	}
	info, err := c.Workflow(ctx, "store")
	if err != nil || info.Stages["checkout"].Prerequisites == nil {
		t.Errorf("workflow %+v %v", info, err)
	}
	if err := c.DeleteSession(ctx, init.SessionID); err != nil {
		t.Fatal(err)
	}
	unauth := workflow.NewClient(srv.URL, &workflow.ClientOptions{BearerToken: "x"})
	if _, err := unauth.Workflows(ctx); err != nil {
		t.Errorf("a token the server does not ask for broke the call: %v", err)
	}
}
