package cli

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
)

// agentry serve exposes the store workflow as a UIAP app on both
// bindings, behind --token.
func TestServeUIAP(t *testing.T) {
	srv := serveInProcess(t, t.TempDir(), "--token", "s3cret", "--tls-addr", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	auth := http.Header{"Authorization": {"Bearer s3cret"}}
	opts := &uicontrol.AgentOptions{
		Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}},
		Confirm:    func(context.Context, *uicontrol.ActionConfirmation) (bool, error) { return true, nil },
	}
	wsURL := srv.plainURL + "/uiap/ws?workflow=store"
	if _, err := uicontrol.DialWS(ctx, wsURL, nil); err == nil {
		t.Error("a WebSocket without the token was accepted")
	}
	if _, err := uicontrol.DialWS(ctx, srv.plainURL+"/uiap/ws?workflow=nope", &uicontrol.WSDialOptions{Header: auth}); err == nil {
		t.Error("an unknown workflow was accepted")
	}
	ws, err := uicontrol.DialWS(ctx, wsURL, &uicontrol.WSDialOptions{Header: auth})
	if err != nil {
		t.Fatal(err)
	}
	hb, err := uicontrol.DialHTTP(ctx, srv.plainURL+"/uiap", &uicontrol.HTTPDialOptions{Header: auth})
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]uicontrol.Transport{"ws": ws, "http": hb} {
		a, err := uicontrol.Connect(ctx, tr, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		caps, err := a.GetCapabilities(ctx)
		if err != nil || !strings.Contains(string(caps.Capabilities.States), `"id":"browse","description":"Search the catalog and look at products.","current":true`) {
			t.Errorf("%s: capabilities %v, %v", name, caps, err)
		}
		if _, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "transition:cart"}, nil); err != nil {
			t.Errorf("%s: transition: %v", name, err)
		}
		r, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "add_to_cart", Args: map[string]any{"product_id": "SKU-002", "quantity": 1}}, nil)
		if err != nil || !strings.Contains(string(r.Result), "SKU-002") {
			t.Errorf("%s: add_to_cart: %v, %v", name, r, err)
		}
		_ = a.Terminate(ctx, "done")
	}
	if _, err := uicontrol.DialHTTP(ctx, srv.plainURL+"/uiap", nil); err != nil {
		t.Fatal(err) // DialHTTP makes no request
	}
	resp, err := http.Post(srv.plainURL+"/uiap/sessions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("HTTP binding without the token: %s", resp.Status)
	}
}
