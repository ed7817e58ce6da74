package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAgentsCheckAndList(t *testing.T) {
	code, out, errs := runCLI(t, "", "agents", "check", "../../examples/agents")
	if code != 0 || !strings.Contains(out, "agents: calculator, support") {
		t.Fatalf("check examples/agents: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "", "agents", "list", "../../examples/agents")
	if code != 0 || !strings.Contains(out, "support     scripted:support  builtin:lookup_order builtin:refund_order") {
		t.Fatalf("list examples/agents: exit %d\n%s%s", code, out, errs)
	}
}

// A bad directory: exit 1, every problem with its file and line, what
// only building finds (an unknown builtin) included.
func TestAgentsCheckReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"a.yaml": "model: scripted:demo\ntoolz: []\n",
		"b.yaml": "model: scripted:demo\ntools:\n  - builtin: shell\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := runCLI(t, "", "agents", "check", dir)
	if code != 1 || !strings.Contains(errs, "a.yaml:2: /toolz: unknown key") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI(t, "", "agents", "check", dir)
	if code != 1 || !strings.Contains(errs, `b.yaml:3: /tools/0/builtin: no builtin tool is named "shell"`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// agentry run --agent runs a definition offline under governance: the
// answer on stdout; a high-risk call pauses (exit 3) and says how to go on.
func TestRunDefinedAgent(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "agentry.db")
	code, out, errs := runCLI(t, "", "run", "--store", store, "--agent", "../../examples/agents/calculator.yaml", "What is (12 + 30) * 2?")
	if code != 0 || out != "(12 + 30) * 2 = 84.\n" {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	code, out, errs = runCLI(t, "", "run", "--store", store, "--agents", "../../examples/agents", "--agent", "support", "refund o-1001")
	if code != 3 || out != "" || !strings.Contains(errs, "is paused: a write_high_risk call waits for approval") {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	code, _, errs = runCLI(t, "", "run", "--agent", "../../examples/agents/support.yaml", "refund o-1001")
	if code != 3 || !strings.Contains(errs, "it was kept in memory and ends here") {
		t.Fatalf("without --store: exit %d\nstderr %s", code, errs)
	}
	if code, _, errs = runCLI(t, "", "run", "--agent", "../../examples/agents/calculator.yaml", "-m", "scripted:demo", "hi"); code != 2 || !strings.Contains(errs, "drop --model") {
		t.Errorf("--agent with -m: exit %d: %s", code, errs)
	}
}
