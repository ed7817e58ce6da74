package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/store"
	"github.com/spf13/cobra"
)

// DefaultStore is where `agentry run --session` keeps checkpoints unless
// --store says otherwise.
const DefaultStore = "sqlite://./agentry-data/agentry.db"

type runFlags struct {
	modelFlags
	strategy string
	session  string
	store    string
	maxSteps int
	jsonOut  bool
	noStream bool
	// agent names an agent file (agentfile) to run under governance;
	// agents is the directory a bare name is looked up in.
	agent, agents string
	// storeSet: --store was given (run --agent keeps its runs in memory
	// otherwise, away from a server's store).
	storeSet bool
	// as is the approver who decides --agent's write_high_risk calls on
	// the terminal, with a key of keys (agentry keys create).
	as, keys string
}

func runCmd(e *env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] [PROMPT...]",
		Short: "Run an agent (UAP-1.1) on a prompt, streaming its steps",
		Long: `Run an agent (UAP-1.1) on a prompt with the loop, react or plan strategy.
Its steps stream to the terminal: reasoning, tool calls and results, plan
steps, sub-agents and the words of replies that call tools go to stderr; the
answer alone goes to stdout (with tools declared, once the reply has ended
without calling one). --json prints the raw event stream (one
AgentStreamEvent JSON object per line) instead.

With --session, the run is checkpointed after every step (default store:
` + DefaultStore + `). Given an existing session and a prompt, the
conversation continues; given only the session, an interrupted run resumes
from its last checkpoint.

-m scripted:FILE plays a YAML/JSON script (see llm/scripted.Load), so
agents run offline and deterministically. Providers, keys and API
addresses are as for agentry llm. ` + baseURLHelp,
		Example: `  agentry run "What is (12 + 30) * 2?"
  agentry run -m anthropic:claude-sonnet-4-5 --strategy react --tools on "What is 2^16 - 1?"
  agentry run --strategy plan -m scripted:examples/scripted/plan.yaml "Summarise the incident"
  agentry run --session 6f1c… "and in Rome?"        # continue a conversation
  agentry run --session 6f1c…                        # resume an interrupted run`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.agent != "" {
				for _, n := range []string{"model", "system", "base-url", "tools", "strategy", "session", "max-steps", "json", "no-stream"} {
					if fl := cmd.Flags().Lookup(n); fl != nil && fl.Changed {
						return usageError("--agent takes the model, tools, strategy and limits from its file: drop --%s", n)
					}
				}
			}
			f.storeSet = cmd.Flags().Changed("store")
			fromEnv(cmd, "keys", "AGENTRY_KEYS_DIR", &f.keys)
			return runAgent(cmd.Context(), e, &f, args)
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.strategy, "strategy", "loop", "execution strategy: loop, react or plan")
	fl.StringVar(&f.session, "session", "", "checkpoint session id: continue or resume it (created when new)")
	fl.StringVar(&f.store, "store", DefaultStore, "store of the checkpoints: sqlite:///path, postgres://…, file:DIR, memory:")
	fl.IntVar(&f.maxSteps, "max-steps", 100, "stop after this many steps; 0 for no limit (the SDK's default: the command line keeps a guard)")
	fl.BoolVar(&f.jsonOut, "json", false, "print the raw event stream as JSON lines")
	fl.BoolVar(&f.noStream, "no-stream", false, "wait for the result instead of streaming")
	fl.StringVar(&f.agent, "agent", "", "run the agent an agent file defines (a path, or a NAME in --agents), under governance; its runs are kept in memory unless --store is given")
	fl.StringVar(&f.agents, "agents", "", "the directory of agent files --agent NAME is looked up in")
	fl.StringVar(&f.as, "as", "", "with --agent on a terminal: the approver asked to decide write_high_risk calls (default: the only approver of --keys)")
	fl.StringVar(&f.keys, "keys", filepath.Join("agentry-data", "keys"), "with --agent: the approver keys directory (agentry keys create; env AGENTRY_KEYS_DIR)")
	return cmd
}

func strategyFor(name string) (agent.ExecutionStrategy, error) {
	switch name {
	case "loop":
		return execution.Loop(&execution.LoopOptions{}), nil
	case "react":
		return execution.ReAct(&execution.ReActOptions{}), nil
	case "plan":
		return execution.Plan(&execution.PlanOptions{})
	}
	return nil, usageError("--strategy must be loop, react or plan, not %q", name)
}

// openCheckpoints opens the checkpoint store of the store at url;
// close releases it.
func openCheckpoints(ctx context.Context, url string) (agent.CheckpointStore, func() error, error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	return st.Checkpoints(), st.Close, nil
}

func runAgent(ctx context.Context, e *env, f *runFlags, args []string) error {
	if f.agent != "" {
		return runDefined(ctx, e, f, args)
	}
	var prompt string
	if len(args) > 0 || f.session == "" { // a session alone resumes
		p, err := readPrompt(e, args)
		if err != nil {
			return err
		}
		prompt = p
	}
	lo, err := f.options()
	if err != nil {
		return err
	}
	strategy, err := strategyFor(f.strategy)
	if err != nil {
		return err
	}
	opts := agent.Options{LLMOptions: lo, Execution: strategy, SessionID: f.session}
	var state *agent.State
	if f.session != "" {
		checkpoints, closeStore, err := openCheckpoints(ctx, f.store)
		if err != nil {
			return fmt.Errorf("checkpoint store: %w", err)
		}
		defer closeStore()
		opts.Checkpoints = checkpoints
		if state, err = checkpoints.Load(ctx, f.session); err != nil && !errors.Is(err, agent.ErrNoCheckpoint) {
			return fmt.Errorf("loading session %s: %w", f.session, err)
		}
	}
	if f.maxSteps > 0 { // counted from where this run starts
		limit := state.Step() + f.maxSteps
		opts.Strategy.StopCondition = func(_ context.Context, s *agent.State) bool { return s.Step() >= limit }
	}
	a, err := agent.New(&opts)
	if err != nil {
		return explain(err, lo.Model)
	}
	ctx, cancel := f.withTimeout(ctx)
	defer cancel()
	var input llm.Input
	switch {
	case prompt != "":
		input = llm.Text(prompt)
	case state == nil:
		return usageError("session %s has no checkpoint to resume; give a prompt to start it", f.session)
	case !agent.Resumable(state):
		return fmt.Errorf("session %s: %w; give a prompt to continue the conversation", f.session, agent.ErrNothingToResume)
	}

	if lo.Model.Provider.Name() == "scripted" && !f.jsonOut {
		fmt.Fprintln(e.stderr, "(offline scripted model: deterministic, no LLM involved)")
	}
	start := time.Now()
	var res *agent.Result
	if f.noStream {
		res, err = a.Generate(ctx, input, state)
	} else {
		res, err = streamRun(e, a.Stream(ctx, input, state), f.jsonOut, len(lo.Tools) > 0)
	}
	if ferr := a.FlushCheckpoints(context.Background()); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		return explain(err, lo.Model)
	}
	if f.noStream && !f.jsonOut {
		fmt.Fprintln(e.stdout, res.Turn.Text())
	}
	if f.jsonOut {
		return json.NewEncoder(e.stdout).Encode(map[string]any{"result": map[string]any{"turn": res.Turn, "state": res.State}})
	}
	u := res.Turn.Usage
	session := ""
	if f.session != "" {
		session = " · session " + f.session
	}
	fmt.Fprintf(e.stderr, "— %s · %s · %d step(s) · %d in / %d out tokens · %s%s\n",
		lo.Model, f.strategy, res.State.Step(), u.InputTokens, u.OutputTokens, time.Since(start).Round(time.Millisecond), session)
	return nil
}

// streamRun renders (or, with jsonOut, prints) the events and returns the
// result. hold says whether tools are declared (see textOut).
func streamRun(e *env, s *agent.StreamResult, jsonOut, hold bool) (*agent.Result, error) {
	r := &renderer{t: textOut{out: e.stdout, err: e.stderr, hold: hold}}
	enc := json.NewEncoder(e.stdout)
	for ev, err := range s.Events() {
		if err != nil {
			r.t.endLine()
			return nil, err
		}
		if jsonOut {
			if err := enc.Encode(ev); err != nil {
				return nil, err
			}
			continue
		}
		r.event(ev, "")
	}
	r.t.endLine()
	return s.Result()
}

// renderer prints events for people: the answer on stdout, everything
// else on stderr, each piece once. Which text is the answer depends on the
// phase of the step: a ReAct step's reasoning reply is reasoning, a plan's
// JSON is shown as the plan_created event lists it, a plan step's replies
// are progress, and the reply that ends the run (the loop's or ReAct's
// last, the plan's final answer) is the answer.
type renderer struct {
	t textOut
	// phase is the current step's ("reasoning", "planning", "replanning",
	// "execution", "answer"; "" for the loop's steps).
	phase string
	// reasoned: this ReAct step's reasoning event came; reasoningShown:
	// its reasoning was shown as it streamed.
	reasoned, reasoningShown bool
}

func (r *renderer) event(ev agent.Event, indent string) {
	if ev.Source == agent.SourceUPP {
		if indent != "" {
			return // a sub-agent's stream is summarised by subagent_end
		}
		r.stream(ev.UPP.Type, ev.UPP.Delta.Text)
		return
	}
	u := ev.UAP
	line := func(format string, args ...any) { r.t.line(indent + fmt.Sprintf(format, args...)) }
	switch u.Type {
	case agent.EventStepStart:
		if indent == "" {
			r.phase, _ = u.Data["phase"].(string)
			r.reasoned, r.reasoningShown = false, false
			line("── step %d ──", u.Step)
		}
	case agent.EventReasoning:
		if indent == "" {
			r.reasoned = true
			if r.reasoningShown {
				return
			}
		}
		if s, _ := u.Data["reasoning"].(string); s != "" {
			line("[reasoning] %s", s)
		}
	case agent.EventAction:
		for _, c := range asCalls(u.Data["toolCalls"]) {
			args, _ := json.Marshal(c.Arguments)
			line("[tool] %s %s", c.ToolName, args)
		}
	case agent.EventObservation:
		for _, x := range asExecutions(u.Data["observations"]) {
			mark := "→"
			if x.IsError {
				mark = "→ error:"
			}
			line("[result] %s %s %s", x.ToolName, mark, clip(llm.ResultText(x.Result), 200))
		}
	case agent.EventPlanCreated:
		if plan, ok := u.Data["plan"].([]agent.PlanStep); ok {
			line("[plan] %d step(s)", len(plan))
			for _, s := range plan {
				deps := ""
				if len(s.DependsOn) > 0 {
					deps = " (after " + strings.Join(s.DependsOn, ", ") + ")"
				}
				line("  %s: %s%s", s.ID, s.Description, deps)
			}
		}
	case agent.EventPlanStepStart:
		if s, ok := u.Data["planStep"].(agent.PlanStep); ok {
			line("[plan] ▶ %s: %s", s.ID, s.Description)
		}
	case agent.EventPlanStepEnd:
		if s, ok := u.Data["planStep"].(agent.PlanStep); ok {
			line("[plan] %s %s", s.ID, s.Status)
		}
	case agent.EventSubagentStart:
		line("[sub-agent %s] %s", u.Data["subagentType"], clip(fmt.Sprint(u.Data["prompt"]), 120))
	case agent.EventSubagentEvent:
		if inner, ok := u.Data["event"].(agent.Event); ok {
			r.event(inner, indent+"  │ ")
		}
	case agent.EventSubagentEnd:
		if u.Data["success"] == true {
			line("[sub-agent %s] done: %s", u.Data["subagentType"], clip(fmt.Sprint(u.Data["result"]), 200))
		} else {
			line("[sub-agent %s] failed: %s", u.Data["subagentType"], u.Data["error"])
		}
	}
}

// stream routes one streamed model event of the top-level agent.
func (r *renderer) stream(typ llm.StreamEventType, text string) {
	reasoningReply := r.phase == "reasoning" && !r.reasoned
	switch typ {
	case llm.MessageStart:
		r.t.messageStart()
	case llm.MessageStop:
		r.t.messageStop()
	case llm.ToolCallDelta:
		if !reasoningReply {
			r.t.toolCall()
		}
	case llm.ReasoningDelta:
		r.reasoningShown = r.reasoningShown || (reasoningReply && text != "")
		r.t.note(labelThinking, text)
	case llm.TextDelta, llm.ObjectDelta:
		switch {
		case reasoningReply:
			r.reasoningShown = r.reasoningShown || text != ""
			r.t.note(labelReasoning, text)
		case r.phase == "planning" || r.phase == "replanning":
			// the plan: shown as plan_created lists it
		case r.phase == "execution":
			r.t.note(labelModel, text)
		default:
			r.t.answer(text)
		}
	}
}

func asCalls(v any) []llm.ToolCall {
	c, _ := v.([]llm.ToolCall)
	return c
}

func asExecutions(v any) []llm.ToolExecution {
	x, _ := v.([]llm.ToolExecution)
	return x
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
