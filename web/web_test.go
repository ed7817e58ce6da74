package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/web"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/web/", web.Handler())
	mux.Handle("/web/demo/ws", web.DemoAgentHandler(&web.DemoOptions{Timeout: 20 * time.Second}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestHandlerServesModuleAndDemo(t *testing.T) {
	srv := newServer(t)
	resp, body := get(t, srv.URL+"/web/uiap.js")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") || !strings.Contains(body, "export function connectApp") {
		t.Fatalf("uiap.js: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, body = get(t, srv.URL+"/web/demo/")
	if resp.StatusCode != 200 || !strings.Contains(body, "from '/web/uiap.js'") || !strings.Contains(body, `id="checkout"`) {
		t.Fatalf("demo: %d", resp.StatusCode)
	}
	resp, _ = get(t, srv.URL+"/web/")
	if resp.Request.URL.Path != "/web/demo/" {
		t.Fatalf("/web/ led to %s", resp.Request.URL.Path)
	}
	resp, _ = get(t, srv.URL+"/web/nope.js")
	if resp.StatusCode != 404 {
		t.Fatalf("missing file: %d", resp.StatusCode)
	}
	r, err := http.Post(srv.URL+"/web/uiap.js", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", r.StatusCode)
	}
}

// A Go app dials the demo agent as the page does: the scripted agent
// searches, adds to the cart (which changes the capabilities) and checks
// out, then terminates the session.
func TestDemoAgentDrivesAnApp(t *testing.T) {
	srv := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	app := uicontrol.NewApp(&uicontrol.AppOptions{Source: uicontrol.EndpointRef{Role: "app", ID: "go-store"}})
	defer app.Close()
	doc := func(items int) *uicontrol.CapabilityDocument {
		return &uicontrol.CapabilityDocument{
			States:  json.RawMessage(`{"cart":{"items":` + fmt.Sprint(items) + `}}`),
			Actions: json.RawMessage(`[{"id":"search","readOnly":true},{"id":"add_to_cart"},{"id":"checkout"}]`),
			Risk:    json.RawMessage(`{"search":"low","add_to_cart":"low","checkout":"high"}`),
		}
	}
	if _, err := app.SetCapabilities(ctx, doc(0), ""); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []string
	record := func(id string, req *uicontrol.ActionRequest) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(req.Args)
		calls = append(calls, id+" "+string(b))
	}
	app.HandleAction("search", uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress func(uicontrol.ActionProgress)) (any, error) {
		record("search", req)
		return map[string]any{"products": []any{map[string]any{"sku": "ESP-250"}}}, nil
	})
	app.HandleAction("add_to_cart", uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress func(uicontrol.ActionProgress)) (any, error) {
		record("add_to_cart", req)
		if _, err := app.SetCapabilities(ctx, doc(2), "cart_changed"); err != nil {
			return nil, err
		}
		return map[string]any{"items": 2}, nil
	})
	ordered := make(chan struct{})
	app.HandleAction("checkout", uicontrol.RiskHigh, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress func(uicontrol.ActionProgress)) (any, error) {
		record("checkout", req)
		close(ordered)
		return map[string]any{"orderId": "ORD-1"}, nil
	})

	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/web/demo/ws"
	tr, err := uicontrol.DialWS(ctx, wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Serve(ctx, tr) }()
	select {
	case <-ordered:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("no checkout; calls: %q", calls)
	}
	select {
	case <-served: // the agent terminated the session: Serve returns
	case <-ctx.Done():
		t.Fatal("session not terminated")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{`search {"query":"espresso"}`, `add_to_cart {"quantity":2,"sku":"ESP-250"}`, `checkout {}`}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}
