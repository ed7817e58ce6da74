package uiapagent_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapagent"
)

// An agent drives a UIAP app through its actions: the cart screen offers
// "checkout", which moves the app to a screen offering "pay". The toolset
// follows the capability document from step to step, in one run. The
// scripted model stands in for a provider's.
func ExampleNewToolset() {
	ctx := context.Background()
	screen := func(actions string) *uicontrol.CapabilityDocument {
		doc, err := uicontrol.DecodeCapabilityDocument([]byte(`{"actions": ` + actions + `}`))
		if err != nil {
			panic(err)
		}
		return doc
	}
	app := uicontrol.NewApp(nil)
	if _, err := app.SetCapabilities(ctx, screen(`[{"id": "checkout", "description": "Go to the payment screen.", "risk": "low"}]`), ""); err != nil {
		panic(err)
	}
	app.HandleAction("checkout", uicontrol.RiskLow, func(ctx context.Context, _ *uicontrol.AppSession, _ *uicontrol.ActionRequest, _ func(uicontrol.ActionProgress)) (any, error) {
		_, err := app.SetCapabilities(ctx, screen(`[{"id": "pay", "description": "Pay the cart.", "risk": "low"}]`), "payment")
		return "on the payment screen", err
	})
	app.HandleAction("pay", uicontrol.RiskLow, func(context.Context, *uicontrol.AppSession, *uicontrol.ActionRequest, func(uicontrol.ActionProgress)) (any, error) {
		return "paid", nil
	})
	appT, agentT := uicontrol.Pair()
	go app.Serve(ctx, appT)
	defer app.Close()
	ua, err := uicontrol.Connect(ctx, agentT, &uicontrol.AgentOptions{
		Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}}})
	if err != nil {
		panic(err)
	}
	defer ua.Close()

	ts, err := uiapagent.NewToolset(ctx, ua, nil)
	if err != nil {
		panic(err)
	}
	step := func(tool string) scripted.Step {
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: tool, ToolName: tool, Arguments: map[string]any{}}}}
	}
	model := scripted.New(step("checkout"), step("pay"), scripted.Step{Text: "Paid."})
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}, Toolsets: []agent.Toolset{ts}})
	if err != nil {
		panic(err)
	}
	res, err := a.Generate(ctx, llm.Text("Pay for the cart."), nil)
	if err != nil {
		panic(err)
	}
	for _, r := range model.Requests() {
		var names []string
		for _, t := range r.Tools {
			names = append(names, t.Name)
		}
		fmt.Println(names)
	}
	fmt.Println(res.Turn.Text())
	// Output:
	// [checkout]
	// [pay]
	// [pay]
	// Paid.
}
