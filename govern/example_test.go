package govern_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// A governed run without an agent: the work function calls tools through
// Invoke; Execute verifies the output, repairs, and delivers or fails
// safe.
func ExampleGovernor_Execute() {
	ctx := context.Background()
	g, _ := govern.New(ctx, &govern.Options{
		Classes: []govern.TaskClass{{Name: "quote", RequiredEvidence: []govern.EvidenceType{govern.ToolResult}}},
	})
	price := govern.ToolSpec{Name: "price", Tier: govern.ReadOnly}
	d, err := g.Execute(ctx, &govern.RunOptions{
		TaskClass: "quote",
		Identity:  govern.Identity{AgentID: "agent:quoter", OwnerID: "org:acme", ControlClass: govern.Autonomous},
	}, func(ctx context.Context, run *govern.Run, repair *govern.Verdict) (any, error) {
		inv, err := run.Invoke(ctx, price, govern.Call{Args: map[string]any{"sku": "A-1"}}, func(ctx context.Context) (any, error) {
			return 12.5, nil
		})
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("A-1 costs %v", inv.Result), nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Envelope.State, d.Envelope.Outcome, d.Output)
	// Output: deliver success A-1 costs 12.5
}

// A high-risk tool call waits for a human: the agent pauses, an approver
// signs a token bound to the very call, and the run resumes.
func ExampleGovernor_Middleware() {
	ctx := context.Background()
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := govern.NewKeyring()
	keys.Add("alice", pub)
	undo := map[string]govern.RollbackFunc{"refund.cancel": func(ctx context.Context, a govern.RollbackAction) error { return nil }}
	g, _ := govern.New(ctx, &govern.Options{Keyring: keys, Rollbacks: undo})

	refund := govern.Declare(llm.Tool{Name: "refund", Description: "Refunds an order.", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			return "refunded " + args["order"].(string), nil
		},
	}, govern.Declaration{Tier: govern.WriteHighRisk, Rollback: func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "refund.cancel", Target: c.Args["order"].(string)}, nil
	}})
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "c1", ToolName: "refund", Arguments: map[string]any{"order": "o-1"}}}},
		scripted.Step{Text: "Order o-1 is refunded."},
	)
	a, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{refund}},
		Middleware: []agent.Middleware{g.Middleware(&govern.AgentOptions{Identity: govern.Identity{AgentID: "agent:support", OwnerID: "org:acme"}})}})

	_, err := a.Generate(ctx, llm.Text("Refund order o-1."), nil)
	var paused *govern.Error
	if !errors.As(err, &paused) || !errors.Is(err, govern.ApprovalRequired) {
		fmt.Println("unexpected:", err)
		return
	}
	req, _ := g.Approval(ctx, paused.ApprovalID)
	fmt.Println("waiting for approval of", req.Tool, req.Tier)

	now := time.Now()
	token, _ := govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "approval-1",
		IssuedAt: now.Unix(), Expiry: now.Add(15 * time.Minute).Unix(), Binding: req.Binding()})
	if _, err := g.Decide(ctx, req.ID, govern.ApprovalInput{Approve: true, Token: token}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := govern.ResumeAgent(ctx, g, a, paused.Envelope.RequestID)
	if err != nil {
		fmt.Println(err)
		return
	}
	env, _ := govern.EnvelopeOf(res.State)
	fmt.Println(res.Turn.Text(), env.Outcome)
	// Output:
	// waiting for approval of refund write_high_risk
	// Order o-1 is refunded. success
}
