package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestAgentsCheckAndList(t *testing.T) {
	code, out, errs := runCLI(t, "", "agents", "check", "../../examples/agents")
	if code != 0 || !strings.Contains(out, "agents: ") || !strings.Contains(out, "6 agents: boss, calculator, echo, research, shopper, support") {
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

// Without --agents, serve serves the example agent files support.yaml
// and echo.yaml (one path: no agent is built in Go); --agent-model sets
// the support agent's model through SUPPORT_MODEL.
func TestServeDefaultAgentsAreTheExampleFiles(t *testing.T) {
	srv := serveInProcess(t, t.TempDir(), "--tls-addr", "")
	if out := srv.output.String(); !strings.Contains(out, "agentry: agents: echo, support (the built-in examples/agents") {
		t.Errorf("serve does not say which agents it serves:\n%s", out)
	}
	var list struct {
		Agents []struct {
			Name, Model string
			Tools       []struct{ Name, Risk string }
		}
	}
	getJSON(t, srv.plainURL+"/v1/agents", &list)
	got := map[string]string{}
	for _, a := range list.Agents {
		var tools []string
		for _, tl := range a.Tools {
			tools = append(tools, tl.Name+"="+tl.Risk)
		}
		got[a.Name] = a.Model + " " + strings.Join(tools, ",")
	}
	want := map[string]string{
		"support": "scripted:support lookup_order=read_only,refund_order=write_high_risk",
		"echo":    "scripted:echo ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GET /v1/agents = %v, want %v", got, want)
	}
	var run struct{ Status, Output string }
	postJSON(t, srv.plainURL+"/v1/runs", `{"agent":"echo","input":"hello there","wait":true}`, &run)
	if run.Status != "delivered" || run.Output != "hello there" {
		t.Errorf("echo run = %+v", run)
	}

	srv = serveInProcess(t, t.TempDir(), "--tls-addr", "", "--agent-model", "scripted:demo")
	getJSON(t, srv.plainURL+"/v1/agents/support", &list.Agents[0])
	if list.Agents[0].Model != "scripted:demo" {
		t.Errorf("--agent-model scripted:demo: the support agent's model is %q", list.Agents[0].Model)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func postJSON(t *testing.T, url, body string, v any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("POST %s: %v: %s", url, err, b)
	}
}

// The example shopper drives the store workflow served by the same
// server: it moves through the stages, and place_order (write_high_risk)
// pauses the run until `agentry approve`; then the order is placed and
// the run delivers.
func TestServeExampleShopperDrivesTheStoreWorkflow(t *testing.T) {
	data := t.TempDir()
	keys := filepath.Join(data, "keys")
	if code, _, errs := runCLI(t, "", "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: %s", errs)
	}
	srv := serveInProcess(t, data, "--tls-addr", "", "--agents", "../../examples/agents")
	var run struct {
		RequestID        string `json:"request_id"`
		Status, Output   string
		PendingApprovals []string `json:"pending_approvals"`
	}
	postJSON(t, srv.plainURL+"/v1/runs", `{"agent":"shopper","input":"buy 2 espresso","wait":true}`, &run)
	if run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("shopper run %+v\n%s", run, srv.output.String())
	}
	var approval struct{ Tool, Tier string }
	getJSON(t, srv.plainURL+"/v1/approvals/"+run.PendingApprovals[0], &approval)
	if approval.Tool != "place_order" {
		t.Errorf("approval %+v, want place_order", approval)
	}
	if code, out, errs := runCLI(t, "", "approve", run.PendingApprovals[0], "--as", "alice", "--dir", keys, "--server", srv.plainURL); code != 0 {
		t.Fatalf("approve: exit %d: %s%s", code, out, errs)
	}
	getJSON(t, srv.plainURL+"/v1/runs/"+run.RequestID+"?wait=60s", &run)
	if run.Status != "delivered" || !strings.HasPrefix(run.Output, "Placed order ORD-") || !strings.Contains(run.Output, "2 × Espresso beans") {
		t.Errorf("after the approval: %+v", run)
	}
}

// agentry run --agent FILE builds the sub-agents the file calls, from
// its directory: the boss hands the question to the calculator.
func TestRunAgentFileWithASubagent(t *testing.T) {
	code, out, errs := runCLI(t, "", "run", "--agent", "../../examples/agents/boss.yaml", "What is 6*7?")
	if code != 0 || strings.TrimSpace(out) != "calculator returned 6*7 = 42." {
		t.Fatalf("exit %d: %q %s", code, out, errs)
	}
}

// The example research agent starts its MCP server over stdio
// (examples/mcp/notes, with go run) and answers from its search_notes
// tool.
func TestRunResearchExampleWithItsMCPServer(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the research example starts its MCP server with go run: no go on PATH")
	}
	code, out, errs := runCLI(t, "", "run", "--agent", "../../examples/agents/research.yaml", "What is UAMP?")
	if code != 0 || !strings.Contains(out, "search_notes returned UAMP: UAMP 1.0 carries signed envelopes") {
		t.Fatalf("exit %d: %q %s", code, out, errs)
	}
}

// The README shows examples/agents/calculator.yaml as "your first
// agent": the block is the file, key for key.
func TestREADMEShowsTheCalculatorFile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("../../examples/agents/calculator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	for _, l := range strings.Split(string(file), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	if want := "```yaml\n" + strings.Join(body, "\n") + "\n```"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not show examples/agents/calculator.yaml as it is; want\n%s", want)
	}
}

// On a terminal, agentry run --agent asks the approver (the only one of
// --keys) to decide a write_high_risk call: y approves it — signed with
// the approver's key — and the run delivers; n denies it, and the run
// goes on without the refund. Without an answer (EOF) it stays paused:
// exit 3.
func TestRunAgentAsksOnTheTerminal(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if code, _, errs := runCLI(t, "", "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: %s", errs)
	}
	onTerminal := func(answer string) (int, string, string) {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(answer), stdout: &out, stderr: &errb, isTTY: true}
		code := run(context.Background(), []string{"run", "--agent", "../../examples/agents/support.yaml", "--keys", keys, "refund o-1001"}, e)
		return code, out.String(), errb.String()
	}
	code, out, errs := onTerminal("y\n")
	if code != 0 || !strings.Contains(out, "Refunded") || !strings.Contains(errs, "Approve refund_order as alice? [y/N]") || !strings.Contains(errs, "o-1001") {
		t.Errorf("approved: exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	code, out, errs = onTerminal("n\n")
	if code != 0 || strings.Contains(out, "Refunded order") {
		t.Errorf("denied: exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	if code, _, errs = onTerminal(""); code != 3 || !strings.Contains(errs, "is paused") {
		t.Errorf("no answer: exit %d\n%s", code, errs)
	}
}

// agentry run --agent serves the built-in workflows on a loopback port
// for an agent with a workflow tool: the shopper walks the store and,
// approved on the terminal, places the order.
func TestRunShopperWalksTheBuiltInStore(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if code, _, errs := runCLI(t, "", "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: %s", errs)
	}
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader("y\n"), stdout: &out, stderr: &errb, isTTY: true}
	code := run(context.Background(), []string{"run", "--agent", "../../examples/agents/shopper.yaml", "--keys", keys, "buy 2 espresso"}, e)
	if code != 0 || !strings.HasPrefix(out.String(), "Placed order ORD-") || !strings.Contains(errb.String(), "Approve place_order as alice?") {
		t.Errorf("exit %d\nstdout %q\nstderr %s", code, out.String(), errb.String())
	}
}
