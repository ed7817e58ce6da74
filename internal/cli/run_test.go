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

// Each piece of a run's content is printed once, on its stream: stdout
// holds the answer only; reasoning, the plan, plan steps' replies and the
// words around tool calls go to stderr.
func TestRunPrintsEachPieceOnceOnItsStream(t *testing.T) {
	for _, strategy := range []string{"loop", "react", "plan"} {
		code, out, errs := runCLI(t, "", "run", "--strategy", strategy, "What is (12 + 30) * 2?")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", strategy, code, errs)
		}
		if out != "(12 + 30) * 2 = 84.\n" {
			t.Errorf("%s: stdout %q, want the answer only", strategy, out)
		}
		once := []string{"[tool] calculate", "[result] calculate → 84"}
		if strategy != "plan" {
			once = append(once, "the calculator will evaluate it exactly")
		}
		for _, sentence := range once {
			if n := strings.Count(errs, sentence); n != 1 {
				t.Errorf("%s: stderr has %q %d times, want once:\n%s", strategy, sentence, n, errs)
			}
		}
		if strings.Contains(errs, "(12 + 30) * 2 = 84.") || strings.Contains(out+errs, `{"steps"`) {
			t.Errorf("%s: the answer or the raw plan on stderr:\n%s", strategy, errs)
		}
	}
}

// A reply that calls tools is not the answer: its words go to stderr,
// even when they stream before the tool call; reasoning blocks are shown
// once, and a ReAct step's reasoning made of reasoning blocks is not
// repeated by its reasoning event.
func TestRunReplyWordsAroundToolCallsGoToStderr(t *testing.T) {
	dir := t.TempDir()
	script := writeFile(t, dir, "s.yaml", `steps:
  - reasoning: "I should add."
    text: "Let me add these."
    tool_calls: [{id: c1, name: calculate, arguments: {expression: "2+2"}}]
  - text: "It is 4."
`)
	code, out, errs := runCLI(t, "", "run", "-m", "scripted:"+script, "add 2 and 2")
	if code != 0 || out != "It is 4.\n" {
		t.Fatalf("exit %d, stdout %q, want the last reply only\n%s", code, out, errs)
	}
	for _, want := range []string{"[thinking] I should add.\n", "[model] Let me add these.\n"} {
		if strings.Count(errs, want) != 1 {
			t.Errorf("stderr lacks %q once:\n%s", want, errs)
		}
	}
	react := writeFile(t, dir, "react.yaml", `steps:
  - reasoning: "Four, by adding."
  - text: "4"
`)
	code, out, errs = runCLI(t, "", "run", "--strategy", "react", "-m", "scripted:"+react, "add 2 and 2")
	if code != 0 || out != "4\n" || strings.Count(errs, "Four, by adding.") != 1 {
		t.Errorf("react: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	// Without tools, nothing is held: the reply streams to stdout.
	code, out, _ = runCLI(t, "", "llm", "--tools", "off", "-m", "scripted:"+writeFile(t, dir, "text.yaml", "steps:\n  - text: \"4\"\n"), "add 2 and 2")
	if code != 0 || out != "4\n" {
		t.Errorf("llm without tools: exit %d, stdout %q", code, out)
	}
	code, out, errs = runCLI(t, "", "llm", "-m", "scripted:"+script, "add 2 and 2")
	if code != 0 || out != "It is 4.\n" || strings.Count(errs, "[model] Let me add these.\n") != 1 {
		t.Errorf("llm: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
}
