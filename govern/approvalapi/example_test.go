package approvalapi_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
)

// An agent's write_high_risk call waits for approval; a human lists the
// pending requests, signs a token bound to one and approves it; the call
// then runs.
func Example() {
	ctx := context.Background()

	// The governor trusts alice's key.
	alicePub, alice, _ := ed25519.GenerateKey(nil)
	kr := govern.NewKeyring()
	kr.Add("alice", alicePub)
	g, _ := govern.New(ctx, &govern.Options{Keyring: kr,
		Rollbacks: map[string]govern.RollbackFunc{"refund.cancel": func(context.Context, govern.RollbackAction) error { return nil }}})
	srv := httptest.NewServer(approvalapi.NewHandler(g, &approvalapi.Options{}))
	defer srv.Close()

	// An agent's refund is held for approval.
	run, _ := g.Start(ctx, &govern.RunOptions{Identity: govern.Identity{AgentID: "agent:support", OwnerID: "org:acme", ControlClass: govern.HumanSupervised}})
	spec := govern.ToolSpec{Name: "refund", Tier: govern.WriteHighRisk, Rollback: func(_ context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "refund.cancel", Target: c.ID}, nil
	}}
	call := govern.Call{ID: "call-1", Args: map[string]any{"order": "A-17", "amount": 40}}
	refund := func(context.Context) (any, error) { fmt.Println("refund issued"); return "ok", nil }
	if _, err := run.Invoke(ctx, spec, call, refund); errors.Is(err, govern.ApprovalRequired) {
		fmt.Println("held for approval")
	}

	// The approver's side.
	c := &approvalapi.Client{BaseURL: srv.URL}
	pending, _ := c.List(ctx, false)
	req := pending[0]
	fmt.Printf("%s %s %s\n", req.Tool, req.Tier, req.Args)
	token, _ := approvalapi.Sign("alice", alice, req, 0)
	decided, err := c.Approve(ctx, req.ID, token)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(decided.Status, "by", decided.Decision.Approver)

	// The agent's retry of the same call now runs.
	if _, err := run.Invoke(ctx, spec, call, refund); err != nil {
		fmt.Println(err)
	}
	// Output:
	// held for approval
	// refund write_high_risk {"amount":40,"order":"A-17"}
	// approved by alice
	// refund issued
}
