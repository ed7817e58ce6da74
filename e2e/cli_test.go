package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// decodeJSON decodes a command's stdout.
func decodeJSON[T any](t *testing.T, what, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s: stdout is not the expected JSON: %v\n%s", what, err, out)
	}
	return v
}

// `agentry uaip workflows|init|exec|session` against the running binary.
func TestUAIP_ClientCommands(t *testing.T) {
	srv := startServer(t, "--store", "memory:", "--data", t.TempDir(), "--token", "e2e-token")
	uaip := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append([]string{"uaip", "--url", srv.URL, "--token", "e2e-token"}, args...)...)
	}
	mustRun := func(args ...string) string {
		t.Helper()
		code, out, errs := uaip(args...)
		if code != 0 {
			t.Fatalf("agentry uaip %v: exit %d: %s", args, code, errs)
		}
		return out
	}

	list := decodeJSON[[]map[string]any](t, "workflows", mustRun("workflows"))
	if len(list) != 1 || list[0]["name"] != "store" || list[0]["initial_stage"] != "browse" {
		t.Errorf("workflows: %v", list)
	}
	schema := decodeJSON[map[string]any](t, "workflows store", mustRun("workflows", "store"))
	stages, _ := schema["stages"].(map[string]any)
	if schema["name"] != "store" || len(stages) != 4 || stages["checkout"] == nil {
		t.Errorf("workflows store: %v", schema)
	}

	init := decodeJSON[map[string]any](t, "init", mustRun("init", "store"))
	id, _ := init["session_id"].(string)
	if id == "" || init["initial_stage"] != "browse" || init["workflow"] != "store" {
		t.Fatalf("init: %v", init)
	}
	if diff := cmp.Diff([]any{"browse", "cart", "checkout", "complete"}, init["stages"]); diff != "" {
		t.Errorf("init stages (-want +got):\n%s", diff)
	}

	exec := func(args ...string) map[string]any {
		t.Helper()
		return decodeJSON[map[string]any](t, "exec", mustRun(append([]string{"exec", "-s", id, "-w", "store"}, args...)...))
	}
	if r := exec("--stage", "cart"); r["current_stage"] != "cart" || r["action"] != "stage_transition" {
		t.Errorf("exec --stage cart: %v", r)
	}
	r := exec("--task", "add_to_cart", "--args", `{"product_id":"SKU-001","quantity":2}`)
	result, _ := r["result"].(map[string]any)
	if r["action"] != "method_call" || result["total"] != 49.8 {
		t.Errorf("exec --task add_to_cart: %v", r)
	}
	if r := exec("--state", `{"user.email":"ada@example.com"}`); r["action"] != "state_input" {
		t.Errorf("exec --state: %v", r)
	}

	s := decodeJSON[map[string]any](t, "session", mustRun("session", id))
	want := map[string]any{"cart": map[string]any{"SKU-001": 2.0}, "user.email": "ada@example.com"}
	if diff := cmp.Diff(want, s["state"]); s["current_stage"] != "cart" || s["session_id"] != id || diff != "" {
		t.Errorf("session: %v (state -want +got):\n%s", s, diff)
	}

	// A refused action: exit 1 and the server's detail and extras.
	code, out, errs := uaip("exec", "-s", id, "-w", "store", "--stage", "complete")
	if code != 1 || out != "" || !strings.Contains(errs, "HTTP 422") || !strings.Contains(errs, "allowed: [browse checkout]") {
		t.Errorf("invalid transition: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Without the token: 401.
	code, _, errs = runCLI(t, "uaip", "--url", srv.URL, "workflows")
	if code != 1 || !strings.Contains(errs, "Unauthorized") {
		t.Errorf("no token: exit %d, stderr %q", code, errs)
	}
	srv.stop(t)
}

// `agentry conformance uaip` against the running binary, once the command
// is mounted.
func TestUAIP_ConformanceCommand(t *testing.T) {
	if code, _, errs := runCLI(t, "conformance", "--help"); code != 0 || strings.Contains(errs, "unknown command") {
		t.Skip("this agentry binary has no conformance command yet")
	}
	srv := startServer(t, "--store", "memory:", "--data", t.TempDir())
	code, out, errs := runCLI(t, "conformance", "uaip", "--url", srv.URL)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.HasSuffix(lines[len(lines)-1], "passed, 0 failed (3 skipped)") {
		t.Errorf("exit %d:\n%s\n%s", code, out, errs)
	}
	srv.stop(t)
}

// The first hour with the binary: --version names the six protocols, the
// README's scripted example runs from the repository's root, and
// `S=$(agentry uaip init store -q)` gives a session id the next command
// takes.
func TestCLI_FirstHour(t *testing.T) {
	code, out, errs := runCLI(t, "--version")
	for _, p := range []string{"UPP-1.3", "UAP-1.1", "UAIP-0.1", "UAICP-0.3", "UAMP-1.0", "UIAP Core 0.1"} {
		if code != 0 || !strings.Contains(out, p) {
			t.Errorf("--version: exit %d, %q lacks %s (%s)", code, out, p, errs)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--strategy", "plan", "-m", "scripted:examples/scripted/plan.yaml", "Summarise the incident")
	cmd.Dir = ".." // the repository's root, where the README's commands run
	cmd.Env = childEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stdout.String() != "Payments were down from 09:12 to 09:40 (28 minutes): the connection pool was exhausted; a restart fixed it.\n" {
		t.Errorf("the README's scripted plan: %v, stdout %q\n%s", err, stdout.String(), stderr.String())
	}

	srv := startServer(t, "--store", "memory:", "--data", t.TempDir(), "--tls-addr", "")
	code, id, errs := runCLI(t, "uaip", "--url", srv.URL, "init", "store", "-q")
	id = strings.TrimSpace(id)
	if code != 0 || len(id) != 36 {
		t.Fatalf("uaip init -q: exit %d, stdout %q, %s", code, id, errs)
	}
	code, out, errs = runCLI(t, "uaip", "--url", srv.URL, "exec", "-s", id, "-w", "store", "--task", "search_products", "--args", `{"category":"coffee"}`)
	if code != 0 || !strings.Contains(out, `"products"`) {
		t.Errorf("uaip exec on the fresh session: exit %d, %s%s", code, out, errs)
	}
	srv.stop(t)
}
