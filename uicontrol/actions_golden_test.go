package uicontrol_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/google/go-cmp/cmp"
)

// TestUIAP_Action_Transcript pins the wire form of the Action Runtime and
// the policy decisions against testdata/golden/actions.txt: a handshake
// selecting uiap.action and uicp.policy, an action with progress, its
// repeat under the same idempotency key, a confirmation round trip, a
// denied action, a cancelled one, and a request over the rate limit.
func TestUIAP_Action_Transcript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		restore := ids.Set(&goldenIDs{t: time.Date(2026, 3, 26, 13, 0, 0, 0, time.UTC)})
		defer restore()
		ctx := context.Background()
		log := &transcript{}
		appEnd, agentEnd := uicontrol.Pair()
		app := uicontrol.NewApp(&uicontrol.AppOptions{
			Source:     uicontrol.EndpointRef{Role: "app", ID: "shop"},
			Extensions: []uicontrol.ExtensionOffer{{ID: "uiap.policy", Versions: []string{"0.1"}}},
			RateLimit:  uicontrol.RateLimit{Rate: 1, Burst: 5},
			Policy: func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, risk uicontrol.Risk) uicontrol.PolicyDecision {
				if req.ActionID == "account.delete" {
					return uicontrol.PolicyDecision{Decision: uicontrol.DecisionDeny, Reason: "agents may not delete accounts"}
				}
				return uicontrol.DefaultPolicy(ctx, s, req, risk)
			},
		})
		defer app.Close()
		type progress = func(uicontrol.ActionProgress)
		app.HandleAction("cart.add", uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, p progress) (any, error) {
			p(uicontrol.ActionProgress{Progress: 0.5, Message: "adding"})
			return map[string]any{"items": 1}, nil
		})
		app.HandleAction("checkout.pay", uicontrol.RiskHigh, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, p progress) (any, error) {
			return map[string]any{"paid": true}, nil
		})
		app.HandleAction("account.delete", uicontrol.RiskHigh, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, p progress) (any, error) {
			panic("denied by policy")
		})
		app.HandleAction("search.wait", uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, p progress) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		go app.Serve(ctx, &recorder{Transport: appEnd, label: "app → agent", log: log})
		a, err := uicontrol.Connect(ctx, &recorder{Transport: agentEnd, label: "agent → app", log: log}, &uicontrol.AgentOptions{
			Source: uicontrol.EndpointRef{Role: "agent", ID: "shopper-bot"},
			Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}},
				{ID: "uicp.policy", Versions: []string{"0.1"}}},
			Confirm: func(ctx context.Context, c *uicontrol.ActionConfirmation) (bool, error) { return true, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		add := &uicontrol.ActionRequest{ActionID: "cart.add", Args: map[string]any{"sku": "A-1"},
			Target: &uicontrol.ActionTarget{Ref: []byte(`{"stableId":"cart.add"}`), ExpectedRole: "button"}, IdempotencyKey: "add-A-1"}
		if _, err := a.CallAction(ctx, add, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := a.CallAction(ctx, add, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "checkout.pay", Args: map[string]any{"amount": 12.5}, Timeout: 30 * time.Second}, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "account.delete"}, nil); err == nil {
			t.Fatal("denied action ran")
		}
		synctest.Wait()
		started := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			_, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "search.wait"}, func(p *uicontrol.ActionProgress) {
				select {
				case started <- p.RequestID:
				default:
				}
			})
			done <- err
		}()
		id := <-started
		synctest.Wait()
		if err := a.CancelAction(ctx, id, "user changed their mind"); err != nil {
			t.Fatal(err)
		}
		<-done
		synctest.Wait()
		if _, err := a.GetCapabilities(ctx); err == nil {
			t.Fatal("request over the rate limit accepted")
		}
		synctest.Wait()

		path := filepath.Join("testdata", "golden", "actions.txt")
		got := log.buf.Bytes()
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("transcript (-want +got):\n%s", d)
		}
	})
}
