package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/peertest"
)

// TestREADME_Walkthroughs runs the shell blocks of README.md top to bottom,
// in the order they are written, in a new directory (a fresh clone's view:
// no agentry-data, only examples/ beside it), as a new user would: every
// command must exit 0, and the commands listed in readmeExpect must print
// what the README says they print. Transformations, and nothing else:
//   - `go run ./cmd/agentry` is the agentry binary built by TestMain;
//   - `agentry serve …` runs in the background (a new one replaces the
//     previous; the next command starts once /healthz answers), as it
//     would in a second terminal;
//   - the README's test command (`go test …`) is not run from inside the
//     test suite;
//   - a block after `<!-- e2e: skip … -->` is not run (it needs an API key
//     or a model server).
//
// It needs bash, curl and jq; without them the test is skipped, unless
// AGENTRY_REQUIRE_README is set (.ci/run sets it and installs them).
func TestREADME_Walkthroughs(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			peertest.Missing(t, "AGENTRY_REQUIRE_README", tool+" is not found: the README's commands need it")
		}
	}
	// The README's commands use the documented default ports.
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:8443"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			peertest.Missing(t, "AGENTRY_REQUIRE_README", "the README's address "+addr+" is busy (a server of yours?): "+err.Error())
		}
		ln.Close()
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(string(readme))
	if len(cmds) < 20 {
		t.Fatalf("only %d commands found in the README's shell blocks", len(cmds))
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS("../examples")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	script := readmeScript(cmds)
	if err := os.WriteFile(filepath.Join(dir, "walkthrough.sh"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "walkthrough.sh")
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "AGENTRY_BIN="+binary, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	serveLog, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	if strings.Contains(string(serveLog), "DATA RACE") {
		t.Errorf("a server reported a data race:\n%s", serveLog)
	}
	if err != nil {
		t.Fatalf("the walkthrough script failed (%v):\n%s\nserver log:\n%s", err, out, serveLog)
	}
	results := splitResults(string(out))
	failed := false
	for i, c := range cmds {
		r, ok := results[i]
		switch {
		case !ok:
			t.Errorf("README line %d: `%s` did not run", c.line, c.text)
			failed = true
		case r.code != 0:
			t.Errorf("README line %d: `%s` exited %d:\n%s", c.line, c.text, r.code, r.output)
			failed = true
		}
	}
	for _, e := range readmeExpect {
		found := false
		for i, c := range cmds {
			if !strings.Contains(c.text, e.command) {
				continue
			}
			found = true
			if got := results[i].output; !e.want.MatchString(got) {
				t.Errorf("README line %d: `%s` printed\n%s\nwant it to match %s", c.line, c.text, got, e.want)
				failed = true
			}
		}
		if !found {
			t.Errorf("no README command contains %q: update readmeExpect with the README", e.command)
		}
	}
	if failed {
		t.Logf("server log:\n%s", serveLog)
	}
}

// readmeExpect pins what the README says some commands print. Each
// command is found by a fragment of its text.
var readmeExpect = []struct {
	command string
	want    *regexp.Regexp
}{
	{`"stage":"checkout"}'      # 422`, regexp.MustCompile(`"missing":\["user\.email"\]`)},
	{`"task":"place_order"`, regexp.MustCompile(`"stage":"checkout","result":\{.*"order_id":"ORD-`)},
	{`curl -s localhost:8080/api/sessions/$S`, regexp.MustCompile(`"current_stage": "checkout"`)},
	{`agentry approvals `, regexp.MustCompile(`(?s)refund.*arguments.*o-1001.*rollback`)},
	{`approve $A --as alice`, regexp.MustCompile(`(?i)approved`)},
	{`/v1/runs/$R?wait=30s`, regexp.MustCompile(`"status": "delivered"`)},
	{`agentry audit verify`, regexp.MustCompile(`(?i)intact|verified|ok`)},
	{`agentry uamp send`, regexp.MustCompile(`Draw me a sheep`)},
	{`agentry conformance uamp`, regexp.MustCompile(`\b0 failed`)},
	{`agentry uiap connect`, regexp.MustCompile(`"SKU-001"`)},
	{`agentry conformance uiap`, regexp.MustCompile(`\b0 failed`)},
	{`--task add_to_cart`, regexp.MustCompile(`SKU-001`)},
	{`agentry run "What is (12 + 30) * 2?"`, regexp.MustCompile(`(?m)^\(12 \+ 30\) \* 2 = 84\.$`)},
	{`agentry run --strategy react`, regexp.MustCompile(`\b84\b`)},
	{`agentry agents check examples/agents`, regexp.MustCompile(`\d+ agents: boss, calculator, echo, research, shopper, support`)},
	{`agentry run --agent examples/agents/calculator.yaml`, regexp.MustCompile(`(?m)^\(12 \+ 30\) \* 2 = 84\.$`)},
	{`agentry run --agent examples/agents/boss.yaml`, regexp.MustCompile(`(?m)^calculator returned 6\*7 = 42\.$`)},
	{`"And 7 * 8?"`, regexp.MustCompile(`\b56\b`)},
}

// readmeCommand is one logical shell command of the README.
type readmeCommand struct {
	line int // of its first line in README.md
	text string
}

// readmeCommands returns the logical commands of the README's ```sh
// blocks in order, skipping the blocks marked <!-- e2e: skip … -->.
func readmeCommands(readme string) []readmeCommand {
	var out []readmeCommand
	lines := strings.Split(readme, "\n")
	prev := "" // the last non-empty line before a block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) != "```sh" {
			if strings.TrimSpace(l) != "" {
				prev = strings.TrimSpace(l)
			}
			continue
		}
		skip := strings.HasPrefix(prev, "<!-- e2e: skip")
		var cur []string
		start := 0
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			if skip {
				continue
			}
			if len(cur) == 0 {
				if strings.TrimSpace(lines[i]) == "" {
					continue
				}
				start = i + 1
			}
			cur = append(cur, lines[i])
			if !continues(strings.Join(cur, "\n")) {
				out = append(out, readmeCommand{line: start, text: strings.Join(cur, "\n")})
				cur = nil
			}
		}
		prev = ""
	}
	return out
}

// continues reports whether a shell command goes on on the next line: it
// ends (comments aside) with a pipe, a backslash or && / ||, or leaves a
// quote or a brace open.
func continues(cmd string) bool {
	var quote byte
	braces := 0
	code := make([]byte, 0, len(cmd))
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(cmd) {
				i++
			}
			continue
		case c == '\'' || c == '"':
			quote = c
			continue
		case c == '#' && (i == 0 || cmd[i-1] == ' ' || cmd[i-1] == '\t' || cmd[i-1] == '\n'):
			for i < len(cmd) && cmd[i] != '\n' { // a comment, to the end of its line
				i++
			}
			if i < len(cmd) {
				code = append(code, '\n')
			}
			continue
		case c == '{':
			braces++
		case c == '}':
			braces--
		}
		code = append(code, c)
	}
	if quote != 0 || braces > 0 {
		return true
	}
	end := strings.TrimRight(string(code), " \t\n")
	return strings.HasSuffix(end, "|") || strings.HasSuffix(end, "\\") || strings.HasSuffix(end, "&&") || strings.HasSuffix(end, "||")
}

// readmeScript turns the commands into one bash script that marks each
// command's output and exit status.
func readmeScript(cmds []readmeCommand) string {
	var b strings.Builder
	b.WriteString(`set -u -o pipefail
agentry() { "$AGENTRY_BIN" "$@"; }
SERVE_PID=
stop_serve() {
  if [ -n "$SERVE_PID" ]; then kill -TERM "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; SERVE_PID=; fi
}
serve_bg() {
  stop_serve
  "$AGENTRY_BIN" serve "$@" >>serve.log 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 1 600); do
    curl -fs -o /dev/null --max-time 2 http://127.0.0.1:8080/healthz && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || { echo "agentry serve $* exited"; SERVE_PID=; return 1; }
    sleep 0.1
  done
  echo "agentry serve $* did not answer /healthz within 60 s"; return 1
}
trap stop_serve EXIT
`)
	for i, c := range cmds {
		text := strings.ReplaceAll(c.text, "go run ./cmd/agentry", "agentry")
		fmt.Fprintf(&b, "printf '\\n@@CMD %d\\n'\n", i)
		switch {
		case strings.HasPrefix(text, "go test "):
			b.WriteString("true # the README's test command is what runs this test\n")
		case strings.HasPrefix(text, "agentry serve"):
			b.WriteString("serve_bg" + strings.TrimPrefix(text, "agentry serve") + "\n")
		default:
			b.WriteString("{\n" + text + "\n}\n")
		}
		fmt.Fprintf(&b, "printf '\\n@@RC %d %%d\\n' $?\n", i)
	}
	return b.String()
}

type cmdResult struct {
	code   int
	output string
}

var marker = regexp.MustCompile(`(?m)^@@(CMD|RC) (\d+)(?: (\d+))?$`)

// splitResults reads the marked output of readmeScript.
func splitResults(out string) map[int]cmdResult {
	res := map[int]cmdResult{}
	idx := marker.FindAllStringSubmatchIndex(out, -1)
	for k, m := range idx {
		kind := out[m[2]:m[3]]
		n, _ := strconv.Atoi(out[m[4]:m[5]])
		if kind != "RC" {
			continue
		}
		code, _ := strconv.Atoi(out[m[6]:m[7]])
		start := 0
		if k > 0 {
			start = idx[k-1][1]
		}
		res[n] = cmdResult{code: code, output: strings.TrimSpace(out[start:m[0]])}
	}
	return res
}

func TestREADME_CommandSplitting(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		more bool
	}{
		{`curl -s localhost:8080/x | jq .   # a comment | with a pipe`, false},
		{`printf 'a\nb' |`, true},
		{`echo '{"a":1}' |   # then`, true},
		{`x() { curl -s "$1"; }`, false},
		{`x() {`, true},
		{`go run ./cmd/agentry serve \`, true},
		{`echo "it's # not a comment |`, true},
		{`echo 'open`, true},
		{`a && b`, false},
		{`a &&`, true},
	} {
		if got := continues(tc.cmd); got != tc.more {
			t.Errorf("continues(%q) = %v, want %v", tc.cmd, got, tc.more)
		}
	}
	readme := "intro\n```sh\necho a |\n  cat   # x\nR=$(b)\n```\n<!-- e2e: skip (needs a key) -->\n```sh\nsecret\n```\n```sh\n\nlast\n```\n"
	got := readmeCommands(readme)
	want := []readmeCommand{{3, "echo a |\n  cat   # x"}, {5, "R=$(b)"}, {13, "last"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("readmeCommands = %v, want %v", got, want)
	}
}
