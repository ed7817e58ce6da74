package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
)

func TestRunEveryStrategyOffline(t *testing.T) {
	for _, strategy := range []string{"loop", "react", "plan"} {
		code, out, errs := runCLI(t, "", "run", "--strategy", strategy, "What is (12 + 30) * 2?")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", strategy, code, errs)
		}
		if !strings.HasSuffix(out, "(12 + 30) * 2 = 84.\n") {
			t.Errorf("%s: stdout %q", strategy, out)
		}
		for _, want := range []string{"── step 1 ──", "[tool] calculate", "[result] calculate → 84", strategy + " ·"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", strategy, want, errs)
			}
		}
	}
	_, _, errs := runCLI(t, "", "run", "--strategy", "plan", "6*7")
	if !strings.Contains(errs, "[plan] 2 step(s)") || !strings.Contains(errs, "[plan] ▶ work") {
		t.Errorf("plan not rendered:\n%s", errs)
	}
}

func TestRunJSONIsTheEventStream(t *testing.T) {
	code, out, errs := runCLI(t, "", "run", "--json", "2+2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var events, uap, upp int
	var last map[string]any
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("line is not JSON: %q", sc.Text())
		}
		if _, ok := raw["result"]; ok {
			last = raw
			continue
		}
		var ev agent.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line is not an AgentStreamEvent: %v: %s", err, sc.Text())
		}
		events++
		if ev.Source == agent.SourceUAP {
			uap++
		} else {
			upp++
		}
	}
	if events == 0 || uap == 0 || upp == 0 || last == nil {
		t.Errorf("%d events (%d uap, %d upp), result %v", events, uap, upp, last != nil)
	}
}

func TestRunScriptFileAndSessions(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.yaml")
	os.WriteFile(script, []byte(`steps:
  - tool_calls: [{id: c1, name: calculate, arguments: {expression: "6*7"}}]
  - error: {code: PROVIDER_ERROR, message: "the model went away"}
`), 0o644)
	store := "sqlite://" + filepath.Join(dir, "agentry.db")
	const session = "5c1e0b7a-2a44-4c8e-9a55-0c6f3a1f2b9d"
	code, _, errs := runCLI(t, "", "run", "-m", "scripted:"+script, "--store", store, "--session", session, "compute")
	if code != 1 || !strings.Contains(errs, "the model went away") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// The run was checkpointed after step 1: resume it with another script.
	os.WriteFile(script, []byte("steps:\n  - text: \"resumed: 42\"\n"), 0o644)
	code, out, errs := runCLI(t, "", "run", "-m", "scripted:"+script, "--store", store, "--session", session)
	if code != 0 || out != "resumed: 42\n" || !strings.Contains(errs, "── step 2 ──") {
		t.Fatalf("resume: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	// Completed: nothing to resume, but the conversation can continue.
	if code, _, errs := runCLI(t, "", "run", "-m", "scripted:"+script, "--store", store, "--session", session); code != 1 || !strings.Contains(errs, "already completed") {
		t.Errorf("second resume: exit %d: %s", code, errs)
	}
	os.WriteFile(script, []byte("steps:\n  - text: \"continued\"\n"), 0o644)
	code, out, _ = runCLI(t, "", "run", "-m", "scripted:"+script, "--store", "file:"+filepath.Join(dir, "ckpt"), "--session", session, "next question")
	if code != 0 || out != "continued\n" {
		t.Errorf("new session in a file store: exit %d, %q", code, out)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"strategy":        {"run", "--strategy", "wander", "hi"},
		"no prompt":       {"run"},
		"unknown session": {"run", "--store", "memory:", "--session", "nobody"},
		"missing script":  {"run", "-m", "scripted:/no/such/file.yaml", "hi"},
	} {
		code, _, errs := runCLI(t, "", args...)
		if code != 2 || !strings.HasPrefix(errs, "agentry: ") {
			t.Errorf("%s: exit %d, stderr %q", name, code, errs)
		}
	}
}
