package uiapworkflow_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/agentry-dev/agentry/workflow"
)

// Serving every workflow of an engine on both UIAP bindings, as agentry
// serve does, and driving one session in process.
func Example() {
	engine := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := engine.Register(builtin.Store()); err != nil {
		panic(err)
	}
	mux, err := uiapworkflow.NewMux(engine, nil)
	if err != nil {
		panic(err)
	}
	defer mux.Close()
	hm := http.NewServeMux()
	hm.Handle("/uiap/ws", uicontrol.NewWSHandler(mux.Serve, nil))
	hb := uicontrol.NewHTTPHandler(mux.Serve, nil)
	defer hb.Close()
	hm.Handle("/uiap/sessions", hb)
	hm.Handle("/uiap/sessions/", hb)

	ctx := context.Background()
	appT, agentT := uicontrol.Pair()
	go mux.Serve(ctx, appT)
	a, err := uicontrol.Connect(ctx, agentT, &uicontrol.AgentOptions{
		Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}}})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	if _, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "transition:cart"}, nil); err != nil {
		panic(err)
	}
	c := a.Capabilities()
	fmt.Println(c.Reason)
	fmt.Println(string(c.Capabilities.Risk))
	// Output:
	// stage cart
	// {"add_to_cart":"medium","remove_from_cart":"medium","state:input":"medium","transition:browse":"medium","transition:checkout":"medium","view_cart":"low"}
}
