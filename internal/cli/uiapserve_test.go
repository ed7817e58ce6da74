package cli

import (
	"context"
	"errors"
	"io"
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

// uiapClients connects an agent (offering the Action Runtime) to the
// store workflow app of srv over each binding.
func uiapClients(t *testing.T, ctx context.Context, srv *inProcessServe) map[string]*uicontrol.Agent {
	t.Helper()
	ws, err := uicontrol.DialWS(ctx, srv.plainURL+"/uiap/ws?workflow=store", nil)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := uicontrol.DialHTTP(ctx, srv.plainURL+"/uiap", nil)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]*uicontrol.Agent{}
	for name, tr := range map[string]uicontrol.Transport{"ws": ws, "http": hb} {
		a, err := uicontrol.Connect(ctx, tr, &uicontrol.AgentOptions{
			Extensions: []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { _ = a.Close() })
		agents[name] = a
	}
	return agents
}

// wantRateLimited checks that err is rate_limited, retryable, with a
// retry hint of about a thousand seconds (one request per 1000 s).
func wantRateLimited(t *testing.T, what string, err error) {
	t.Helper()
	var ue *uicontrol.Error
	if !errors.Is(err, uicontrol.CodeRateLimited) || !errors.As(err, &ue) || !ue.Retryable {
		t.Fatalf("%s: %v, want rate_limited and retryable", what, err)
	}
	if wait, ok := uicontrol.RetryAfter(err); !ok || wait < 900*time.Second || wait > 1000*time.Second {
		t.Errorf("%s: retryAfterMs %v (%v), want about 1000 s", what, wait, ok)
	}
}

// §16: agentry serve limits the requests of each UIAP session, on both
// bindings (--uiap-rate, --uiap-burst, or AGENTRY_UIAP_RATE and
// AGENTRY_UIAP_BURST): past the burst a request is answered rate_limited,
// retryable, with retryAfterMs; session messages pass; another session
// has its own bucket. One request per 1000 s: no refill can happen while
// the test runs, however slowly.
func TestUIAP_16_ServeRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flags", []string{"--uiap-rate", "0.001", "--uiap-burst", "3"}, nil},
		{"env", nil, map[string]string{"AGENTRY_UIAP_RATE": "0.001", "AGENTRY_UIAP_BURST": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			srv := serveInProcess(t, t.TempDir(), append([]string{"--tls-addr", ""}, tc.args...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for name, a := range uiapClients(t, ctx, srv) {
				for i := range 3 {
					if _, err := a.GetCapabilities(ctx); err != nil {
						t.Fatalf("%s: request %d within the burst: %v", name, i+1, err)
					}
				}
				_, err := a.GetCapabilities(ctx)
				wantRateLimited(t, name+": capabilities.get past the burst", err)
				_, err = a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: "search_products", Args: map[string]any{}}, nil)
				wantRateLimited(t, name+": action.request past the burst", err)
				if err := a.Ping(ctx); err != nil {
					t.Errorf("%s: session.ping of a throttled session: %v", name, err)
				}
			}
			// Each session has its own bucket.
			for name, b := range uiapClients(t, ctx, srv) {
				if _, err := b.GetCapabilities(ctx); err != nil {
					t.Errorf("%s: another session: %v", name, err)
				}
				if err := b.Terminate(ctx, "done"); err != nil {
					t.Errorf("%s: terminate: %v", name, err)
				}
			}
		})
	}
}

// The limit is on by default (50 requests a second, bursts of 100) and
// never meets a normal client: the bucket starts full, so 100 requests
// in a row pass however fast they come. --uiap-rate 0 turns it off;
// negative values are usage errors.
func TestUIAP_16_ServeRateLimitDefaults(t *testing.T) {
	fl := serveCmd(&env{}).Flags()
	if r, b := fl.Lookup("uiap-rate"), fl.Lookup("uiap-burst"); r == nil || b == nil || r.DefValue != "50" || b.DefValue != "0" {
		t.Fatalf("--uiap-rate %v, --uiap-burst %v: want defaults 50 and 0", r, b)
	}
	for _, tc := range []struct {
		rate  float64
		burst int
		want  uicontrol.RateLimit
	}{
		{50, 0, uicontrol.RateLimit{Rate: 50, Burst: 100}},
		{0.001, 0, uicontrol.RateLimit{Rate: 0.001, Burst: 1}},
		{2.5, 0, uicontrol.RateLimit{Rate: 2.5, Burst: 5}},
		{10, 7, uicontrol.RateLimit{Rate: 10, Burst: 7}},
		{0, 7, uicontrol.RateLimit{}},
	} {
		got, err := uiapRateLimit(&serveFlags{uiapRate: tc.rate, uiapBurst: tc.burst})
		if err != nil || got != tc.want {
			t.Errorf("--uiap-rate %v --uiap-burst %d: %+v, %v; want %+v", tc.rate, tc.burst, got, err, tc.want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		args []string
		n    int
	}{
		{nil, 100},                          // the default burst
		{[]string{"--uiap-rate", "0"}, 300}, // no limit
	} {
		srv := serveInProcess(t, t.TempDir(), append([]string{"--tls-addr", ""}, tc.args...)...)
		for name, a := range uiapClients(t, ctx, srv) {
			for i := range tc.n {
				if _, err := a.GetCapabilities(ctx); err != nil {
					t.Fatalf("%v %s: request %d: %v", tc.args, name, i+1, err)
				}
			}
			// An open HTTP-binding event stream would hold serve's
			// shutdown (in-flight request) until its timeout.
			if err := a.Terminate(ctx, "done"); err != nil {
				t.Errorf("%s: terminate: %v", name, err)
			}
		}
		srv.stop()
	}

	for _, args := range [][]string{{"--uiap-rate", "-1"}, {"--uiap-rate", "NaN"}, {"--uiap-rate", "+Inf"}, {"--uiap-burst", "-1"}} {
		code, _, errs := runCLI(t, "", append([]string{"serve", "--addr", "127.0.0.1:0", "--tls-addr", "", "--store", "memory:",
			"--data", t.TempDir()}, args...)...)
		if code != 2 || !strings.Contains(errs, args[0]) {
			t.Errorf("serve %v: exit %d, %q; want a usage error", args, code, errs)
		}
	}
}

// The HTTP binding of agentry serve takes application/uiap+json as well
// as application/json; anything else is 415.
func TestServeUIAP_HTTPContentType(t *testing.T) {
	srv := serveInProcess(t, t.TempDir(), "--tls-addr", "")
	init := `{"uiap":"0.1","kind":"request","type":"session.initialize","id":"m-1","ts":"2026-03-26T13:00:00.000Z",` +
		`"source":{"role":"agent","id":"a"},"payload":{"supportedVersions":["0.1"],"peer":{"role":"agent"}}}`
	for ct, want := range map[string]int{
		"application/uiap+json":                http.StatusCreated,
		"application/uiap+json; charset=utf-8": http.StatusCreated,
		"Application/JSON; charset=UTF-8":      http.StatusCreated,
		"text/plain":                           http.StatusUnsupportedMediaType,
		"application/x-www-form-urlencoded":    http.StatusUnsupportedMediaType,
	} {
		resp, err := http.Post(srv.plainURL+"/uiap/sessions", ct, strings.NewReader(init))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusCreated && !strings.Contains(string(body), `"session.initialized"`)) {
			t.Errorf("%s: %s %s, want %d", ct, resp.Status, body, want)
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			req, _ := http.NewRequest(http.MethodDelete, srv.plainURL+loc, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
}

// Shutting agentry serve down ends the UIAP sessions still open — a
// connected agent's event stream (HTTP binding) or WebSocket does not
// hold the shutdown until its timeout: serve exits 0 with the sessions
// open.
func TestServeShutdownEndsOpenUIAPSessions(t *testing.T) {
	srv := serveInProcess(t, t.TempDir(), "--tls-addr", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := uiapClients(t, ctx, srv)
	for name, a := range agents {
		if _, err := a.GetCapabilities(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if code := srv.stop(); code != 0 {
		t.Fatalf("serve exited %d with UIAP sessions open:\n%s", code, srv.output.String())
	}
}
