package govern_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	pub, priv, _ := ed25519.GenerateKey(nil)
	kr := govern.NewKeyring()
	if _, err := kr.Add("alice", pub); err != nil {
		t.Fatal(err)
	}
	var rolled []string
	g, err := govern.New(ctx, &govern.Options{Keyring: kr,
		Classes: []govern.TaskClass{{Name: "refund", RequiredEvidence: []govern.EvidenceType{govern.ToolResult}}},
		Rollbacks: map[string]govern.RollbackFunc{"refund.cancel": func(ctx context.Context, a govern.RollbackAction) error {
			rolled = append(rolled, a.Target)
			return nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkAudit(t, g.Journal()) })
	id := govern.Identity{AgentID: "agent:a", OwnerID: "org:x", ControlClass: govern.HumanSupervised}
	r, err := g.Start(ctx, &govern.RunOptions{Identity: id, TaskClass: "refund"})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, r.Envelope())
	spec := govern.ToolSpec{Name: "refund", Tier: govern.WriteHighRisk, Rollback: func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "refund.cancel", Target: c.ID}, nil
	}}
	calls := 0
	fn := func(ctx context.Context) (any, error) { calls++; return map[string]any{"ok": true}, nil }
	_, err = r.Invoke(ctx, spec, govern.Call{ID: "c1", Args: map[string]any{"amount": 5}}, fn)
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) || ge.ApprovalID == "" {
		t.Fatalf("err = %v", err)
	}
	checkWire(t, ge.Envelope)
	if err := r.Pause(ctx, []byte(`{"s":1}`)); err != nil {
		t.Fatal(err)
	}
	req, err := g.Approval(ctx, ge.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "j1", IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(ctx, req.ID, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
		t.Fatal(err)
	}
	r2, err := g.Attach(ctx, r.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, r2.Envelope())
	if snap, err := r2.Resume(ctx); err != nil || string(snap) != `{"s":1}` {
		t.Fatalf("resume: %s %v", snap, err)
	}
	inv, err := r2.Invoke(ctx, spec, govern.Call{ID: "c1", Args: map[string]any{"amount": 5}}, fn)
	if err != nil || calls != 1 || inv.Envelope.Rollback == nil {
		t.Fatalf("invoke: %v calls=%d", err, calls)
	}
	checkInvocation(t, inv)
	v, err := r2.Verify(ctx, "done")
	if err != nil || !v.Passed {
		t.Fatalf("verify %+v %v", v, err)
	}
	checkVerdict(t, v)
	env, err := r2.Fail(ctx, "test", govern.VerificationFailed)
	if err != nil || env.Outcome != govern.Uncertain || len(rolled) != 1 || rolled[0] != "c1" {
		t.Fatalf("fail: %+v %v %v", env, err, rolled)
	}
	checkWire(t, env)
}
