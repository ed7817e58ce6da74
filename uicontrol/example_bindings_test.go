package uicontrol_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentry-dev/agentry/uicontrol"
)

// An app served over both bindings (ws@0.1 at /uiap/ws, http@0.1 under
// /uiap/sessions); an agent connects over each and reads the app's
// capabilities.
func ExampleNewWSHandler() {
	ctx := context.Background()
	app := uicontrol.NewApp(nil)
	defer app.Close()
	doc, _ := uicontrol.DecodeCapabilityDocument([]byte(`{"actions":[{"id":"cart.add"}]}`))
	app.SetCapabilities(ctx, doc, "")

	httpBinding := uicontrol.NewHTTPHandler(app.Serve, nil)
	defer httpBinding.Close()
	mux := http.NewServeMux()
	mux.Handle("/uiap/ws", uicontrol.NewWSHandler(app.Serve, nil))
	mux.Handle("/uiap/sessions", httpBinding)
	mux.Handle("/uiap/sessions/", httpBinding)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ws, err := uicontrol.DialWS(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/uiap/ws", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	viaHTTP, err := uicontrol.DialHTTP(ctx, srv.URL+"/uiap", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range []uicontrol.Transport{ws, viaHTTP} {
		agent, err := uicontrol.Connect(ctx, t, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		caps, err := agent.GetCapabilities(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(agent.Session().Version, string(caps.Capabilities.Actions))
		agent.Terminate(ctx, "normal")
	}
	// Output:
	// 0.1 [{"id":"cart.add"}]
	// 0.1 [{"id":"cart.add"}]
}
