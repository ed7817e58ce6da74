package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm"
)

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, isTTY: stdin == ""}
	code = run(context.Background(), args, e)
	return code, out.String(), errb.String()
}

func TestLLMDemoStreamsToolLoop(t *testing.T) {
	code, out, errs := runCLI(t, "", "llm", "What is (12 + 30) * 2?")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "(12 + 30) * 2 = 84.") {
		t.Errorf("stdout = %q", out)
	}
	for _, want := range []string{"offline demo model", "[tool calculate] → 84", "2 cycle(s)", "tokens"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestLLMJSONOutputIsTurnJSON(t *testing.T) {
	code, out, errs := runCLI(t, "", "llm", "--json", "count these words")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var turn llm.Turn
	if err := json.Unmarshal([]byte(out), &turn); err != nil {
		t.Fatalf("output is not TurnJSON: %v\n%s", err, out)
	}
	if turn.Cycles != 2 || !strings.Contains(turn.Text(), "3 words") {
		t.Errorf("turn: %d cycles, %q", turn.Cycles, turn.Text())
	}
}

func TestLLMPromptFromStdin(t *testing.T) {
	code, out, _ := runCLI(t, "What is 6*7?\n", "llm", "-")
	if code != 0 || !strings.Contains(out, "6*7 = 42.") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	code, out, _ = runCLI(t, "2^10", "llm")
	if code != 0 || !strings.Contains(out, "= 1024.") {
		t.Errorf("piped stdin without '-': exit %d, stdout %q", code, out)
	}
}

func TestLLMUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no prompt":      {"llm"},
		"bad model":      {"llm", "-m", "claude", "hi"},
		"unknown vendor": {"llm", "-m", "acme:x", "hi"},
		"bad param":      {"llm", "-p", "novalue", "hi"},
		"bad tools":      {"llm", "--tools", "maybe", "hi"},
		"unknown flag":   {"llm", "--frobnicate", "hi"},
		"unknown cmd":    {"frobnicate"},
	} {
		code, _, errs := runCLI(t, "", args...)
		if code != 2 || !strings.HasPrefix(errs, "agentry: ") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 with a message", name, code, errs)
		}
	}
}

func TestLLMMissingKeyIsAClearMessage(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	code, _, errs := runCLI(t, "", "llm", "-m", "anthropic:claude-sonnet-4-5", "hi")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	if !strings.Contains(errs, "ANTHROPIC_API_KEY") || strings.Contains(errs, "goroutine") || strings.Count(errs, "\n") != 1 {
		t.Errorf("stderr = %q, want one line naming the variable", errs)
	}
}

// A real provider path: an OpenAI-compatible server streaming a reply.
func TestLLMStreamsFromACompatibleServer(t *testing.T) {
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":", world"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
		} {
			io.WriteString(w, "data: "+chunk+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	code, out, errs := runCLI(t, "", "llm", "-m", "compat:tiny", "--base-url", srv.URL, "-s", "Be brief.", "--max-tokens", "50", "-p", "temperature=0", "Greet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if out != "Hello, world\n" {
		t.Errorf("stdout = %q", out)
	}
	if !strings.Contains(errs, "9 in / 3 out") {
		t.Errorf("usage line missing: %q", errs)
	}
	if body["model"] != "tiny" || body["temperature"] != 0.0 || body["max_tokens"] != 50.0 || body["stream"] != true {
		t.Errorf("request body = %v", body)
	}
}

func TestParseParams(t *testing.T) {
	got, err := parseParams([]string{"temperature=0.2", "stop=[\"x\"]", "name=plain text", `options={"a":1}`, `options={"b":2}`})
	if err != nil {
		t.Fatal(err)
	}
	if got["temperature"] != 0.2 || got["name"] != "plain text" || len(got["stop"].([]any)) != 1 {
		t.Errorf("params = %v", got)
	}
	if o := got["options"].(map[string]any); o["a"] != 1.0 || o["b"] != 2.0 {
		t.Errorf("merged options = %v", o)
	}
}

// agentry version and agentry --version name the version and all six
// protocols implemented.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errs := runCLI(t, "", args...)
		if code != 0 || !strings.HasPrefix(out, "agentry ") || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
		for _, p := range []string{"UPP-1.3", "UAP-1.1", "UAIP-0.1", "UAICP-0.3", "UAMP-1.0", "UIAP Core 0.1"} {
			if !strings.Contains(out, p) {
				t.Errorf("%v: %q lacks %s", args, out, p)
			}
		}
	}
}
