package govern_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
)

// benchJournals are the journals the governed benchmarks run on;
// govern/journal's benchmarks add the file journal.
var benchJournals = map[string]func(b *testing.B) govern.Journal{
	"memory": func(*testing.B) govern.Journal { return govern.NewMemoryJournal() },
}

var benchIdentity = govern.Identity{AgentID: "agent:bench", OwnerID: "org:bench", ControlClass: govern.Autonomous}

func benchTool(ctx context.Context) (any, error) { return map[string]any{"ok": true}, nil }

// BenchmarkToolCall compares a read-only tool call made directly with the
// same call gated by a governor (policy skipped, one unsynced journal
// record, tool_result evidence hashed).
func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	args := map[string]any{"sku": "A-1", "qty": 2}
	b.Run("ungoverned", func(b *testing.B) {
		for b.Loop() {
			if _, err := benchTool(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, open := range benchJournals {
		b.Run("governed_read_only/"+name, func(b *testing.B) {
			g, err := govern.New(ctx, govern.Options{Journal: open(b)})
			if err != nil {
				b.Fatal(err)
			}
			spec := govern.ToolSpec{Name: "lookup", Tier: govern.ReadOnly}
			var run *govern.Run
			i := 0
			for b.Loop() {
				if i%1000 == 0 { // a run per 1000 calls keeps memory flat
					if run, err = g.Start(ctx, govern.RunOptions{Identity: benchIdentity}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := run.Invoke(ctx, spec, govern.Call{ID: fmt.Sprint(i), Args: args}, benchTool); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkHighRiskCall measures a write_high_risk call that already has
// its approval token: token verification (Ed25519), policy, rollback
// metadata, the intent record synced before the tool runs and the commit
// synced after. Opening the approval request and signing the token (the
// human's part) are outside the timer.
func BenchmarkHighRiskCall(b *testing.B) {
	ctx := context.Background()
	pub, priv, _ := ed25519.GenerateKey(nil)
	for name, open := range benchJournals {
		b.Run(name, func(b *testing.B) {
			keys := govern.NewKeyring()
			keys.Add("alice", pub)
			g, err := govern.New(ctx, govern.Options{Journal: open(b), Keyring: keys,
				Rollbacks: map[string]govern.RollbackFunc{"undo": func(context.Context, govern.RollbackAction) error { return nil }}})
			if err != nil {
				b.Fatal(err)
			}
			spec := govern.ToolSpec{Name: "refund", Tier: govern.WriteHighRisk, Rollback: func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
				return &govern.RollbackAction{Type: "undo", Target: c.ID}, nil
			}}
			var run *govern.Run
			i := 0
			for b.Loop() {
				b.StopTimer()
				if i%200 == 0 {
					if run, err = g.Start(ctx, govern.RunOptions{Identity: benchIdentity}); err != nil {
						b.Fatal(err)
					}
				}
				call := govern.Call{ID: fmt.Sprint(i), Args: map[string]any{"order": i}}
				_, err := run.Invoke(ctx, spec, call, benchTool)
				var ge *govern.Error
				if !errors.As(err, &ge) || ge.ApprovalID == "" {
					b.Fatalf("want an approval request, got %v", err)
				}
				req, err := g.Approval(ctx, ge.ApprovalID)
				if err != nil {
					b.Fatal(err)
				}
				now := time.Now()
				call.Approval, err = govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience,
					ID: fmt.Sprint("jti-", i), IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := run.Invoke(ctx, spec, call, benchTool); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
