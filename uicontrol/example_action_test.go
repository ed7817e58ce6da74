package uicontrol_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentry-dev/agentry/uicontrol"
)

// An app registers two actions with their risk: adding to the cart (low:
// the default policy allows it) and paying (high: the default policy
// asks the agent's side for an explicit confirmation first). An agent
// that offered the Action Runtime extension calls both, following the
// progress of the first; its Confirm function stands for the human it
// asks.
func ExampleAgent_CallAction() {
	ctx := context.Background()
	app := uicontrol.NewApp(nil)
	defer app.Close()
	app.HandleAction("cart.add", uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress func(uicontrol.ActionProgress)) (any, error) {
		var args struct {
			SKU string `json:"sku"`
		}
		if err := req.DecodeArgs(&args); err != nil || args.SKU == "" {
			return nil, uicontrol.NewError(uicontrol.CodeBadRequest, "sku missing")
		}
		progress(uicontrol.ActionProgress{Progress: 0.5, Message: "looking up " + args.SKU})
		return map[string]any{"sku": args.SKU, "items": 1}, nil
	})
	app.HandleAction("checkout.pay", uicontrol.RiskHigh, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress func(uicontrol.ActionProgress)) (any, error) {
		return map[string]any{"paid": true}, nil
	})
	appEnd, agentEnd := uicontrol.Pair()
	go app.Serve(ctx, appEnd)

	agent, err := uicontrol.Connect(ctx, agentEnd, &uicontrol.AgentOptions{
		Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}},
		Confirm: func(ctx context.Context, c *uicontrol.ActionConfirmation) (bool, error) {
			fmt.Println("confirm?", c.ActionID, c.Risk, c.Reason)
			return true, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer agent.Close()

	res, err := agent.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "cart.add", Args: map[string]any{"sku": "A-1"}, IdempotencyKey: "add-A-1"},
		func(p *uicontrol.ActionProgress) {
			if p.Started {
				fmt.Println("started", p.State)
				return
			}
			fmt.Println("progress", p.State, p.Progress, p.Message)
		})
	fmt.Println(res.State, string(res.Result), err)

	// The same idempotency key: the first result, the action not run again.
	res, err = agent.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "cart.add", Args: map[string]any{"sku": "A-1"}, IdempotencyKey: "add-A-1"}, nil)
	fmt.Println(res.State, string(res.Result), res.Deduplicated, err)

	res, err = agent.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "checkout.pay"}, nil)
	fmt.Println(res.State, string(res.Result), err)

	_, err = agent.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "cart.empty"}, nil)
	fmt.Println(errors.Is(err, uicontrol.CodeCapabilityUnavailable))
	// Output:
	// started EXECUTING
	// progress EXECUTING 0.5 looking up A-1
	// SUCCEEDED {"items":1,"sku":"A-1"} <nil>
	// SUCCEEDED {"items":1,"sku":"A-1"} true <nil>
	// confirm? checkout.pay high high-risk action
	// SUCCEEDED {"paid":true} <nil>
	// true
}
