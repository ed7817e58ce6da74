package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/peertest"
)

// browserScript drives headless Chromium (see e2e/browser/demo.mjs).
const browserScript = "browser/demo.mjs"

// requireBrowser returns node and the Chromium executable, skipping the
// test when Node.js, playwright-core (npm ci --prefix e2e/browser) or
// Chromium (Debian's chromium; AGENTRY_CHROMIUM names another) is missing
// — unless AGENTRY_REQUIRE_BROWSER is set, as .ci/run sets it, where
// their absence fails the test.
func requireBrowser(t *testing.T) (node, chromium string) {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node: "+err.Error())
	}
	if _, err := os.Stat(filepath.Join("browser", "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "playwright-core (npm ci --prefix e2e/browser)")
	}
	chromium = os.Getenv("AGENTRY_CHROMIUM")
	if chromium != "" {
		if _, err := os.Stat(chromium); err != nil {
			missing = append(missing, "AGENTRY_CHROMIUM: "+err.Error())
		}
	} else {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				chromium = p
				break
			}
		}
	}
	if chromium == "" {
		missing = append(missing, "chromium (apt-get install chromium)")
	}
	if len(missing) > 0 {
		peertest.Missing(t, "AGENTRY_REQUIRE_BROWSER", "the browser test needs "+strings.Join(missing, ", "))
	}
	return node, chromium
}

// artifactDir is where a test's artifacts go: $AGENTRY_ARTIFACTS if set,
// else the test's temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENTRY_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUIAP_BrowserDemoStore: headless Chromium opens the demo store of
// `agentry serve`; the page connects with web/uiap.js and serves its
// actions as a UIAP app; the server's agent on the scripted model
// completes a purchase through them (search, add_to_cart, checkout) and
// terminates the session. A screenshot of the final page is saved as an
// artifact.
func TestUIAP_BrowserDemoStore(t *testing.T) {
	node, chromium := requireBrowser(t)
	srv := startServer(t, "--store", "memory:", "--data", t.TempDir(), "--tls-addr", "")
	shot := filepath.Join(artifactDir(t), "uiap-browser-demo.png")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, node, browserScript, srv.URL+"/web/demo/", shot, chromium, "60000")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("browser run took %v", time.Since(start).Round(time.Millisecond))
	if _, serr := os.Stat(shot); serr == nil {
		if os.Getenv("AGENTRY_ARTIFACTS") == "" {
			t.Logf("screenshot: %s (removed with the test's temporary directory; set AGENTRY_ARTIFACTS=DIR to keep it)", shot)
		} else {
			t.Logf("screenshot: %s", shot)
		}
	}
	if err != nil {
		t.Fatalf("browser driver: %v\nstderr:\n%s\nstdout:\n%s\nserver:\n%s", err, stderr.String(), stdout.String(), srv.output.String())
	}
	var page struct {
		Order   string   `json:"order"`
		Cart    []string `json:"cart"`
		Status  string   `json:"status"`
		Log     []string `json:"log"`
		Console []string `json:"console"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &page); err != nil {
		t.Fatalf("driver output: %v\n%s", err, stdout.String())
	}
	if !strings.HasPrefix(page.Order, "Order placed: ORD-") {
		t.Errorf("order line = %q", page.Order)
	}
	if len(page.Cart) != 1 || !strings.HasPrefix(page.Cart[0], "2 × Espresso beans") {
		t.Errorf("cart = %q", page.Cart)
	}
	want := []string{
		`→ search {"query":"espresso"}`, `← search SUCCEEDED`,
		`→ add_to_cart {"quantity":2,"sku":"ESP-250"}`, `← add_to_cart SUCCEEDED`,
		`→ checkout {}`, `← checkout SUCCEEDED`,
	}
	if strings.Join(page.Log, "\n") != strings.Join(want, "\n") {
		t.Errorf("action log:\n%s\nwant:\n%s", strings.Join(page.Log, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range page.Console {
		if strings.HasPrefix(l, "error:") || strings.HasPrefix(l, "pageerror:") {
			t.Errorf("browser console: %s", l)
		}
	}
	if !strings.Contains(srv.output.String(), "web demo: agent finished") {
		t.Errorf("the server did not log the agent's end:\n%s", srv.output.String())
	}
	if _, err := os.Stat(shot); err != nil {
		t.Errorf("no screenshot: %v", err)
	}
}
