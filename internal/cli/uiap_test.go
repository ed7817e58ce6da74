package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUIAPConnect drives the built-in store workflow, served as a UIAP
// app by agentry serve, with agentry uiap connect over both bindings.
func TestUIAPConnect(t *testing.T) {
	srv := serveInProcess(t, t.TempDir(), "--tls-addr", "")
	script := strings.Join([]string{
		`# browse, then move to the cart`,
		`action search_products {"category":"coffee"}`,
		`action transition:cart {}`,
		`get states`,
		`ping`,
		`{"type":"capabilities.get","payload":{"include":["risk"]}}`,
	}, "\n")
	for name, url := range map[string]string{
		"ws":   "ws" + strings.TrimPrefix(srv.plainURL, "http") + "/uiap/ws?workflow=store",
		"http": srv.plainURL + "/uiap",
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errs := runCLI(t, script, "uiap", "connect", url, "--yes")
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errs, out)
			}
			var results, pongs, changed int
			var session bool
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var m map[string]json.RawMessage
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("line %q is not JSON: %v", line, err)
				}
				switch {
				case m["session"] != nil:
					session = true
				case m["result"] != nil:
					if !strings.Contains(string(m["result"]), `"SUCCEEDED"`) {
						t.Errorf("result %s", m["result"])
					}
					results++
				case m["pong"] != nil:
					pongs++
				case m["event"] != nil && strings.Contains(string(m["event"]), `"capabilities.changed"`):
					changed++
				case m["error"] != nil:
					t.Errorf("error line %s", line)
				}
			}
			if !session || results != 2 || pongs != 1 || changed == 0 {
				t.Errorf("session %v, %d results, %d pongs, %d changes:\n%s", session, results, pongs, changed, out)
			}
			if !strings.Contains(out, `"current":true`) || !strings.Contains(out, `"id":"cart","description":"Fill the cart.","current":true`) {
				t.Errorf("the states do not show the cart as current:\n%s", out)
			}
		})
	}
	if code, out, _ := runCLI(t, "action nope {}\n", "uiap", "connect", "ws"+strings.TrimPrefix(srv.plainURL, "http")+"/uiap/ws?workflow=store"); code != 1 || !strings.Contains(out, "capability_unavailable") {
		t.Errorf("an unknown action: exit %d\n%s", code, out)
	}
	// The workflow travels in session.initialize's ext, over either binding.
	if code, out, _ := runCLI(t, "ping\n", "uiap", "connect", srv.plainURL+"/uiap", "--workflow", "store"); code != 0 || !strings.Contains(out, `"pong":true`) {
		t.Errorf("--workflow store over HTTP: exit %d\n%s", code, out)
	}
	if code, out, errs := runCLI(t, "ping\n", "uiap", "connect", srv.plainURL+"/uiap", "--workflow", "nope"); code == 0 {
		t.Errorf("--workflow nope over HTTP was accepted:\n%s%s", out, errs)
	}
	if code, _, _ := runCLI(t, "", "uiap", "connect", "ftp://x"); code != 2 {
		t.Errorf("an ftp URL: exit %d, want 2", code)
	}
}

// TestConformanceUIAPAgainstServe: agentry conformance uiap passes against
// the workflow apps agentry serve exposes.
func TestConformanceUIAPAgainstServe(t *testing.T) {
	srv := serveInProcess(t, t.TempDir(), "--tls-addr", "")
	url := "ws" + strings.TrimPrefix(srv.plainURL, "http") + "/uiap/ws?workflow=store"
	code, out, errs := runCLI(t, "", "conformance", "uiap", "--url", url)
	if code != 0 || !strings.Contains(out, "15 passed, 0 failed") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.HasPrefix(out, "PASS  session/handshake  [§8]\n") {
		t.Errorf("want the shared one-line format of conformance.Result:\n%s", out)
	}
	if code, _, _ := runCLI(t, "", "conformance", "uiap", "--url", "http://x"); code != 2 {
		t.Errorf("an http URL: exit %d, want 2", code)
	}
}
