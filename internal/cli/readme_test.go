package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the module root, where README.md and examples/ live.
const repoRoot = "../.."

// command is an agentry command line found in a text: its arguments as a
// shell splits them, and the variable it is assigned to (S=$(agentry …)).
type command struct {
	assign string
	args   []string
	line   string
}

// agentryCommands returns the agentry command lines of text whose first
// argument is one of names.
func agentryCommands(text string, names ...string) []command {
	var out []command
	for _, line := range strings.Split(text, "\n") {
		i := strings.Index(line, "agentry ")
		if i < 0 || (i > 0 && line[i-1] == '"') { // not `Use "agentry uaip [command] --help"`
			continue
		}
		args := shellWords(line[i+len("agentry "):])
		if len(args) == 0 || !contains(names, args[0]) {
			continue
		}
		c := command{args: args, line: strings.TrimSpace(line)}
		if before := line[:i]; strings.Contains(before, "=$(") {
			c.assign = strings.TrimSpace(before[strings.LastIndex(before[:strings.Index(before, "=$(")], " ")+1 : strings.Index(before, "=$(")])
		}
		out = append(out, c)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shellWords splits s as a shell would a simple command: words, '…' and
// "…" quoting; it stops at an unquoted #, ), |, ;, &, > or backquote.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.IndexByte(")|;&>`", c) >= 0, c == '#' && !inWord:
			if inWord {
				words = append(words, w.String())
			}
			return words
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readmeAnswers are the offline demo model's answers to the prompts of the
// README's agentry llm and agentry run commands.
var readmeAnswers = map[string]string{
	"What is (12 + 30) * 2?": "(12 + 30) * 2 = 84.",
	"What is 1234 * 5678?":   "1234 * 5678 = 7006652.",
	"Why is the sky blue?":   "Your text has 5 words and 20 characters.",
	"Hello":                  "Your text has 1 word and 5 characters.",
	"count these words":      "Your text has 3 words and 17 characters.",
	"and in Rome?":           "Your text has 3 words and 12 characters.",
	"What is 6 * 7?":         "6 * 7 = 42.",
	"What is 6*7?":           "6*7 = 42.",
	"And 7 * 8?":             "7 * 8 = 56.",
	"Write a haiku about Go": "Your text has 5 words and 22 characters.",
}

// Every prompt of the README's agentry llm and agentry run commands, asked
// of the offline demo model with llm and with each strategy of run: stdout
// is exactly the answer.
func TestREADME_PromptsOffline(t *testing.T) {
	prompts := map[string]bool{}
	for _, c := range agentryCommands(readme(t)+"\n"+rootHelp(t), "llm", "run") {
		if model := flagValue(c.args, "-m"); strings.HasPrefix(model, "scripted:") && model != "scripted:demo" {
			continue // a script: TestREADME_ScriptedPlanExample
		}
		prompts[c.args[len(c.args)-1]] = true
	}
	if len(prompts) < 5 {
		t.Fatalf("found only %d prompts in the README", len(prompts))
	}
	for prompt := range prompts {
		want, ok := readmeAnswers[prompt]
		if !ok {
			t.Errorf("the README asks %q: add the demo model's answer to readmeAnswers", prompt)
			continue
		}
		for _, args := range [][]string{{"llm"}, {"run", "--strategy", "loop"}, {"run", "--strategy", "react"}, {"run", "--strategy", "plan"}} {
			code, out, errs := runCLI(t, "", append(args, prompt)...)
			if code != 0 || out != want+"\n" {
				t.Errorf("agentry %s %q: exit %d, stdout %q, want %q\n%s", strings.Join(args, " "), prompt, code, out, want+"\n", errs)
			}
		}
	}
	code, out, errs := runCLI(t, "", "llm", "--json", "count these words")
	var turn map[string]any
	if err := json.Unmarshal([]byte(out), &turn); code != 0 || err != nil {
		t.Errorf("llm --json: exit %d, %v\n%s", code, err, errs)
	}
}

// rootHelp is agentry --help, which has examples too.
func rootHelp(t *testing.T) string {
	_, out, _ := runCLI(t, "", "--help")
	return out
}

// flagValue returns the value following flag in args, or "".
func flagValue(args []string, flag string) string {
	for i, a := range args[:len(args)-1] {
		if a == flag {
			return args[i+1]
		}
	}
	return ""
}

// The README's scripted plan example runs from the repository's root as
// written.
func TestREADME_ScriptedPlanExample(t *testing.T) {
	var found []command
	for _, c := range agentryCommands(readme(t), "run") {
		if strings.HasPrefix(flagValue(c.args, "-m"), "scripted:") {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one agentry run -m scripted:FILE in the README, found %v", found)
	}
	t.Chdir(repoRoot)
	code, out, errs := runCLI(t, "", found[0].args...)
	want := "Payments were down from 09:12 to 09:40 (28 minutes): the connection pool was exhausted; a restart fixed it.\n"
	if code != 0 || out != want {
		t.Errorf("%s: exit %d, stdout %q, want %q\n%s", found[0].line, code, out, want, errs)
	}
	for _, step := range []string{"[plan] 2 step(s)", "[result] word_stats → {\"characters\":120,\"words\":18}", "[model] The report has 18 words."} {
		if !strings.Contains(errs, step) {
			t.Errorf("stderr lacks %q:\n%s", step, errs)
		}
	}
}

// Every agentry uaip example — the README's and agentry uaip --help's —
// works, in order, against a fresh server.
func TestREADME_UAIPExamples(t *testing.T) {
	_, help, _ := runCLI(t, "", "uaip", "--help")
	for name, text := range map[string]string{"README.md": readme(t), "agentry uaip --help": help} {
		cmds := agentryCommands(text, "uaip")
		if len(cmds) < 3 {
			t.Fatalf("%s: found only %d agentry uaip commands", name, len(cmds))
		}
		srv := serveInProcess(t, t.TempDir(), "--tls-addr", "")
		vars := map[string]string{}
		for _, c := range cmds {
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = os.Expand(a, func(v string) string { return vars[v] })
			}
			code, out, errs := runCLI(t, "", append(args, "--url", srv.plainURL)...)
			if code != 0 {
				t.Errorf("%s: %s: exit %d\n%s%s", name, c.line, code, out, errs)
				continue
			}
			if c.assign != "" {
				vars[c.assign] = strings.TrimSpace(out)
			}
		}
		if id := vars["S"]; len(id) != 36 {
			t.Errorf("%s: S=$(agentry uaip init … -q) gave %q, not a session id", name, id)
		}
		srv.stop()
	}
}

// The files agentry writes in a checkout are ignored by git, and the
// README writes no private key where git would see it.
func TestREADME_KeysStayOutOfTheRepository(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := strings.Fields(string(b))
	for _, want := range []string{"/agentry-data/", "/*.jwk"} {
		if !contains(ignored, want) {
			t.Errorf(".gitignore lacks %s", want)
		}
	}
	outside := func(path string) bool {
		return strings.HasPrefix(path, "~/.config/agentry/") || strings.HasPrefix(path, "agentry-data/") || strings.HasPrefix(path, "./agentry-data/")
	}
	keygens := agentryCommands(readme(t), "uamp")
	n := 0
	for _, c := range keygens {
		if len(c.args) < 2 || c.args[1] != "keygen" {
			continue
		}
		n++
		if out := flagValue(c.args, "--out"); !outside(out) {
			t.Errorf("%s: the private key goes to %q, inside the repository", c.line, out)
		}
		if _, redirect, ok := strings.Cut(c.line, ">"); ok && !outside(strings.Fields(redirect)[0]) {
			t.Errorf("%s: the public key goes to %q, inside the repository", c.line, redirect)
		}
	}
	if n == 0 {
		t.Error("no agentry uamp keygen in the README")
	}
}
