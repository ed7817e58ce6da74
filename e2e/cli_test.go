package e2e

import (
	"encoding/json"
	"strings"
	"testing"

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
