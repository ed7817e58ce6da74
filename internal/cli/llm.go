package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/demo"
	"github.com/agentry-dev/agentry/internal/models"
	"github.com/agentry-dev/agentry/llm"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// modelFlags are the flags that pick and configure a model, shared by the
// commands that run one.
type modelFlags struct {
	model     string
	system    string
	maxTokens int
	params    []string
	baseURL   string
	tools     string
	timeout   time.Duration
	retries   int
}

func (f *modelFlags) register(fl *pflag.FlagSet) {
	fl.StringVarP(&f.model, "model", "m", models.Default, "model as provider:model")
	fl.StringVarP(&f.system, "system", "s", "", "system prompt")
	fl.IntVar(&f.maxTokens, "max-tokens", 0, "cap the reply length (provider default when 0; Anthropic needs one and gets 4096)")
	fl.StringArrayVarP(&f.params, "param", "p", nil, "vendor parameter key=value copied into the request body; value is JSON if it parses, else a string (repeatable)")
	fl.StringVar(&f.baseURL, "base-url", "", "the provider's API address (else <PROVIDER>_BASE_URL, the vendor's variable such as OPENAI_BASE_URL or OLLAMA_HOST, or the vendor's default); any OpenAI-compatible server with -m compat:MODEL")
	fl.StringVar(&f.tools, "tools", "auto", "built-in tools calculate and word_stats: on, off, or auto (on for the demo model and scripts)")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "overall time limit")
	fl.IntVar(&f.retries, "retries", 2, "retries of rate-limited or failed requests (exponential backoff honouring Retry-After)")
}

// options resolves the model and builds the UPP options the flags describe.
func (f *modelFlags) options() (llm.LLMOptions, error) {
	ref, err := models.Resolve(f.model, f.baseURL)
	if err != nil {
		return llm.LLMOptions{}, usageError("%v", err)
	}
	params, err := parseParams(f.params)
	if err != nil {
		return llm.LLMOptions{}, usageError("%v", err)
	}
	for k, v := range models.MaxTokens(ref, f.maxTokens) {
		if _, set := params[k]; !set {
			params[k] = v
		}
	}
	opts := llm.LLMOptions{Model: ref, System: f.system, Params: params}
	if len(params) == 0 {
		opts.Params = nil
	}
	switch f.tools {
	case "on":
		opts.Tools = demo.Tools()
	case "auto":
		if ref.Provider != nil && ref.Provider.Name() == "scripted" {
			opts.Tools = demo.Tools()
		}
	case "off":
	default:
		return llm.LLMOptions{}, usageError("--tools must be on, off or auto, not %q", f.tools)
	}
	if f.retries > 0 {
		opts.Config.RetryStrategy = llm.ExponentialBackoff{MaxRetries: f.retries}
		opts.Config.RetryAfterMax = time.Minute
	}
	return opts, nil
}

// withTimeout applies --timeout to ctx.
func (f *modelFlags) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.timeout > 0 {
		return context.WithTimeout(ctx, f.timeout)
	}
	return context.WithCancel(ctx)
}

type llmFlags struct {
	modelFlags
	noStream bool
	jsonOut  bool
}

func llmCmd(e *env) *cobra.Command {
	var f llmFlags
	cmd := &cobra.Command{
		Use:   "llm [flags] PROMPT...",
		Short: "Send one prompt to a model and stream the reply",
		Long: `Send one prompt to a model (UPP-1.3) and stream the reply to stdout as it
arrives; tool activity, reasoning and token usage go to stderr.

The model is named provider:model. Providers:
` + providerHelp() + `
API keys come from the environment (<PROVIDER>_API_KEY). ` + baseURLHelp + `

With no -m, the offline demo model runs: deterministic, no network, no
key; it uses the built-in calculate and word_stats tools to show the tool
loop.

A PROMPT of "-", or none with input on stdin, reads the prompt from stdin.`,
		Example: `  agentry llm "What is (12 + 30) * 2?"
  agentry llm -m anthropic:claude-sonnet-4-5 -s "Answer in one line." "Why is the sky blue?"
  agentry llm -m openai:gpt-5-mini --tools on "What is 1234 * 5678?"
  agentry llm -m ollama:llama3.2 -p options='{"temperature":0}' "Hello"
  echo "Summarise this" | agentry llm -m gemini:gemini-2.5-flash -`,
		RunE: func(cmd *cobra.Command, args []string) error { return runLLM(cmd.Context(), e, &f, args) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.BoolVar(&f.noStream, "no-stream", false, "wait for the whole reply instead of streaming")
	fl.BoolVar(&f.jsonOut, "json", false, "print the whole turn as TurnJSON instead of text")
	return cmd
}

// baseURLHelp says where a provider's API address comes from.
const baseURLHelp = `The API address is
--base-url, else <PROVIDER>_BASE_URL (ANTHROPIC_BASE_URL, GEMINI_BASE_URL,
COMPAT_BASE_URL, GROQ_BASE_URL…), else the vendor's own variable
(OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL, OLLAMA_HOST), else the vendor's.`

func providerHelp() string {
	var b strings.Builder
	for _, p := range models.Providers() {
		fmt.Fprintf(&b, "  %-12s %s\n", p, models.About(p))
	}
	return b.String()
}

func runLLM(ctx context.Context, e *env, f *llmFlags, args []string) error {
	prompt, err := readPrompt(e, args)
	if err != nil {
		return err
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	ref := opts.Model
	inst, err := llm.LLM(&opts)
	if err != nil {
		return explain(err, ref)
	}
	ctx, cancel := f.withTimeout(ctx)
	defer cancel()
	if ref.Provider.Name() == "scripted" {
		fmt.Fprintln(e.stderr, "(offline demo model: deterministic, no LLM involved; name a real one with -m provider:model)")
	}

	start := time.Now()
	var turn *llm.Turn
	if f.noStream || f.jsonOut || !inst.Capabilities().Streaming {
		turn, err = inst.Generate(ctx, nil, llm.Text(prompt))
		if err == nil && !f.jsonOut {
			fmt.Fprintln(e.stdout, turn.Text())
		}
	} else {
		turn, err = streamTo(ctx, e, inst, prompt, len(opts.Tools) > 0)
	}
	if err != nil {
		return explain(err, ref)
	}
	if f.jsonOut {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(turn)
	}
	u := turn.Usage
	fmt.Fprintf(e.stderr, "— %s · %d cycle(s) · %d in / %d out tokens (cache read %d, write %d) · %s\n",
		ref, turn.Cycles, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, time.Since(start).Round(time.Millisecond))
	return nil
}

// streamTo prints the reply to stdout and everything else to stderr (see
// textOut): reasoning, the words of replies that call tools, tool results.
func streamTo(ctx context.Context, e *env, inst *llm.LLMInstance, prompt string, hold bool) (*llm.Turn, error) {
	s := inst.Stream(ctx, nil, llm.Text(prompt))
	t := &textOut{out: e.stdout, err: e.stderr, hold: hold}
	for ev, err := range s.Events() {
		if err != nil {
			t.endLine()
			return nil, err
		}
		switch ev.Type {
		case llm.MessageStart:
			t.messageStart()
		case llm.MessageStop:
			t.messageStop()
		case llm.ToolCallDelta:
			t.toolCall()
		case llm.ReasoningDelta:
			t.note(labelThinking, ev.Delta.Text)
		case llm.TextDelta, llm.ObjectDelta:
			t.answer(ev.Delta.Text)
		case llm.ToolExecutionEnd:
			status := "→"
			if ev.Delta.IsError {
				status = "→ error:"
			}
			t.line(fmt.Sprintf("[tool %s] %s %s", ev.Delta.ToolName, status, llm.ResultText(ev.Delta.Result)))
		}
	}
	t.endLine()
	return s.Turn()
}

func readPrompt(e *env, args []string) (string, error) {
	if (len(args) == 1 && args[0] == "-") || (len(args) == 0 && !e.isTTY && e.stdin != nil) {
		b, err := io.ReadAll(io.LimitReader(e.stdin, 10<<20))
		if err != nil {
			return "", fmt.Errorf("reading the prompt from stdin: %w", err)
		}
		if p := strings.TrimSpace(string(b)); p != "" {
			return p, nil
		}
		return "", usageError("the prompt on stdin is empty")
	}
	if p := strings.TrimSpace(strings.Join(args, " ")); p != "" {
		return p, nil
	}
	return "", usageError(`no prompt: agentry llm "your question"`)
}

func parseParams(kvs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--param %q is not key=value", kv)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			val = v
		}
		if cur, ok := out[k].(map[string]any); ok { // -p options='{"a":1}' -p options='{"b":2}' merge
			if m, ok := val.(map[string]any); ok {
				merged := maps.Clone(cur)
				maps.Copy(merged, m)
				val = merged
			}
		}
		out[k] = val
	}
	return out, nil
}

// explain turns an llm error into a message a person can act on.
func explain(err error, ref llm.ModelReference) error {
	var e *llm.Error
	if !errors.As(err, &e) {
		return err
	}
	hint := ""
	switch e.Code {
	case llm.AuthenticationFailed:
		hint = " — check the API key (the offline demo needs none: -m " + models.Default + ")"
	case llm.NetworkError:
		hint = " — is the server running there? (the address: --base-url, else " + strings.Join(models.BaseURLEnv(ref.Provider.Name()), " or ") + ")"
	case llm.ModelNotFound:
		if !strings.Contains(e.Message, "check the base URL") { // the server answered about the model
			hint = " — check the model name after " + ref.Provider.Name() + ":"
		}
	case llm.RateLimited, llm.QuotaExceeded:
		hint = " — try later or raise --retries"
	}
	return fmt.Errorf("%w%s", err, hint)
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) // not /dev/null, a character device too
}

func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "accepts ", "requires "} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
