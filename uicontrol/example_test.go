package uicontrol_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentry-dev/agentry/uicontrol"
)

// An app publishes its capabilities and handles one action; an agent in
// the same process connects over a Pair, reads the capabilities inline,
// calls the action and ends the session.
func Example() {
	ctx := context.Background()
	app := uicontrol.NewApp(&uicontrol.AppOptions{Profiles: []string{"web@0.1"}})
	defer app.Close()
	doc, _ := uicontrol.DecodeCapabilityDocument([]byte(`{"actions":[{"id":"cart.add"}],"risk":{"cart.add":"low"}}`))
	app.SetCapabilities(ctx, doc, "")
	app.Handle("x.shop.cart.add", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		var p struct {
			SKU string `json:"sku"`
		}
		if err := json.Unmarshal(req.Payload, &p); err != nil || p.SKU == "" {
			return nil, uicontrol.NewError(uicontrol.CodeBadRequest, "sku missing")
		}
		return &uicontrol.Reply{Type: "x.shop.cart.added", Payload: map[string]any{"sku": p.SKU, "items": 1}}, nil
	})

	appEnd, agentEnd := uicontrol.Pair()
	go app.Serve(ctx, appEnd)

	agent, err := uicontrol.Connect(ctx, agentEnd, &uicontrol.AgentOptions{
		Profiles:           []string{"web@0.1"},
		CapabilityDelivery: uicontrol.DeliveryInline,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	info := agent.Session()
	fmt.Println("version", info.Version, "profiles", info.Profiles, info.CapabilityDelivery)
	fmt.Println("actions", string(agent.Capabilities().Capabilities.Actions))

	r, err := agent.Call(ctx, &uicontrol.Request{Type: "x.shop.cart.add", Payload: map[string]any{"sku": "A-1"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Type, string(r.Payload))

	_, err = agent.Call(ctx, &uicontrol.Request{Type: "x.shop.cart.add"})
	fmt.Println(errors.Is(err, uicontrol.CodeBadRequest), err)

	fmt.Println(agent.Terminate(ctx, "normal"), agent.State())
	// Output:
	// version 0.1 profiles [web@0.1] inline
	// actions [{"id":"cart.add"}]
	// x.shop.cart.added {"items":1,"sku":"A-1"}
	// true uiap: bad_request: sku missing
	// <nil> TERMINATED
}

// An agent follows the app's capability document: each
// capabilities.changed brings a new revision and a full replacement.
func ExampleAgent_Changes() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app := uicontrol.NewApp(nil)
	defer app.Close()
	appEnd, agentEnd := uicontrol.Pair()
	go app.Serve(ctx, appEnd)
	agent, err := uicontrol.Connect(ctx, agentEnd, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer agent.Close()

	changes := agent.Changes(ctx) // changes from now on
	doc, _ := uicontrol.DecodeCapabilityDocument([]byte(`{"states":[{"id":"checkout"}],"actions":[{"id":"pay"}]}`))
	app.SetCapabilities(ctx, doc, "app_update")
	for c, err := range changes {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(c.Reason, string(c.Capabilities.States), string(c.Capabilities.Actions), c.Revision != "")
		break
	}
	// Output: app_update [{"id":"checkout"}] [{"id":"pay"}] true
}
