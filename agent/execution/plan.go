package execution

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/internal/schemas"
	"github.com/agentry-dev/agentry/internal/turns"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// defaultPlanSchema is the schema plans are produced under: an object with
// a "steps" array of {id, description, tool?, dependsOn}.
var defaultPlanSchema = llm.MustSchema(`{
  "type": "object",
  "properties": {
    "steps": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "string", "description": "Unique step identifier"},
          "description": {"type": "string", "description": "What this step does"},
          "tool": {"type": "string", "description": "Tool to use, if any"},
          "dependsOn": {"type": "array", "items": {"type": "string"}, "description": "IDs of the steps this one needs first"}
        },
        "required": ["id", "description", "dependsOn"]
      }
    }
  },
  "required": ["steps"]
}`)

// defaultPlanPrompt asks for a plan.
const defaultPlanPrompt = `Create an execution plan for the task above.
Break it into clear steps; name the tool each step uses, if any, and the steps it depends on (which must complete before it can start).
Return the plan as a JSON object with a "steps" array; each step has "id", "description", "tool" (optional) and "dependsOn" (a list of step ids).`

// PlanOptions configures Plan.
type PlanOptions struct {
	// MaxPlanSteps caps a plan's length; 0 (or llm.Infinity) means no
	// limit. Steps beyond it, and the steps depending on them, are dropped.
	MaxPlanSteps int
	// NoReplan disables replanning after a failed step (the spec's
	// allowReplan, which defaults to true); the run then fails with a
	// *StepFailedError.
	NoReplan bool
	// MaxReplans caps replanning; 0 means no limit.
	MaxReplans int
	// PlanSchema is the plan's JSON Schema; nil uses the default plan schema (an object of steps). It
	// must describe an object with a "steps" array of objects with at
	// least "id" and "description".
	PlanSchema llm.Schema
	// PlanPrompt asks for the plan; empty uses a default prompt asking for a plan.
	PlanPrompt string
	// MaxConcurrency caps how many independent steps run at once; 0 means
	// every ready step runs at once, 1 one at a time.
	MaxConcurrency int
	// NoFinalAnswer skips the final call that turns the steps' results
	// into the answer; the run's response is then the last step's reply.
	NoFinalAnswer bool
}

// Plan returns the plan-then-execute strategy (UAP-1.1 §5.4):
//
//   - Planning: the model is asked for a plan under PlanSchema — sent as
//     structured output when the provider supports it, otherwise the JSON
//     is extracted from the reply; either way the plan is validated
//     against the schema and for unique ids, known dependencies and no
//     cycles. The plan goes into State.Plan (plan_created event).
//   - Execution: steps run in dependency order, each as one agent step
//     (plan_step_start / plan_step_end events) that lasts until the model
//     stops asking for tools; independent steps run concurrently. Plan
//     steps are never modified in place: each status change is a new plan
//     in a new state.
//   - Failure: a step fails when its model call fails or when every call
//     of its named tool failed. Unless NoReplan, the model is then asked
//     for a new plan for the remaining work, given the plan so far and the
//     failure; completed steps are kept.
//   - Answer: once every step is done, the model gives the final answer.
//
// A run resumed from a state whose plan has unfinished steps continues that
// plan instead of planning anew.
func Plan(options *PlanOptions) (agent.ExecutionStrategy, error) {
	var opts PlanOptions
	if options != nil {
		opts = *options
	}
	if opts.PlanSchema == nil {
		opts.PlanSchema = defaultPlanSchema
	}
	if opts.PlanPrompt == "" {
		opts.PlanPrompt = defaultPlanPrompt
	}
	sch, err := compileSchema(opts.PlanSchema)
	if err != nil {
		return nil, fmt.Errorf("execution: plan schema: %w", err)
	}
	return &plan{opts: opts, schema: sch}, nil
}

func compileSchema(s llm.Schema) (*jsonschema.Schema, error) {
	return schemas.Compile("plan.json", s)
}

type plan struct {
	opts     PlanOptions
	schema   *jsonschema.Schema
	planners sync.Map // *agent.Agent → *llm.LLMInstance
}

// Name returns "plan".
func (*plan) Name() string { return "plan" }

// PlanError reports a plan the model did not produce or that is invalid.
type PlanError struct {
	Reason string
	Reply  string // the model's reply text
}

// Error returns "execution: no usable plan: " followed by Reason.
func (e *PlanError) Error() string { return "execution: no usable plan: " + e.Reason }

// StepFailedError reports a plan step that failed when replanning was not
// allowed or exhausted.
type StepFailedError struct {
	Step agent.PlanStep
	Err  error
}

// Error returns a message naming the failed step's ID and its error.
func (e *StepFailedError) Error() string {
	return fmt.Sprintf("execution: plan step %q failed: %v", e.Step.ID, e.Err)
}

// Unwrap returns the failed step's error, for errors.Is/As.
func (e *StepFailedError) Unwrap() error { return e.Err }

// planner returns the instance that produces plans: the agent's options
// with the plan schema as structured output when supported, and tools
// declared but never run (a history with tool calls needs them declared).
// An agent with Toolsets plans with the step's tools (ec.LLM's), so its
// planner is made per step; another's is made once.
func (p *plan) planner(ec *agent.ExecutionContext) (*llm.LLMInstance, error) {
	perStep := len(ec.Agent.Options().Toolsets) > 0
	if v, ok := p.planners.Load(ec.Agent); ok && !perStep {
		return v.(*llm.LLMInstance), nil
	}
	lo := ec.Agent.Options().LLMOptions
	if perStep {
		lo.Tools = ec.LLM.Options().Tools
	}
	if ec.LLM.Capabilities().StructuredOutput {
		lo.Structure = p.opts.PlanSchema
	} else {
		lo.Structure = nil
	}
	lo.ToolStrategy = &llm.ToolUseStrategy{
		MaxIterations: llm.Infinity,
		OnBeforeCall:  func(context.Context, *llm.Tool, map[string]any) llm.BeforeCall { return llm.BeforeCall{} },
	}
	inst, err := llm.LLM(&lo)
	if err != nil {
		return nil, err
	}
	if !perStep {
		p.planners.Store(ec.Agent, inst)
	}
	return inst, nil
}

// Execute plans (unless resuming an unfinished plan), runs the steps in
// dependency order, replanning after failures as the options allow, and
// asks for the final answer unless NoFinalAnswer.
func (p *plan) Execute(ctx context.Context, ec *agent.ExecutionContext) (*agent.Result, error) {
	state := ec.Begin()
	steps := state.Plan()
	if ec.Input != nil || !unfinished(steps) { // a resumed run goes on with its plan
		var (
			stop bool
			err  error
		)
		if state, steps, stop, err = p.makePlan(ctx, ec, state, ""); err != nil {
			return nil, err
		}
		if stop {
			return ec.Finish(ctx, state), nil
		}
	}
	replans := 0
	for unfinished(steps) {
		ready := readySteps(steps)
		if len(ready) == 0 {
			return nil, &PlanError{Reason: "no step can run: unfinished steps depend on steps that cannot complete"}
		}
		if max := p.opts.MaxConcurrency; max > 0 && len(ready) > max {
			ready = ready[:max]
		}
		var (
			failed []failure
			stop   bool
			err    error
		)
		state, steps, failed, stop, err = p.runBatch(ctx, ec, state, steps, ready)
		if err != nil {
			return nil, err
		}
		if stop {
			return ec.Finish(ctx, state), nil
		}
		if len(failed) == 0 {
			continue
		}
		if p.opts.NoReplan || (p.opts.MaxReplans > 0 && replans >= p.opts.MaxReplans) {
			return nil, &StepFailedError{Step: failed[0].step, Err: failed[0].err}
		}
		replans++
		if state, steps, stop, err = p.makePlan(ctx, ec, state, describeFailure(steps, failed)); err != nil {
			return nil, err
		}
		if stop {
			return ec.Finish(ctx, state), nil
		}
	}
	if !p.opts.NoFinalAnswer {
		var err error
		if state, err = p.finalAnswer(ctx, ec, state); err != nil {
			return nil, err
		}
	}
	return ec.Finish(ctx, state), nil
}

func unfinished(steps []agent.PlanStep) bool {
	for _, s := range steps {
		if s.Status != agent.PlanCompleted {
			return true
		}
	}
	return false
}

// readySteps returns the indexes of the steps not yet done whose
// dependencies are complete (an in_progress step was interrupted: rerun).
func readySteps(steps []agent.PlanStep) []int {
	done := map[string]bool{}
	for _, s := range steps {
		if s.Status == agent.PlanCompleted {
			done[s.ID] = true
		}
	}
	var ready []int
	for i, s := range steps {
		if s.Status == agent.PlanCompleted || s.Status == agent.PlanFailed {
			continue
		}
		ok := true
		for _, d := range s.DependsOn {
			ok = ok && done[d]
		}
		if ok {
			ready = append(ready, i)
		}
	}
	return ready
}

// withStatus returns a copy of steps with step i's status changed.
func withStatus(steps []agent.PlanStep, i int, st agent.PlanStatus) []agent.PlanStep {
	out := slices.Clone(steps)
	out[i].Status = st
	return out
}

// makePlan is a planning (or, with failure set, replanning) step.
func (p *plan) makePlan(ctx context.Context, ec *agent.ExecutionContext, state *agent.State, failure string) (*agent.State, []agent.PlanStep, bool, error) {
	phase := "planning"
	prompt := p.opts.PlanPrompt
	kept := state.Plan()
	if failure != "" {
		phase = "replanning"
		prompt = failure + "\n\n" + p.opts.PlanPrompt + "\nPlan only the remaining work; the completed steps are done and their ids must not be reused."
	}
	state, step := ec.StartStep(ctx, state, map[string]any{"phase": phase})
	inst, err := p.planner(ec)
	if err != nil {
		return nil, nil, false, err
	}
	turn, err := ec.Call(ctx, step, state, inst, state.Messages(), llm.Text(prompt))
	if err != nil {
		return nil, nil, false, err
	}
	state = state.WithMessages(turn.Messages...)
	steps, err := p.parsePlan(turn)
	if err != nil {
		return nil, nil, false, err
	}
	if failure != "" { // keep what is done; replace the rest
		var done []agent.PlanStep
		ids := map[string]bool{}
		for _, s := range kept {
			if s.Status == agent.PlanCompleted {
				done = append(done, s)
				ids[s.ID] = true
			}
		}
		for i := range steps {
			if ids[steps[i].ID] {
				return nil, nil, false, &PlanError{Reason: fmt.Sprintf("the new plan reuses the completed step id %q", steps[i].ID)}
			}
		}
		steps = append(done, steps...)
	}
	state = state.WithPlan(steps)
	ec.Emit(agent.EventPlanCreated, step, map[string]any{"plan": state.Plan(), "replan": failure != ""})
	state, stop, err := ec.EndStep(ctx, step, turn, state, map[string]any{"phase": phase})
	if err != nil {
		return nil, nil, false, err
	}
	return state, steps, stop, nil
}

// parsePlan takes the plan from the structured data or, failing that, from
// the first JSON object in the reply; validates it against the schema and
// checks ids, dependencies and cycles.
func (p *plan) parsePlan(turn *llm.Turn) ([]agent.PlanStep, error) {
	text := turn.Text()
	data := turn.Data
	if data == nil {
		data = extractJSON(text)
		if data == nil {
			return nil, &PlanError{Reason: "the reply holds no JSON plan", Reply: text}
		}
	}
	b, _ := json.Marshal(data)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, &PlanError{Reason: err.Error(), Reply: text}
	}
	if err := p.schema.Validate(inst); err != nil {
		return nil, &PlanError{Reason: "the plan does not match the plan schema: " + err.Error(), Reply: text}
	}
	var raw struct {
		Steps []struct {
			ID          string   `json:"id"`
			Description string   `json:"description"`
			Tool        string   `json:"tool"`
			DependsOn   []string `json:"dependsOn"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, &PlanError{Reason: "the plan is not a steps list: " + err.Error(), Reply: text}
	}
	if len(raw.Steps) == 0 {
		return nil, &PlanError{Reason: "the plan has no steps", Reply: text}
	}
	steps := make([]agent.PlanStep, 0, len(raw.Steps))
	seen := map[string]bool{}
	for i, s := range raw.Steps {
		id := strings.TrimSpace(s.ID)
		if id == "" {
			id = fmt.Sprintf("step-%d", i+1)
		}
		if seen[id] {
			return nil, &PlanError{Reason: fmt.Sprintf("duplicate step id %q", id), Reply: text}
		}
		seen[id] = true
		deps := slices.Clone(s.DependsOn)
		if deps == nil {
			deps = []string{}
		}
		steps = append(steps, agent.PlanStep{ID: id, Description: s.Description, Tool: s.Tool, DependsOn: deps, Status: agent.PlanPending})
	}
	for _, s := range steps {
		for _, d := range s.DependsOn {
			if !seen[d] {
				return nil, &PlanError{Reason: fmt.Sprintf("step %q depends on unknown step %q", s.ID, d), Reply: text}
			}
		}
	}
	if hasCycle(steps) {
		return nil, &PlanError{Reason: "the plan's dependencies form a cycle", Reply: text}
	}
	if max := p.opts.MaxPlanSteps; max > 0 && max != llm.Infinity && len(steps) > max {
		steps = truncatePlan(steps, max)
	}
	return steps, nil
}

// extractJSON returns the first JSON object found in text, or nil.
func extractJSON(text string) any {
	for i := strings.IndexByte(text, '{'); i >= 0; {
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		var v map[string]any
		if err := dec.Decode(&v); err == nil {
			return v
		}
		next := strings.IndexByte(text[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return nil
}

func hasCycle(steps []agent.PlanStep) bool {
	deps := map[string][]string{}
	for _, s := range steps {
		deps[s.ID] = s.DependsOn
	}
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(string) bool
	visit = func(id string) bool {
		switch state[id] {
		case 1:
			return true
		case 2:
			return false
		}
		state[id] = 1
		for _, d := range deps[id] {
			if visit(d) {
				return true
			}
		}
		state[id] = 2
		return false
	}
	for _, s := range steps {
		if visit(s.ID) {
			return true
		}
	}
	return false
}

// truncatePlan keeps the first max steps and drops any that depend, even
// indirectly, on a dropped step.
func truncatePlan(steps []agent.PlanStep, max int) []agent.PlanStep {
	kept := map[string]bool{}
	var out []agent.PlanStep
	for i, s := range steps {
		if i >= max {
			break
		}
		ok := true
		for _, d := range s.DependsOn {
			ok = ok && kept[d]
		}
		if ok {
			kept[s.ID] = true
			out = append(out, s)
		}
	}
	return out
}

type failure struct {
	step agent.PlanStep
	err  error
}

type stepRun struct {
	index int
	step  int
	turn  *llm.Turn
	msgs  []llm.Message
	err   error
}

// runBatch runs ready steps concurrently from the same history and merges
// their messages into the state in plan order.
func (p *plan) runBatch(ctx context.Context, ec *agent.ExecutionContext, state *agent.State, steps []agent.PlanStep, ready []int) (*agent.State, []agent.PlanStep, []failure, bool, error) {
	runs := make([]*stepRun, len(ready))
	for k, i := range ready {
		var step int
		state, step = ec.StartStep(ctx, state, map[string]any{"phase": "execution", "planStep": steps[i]})
		steps = withStatus(steps, i, agent.PlanInProgress)
		state = state.WithPlan(steps)
		ec.Emit(agent.EventPlanStepStart, step, map[string]any{"planStep": steps[i]})
		runs[k] = &stepRun{index: i, step: step}
	}
	base := state.Messages()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			ps := steps[r.index]
			prompt := fmt.Sprintf("Execute step %q of the plan: %s", ps.ID, ps.Description)
			if ps.Tool != "" {
				prompt += fmt.Sprintf(" (use the %s tool)", ps.Tool)
			}
			r.msgs, r.turn, r.err = untilAnswer(ctx, ec, r.step, state, base, prompt)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, false, llm.AsError(err, ec.LLM.Model().Provider.Name(), llm.Cancelled)
	}
	var failed []failure
	for _, r := range runs {
		if r.err != nil && isCancel(r.err) {
			return nil, nil, nil, false, r.err
		}
	}
	stopAll := false
	for _, r := range runs {
		state = state.WithMessages(r.msgs...)
		ps := steps[r.index]
		status := agent.PlanCompleted
		if err := stepFailure(ps, r.turn, r.err); err != nil {
			status = agent.PlanFailed
			failed = append(failed, failure{step: ps, err: err})
		}
		steps = withStatus(steps, r.index, status)
		state = state.WithPlan(steps)
		ec.Emit(agent.EventPlanStepEnd, r.step, map[string]any{"planStep": steps[r.index]})
		var stop bool
		var err error
		state, stop, err = ec.EndStep(ctx, r.step, r.turn, state, map[string]any{"phase": "execution", "planStep": steps[r.index]})
		if err != nil {
			return nil, nil, nil, false, err
		}
		stopAll = stopAll || stop
	}
	return state, steps, failed, stopAll, nil
}

func isCancel(err error) bool {
	return errors.Is(err, llm.Cancelled) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// stepFailure decides whether a step failed: its calls failed, or every
// call of the tool it names failed.
func stepFailure(ps agent.PlanStep, turn *llm.Turn, err error) error {
	if err != nil {
		return err
	}
	if ps.Tool == "" || turn == nil {
		return nil
	}
	var last error
	called, succeeded := false, false
	for _, x := range turn.ToolExecutions {
		if x.ToolName != ps.Tool {
			continue
		}
		called = true
		if x.IsError {
			last = fmt.Errorf("tool %s: %s", x.ToolName, llm.ResultText(x.Result))
		} else {
			succeeded = true
		}
	}
	if called && !succeeded {
		return last
	}
	return nil
}

// untilAnswer makes calls from base plus prompt until a reply requests no
// tools, returning the messages produced and their merged turn.
func untilAnswer(ctx context.Context, ec *agent.ExecutionContext, step int, state *agent.State, base []llm.Message, prompt string) ([]llm.Message, *llm.Turn, error) {
	var produced []llm.Message
	var stepTurns []*llm.Turn
	inputs := []llm.Input{llm.Text(prompt)}
	for {
		history := append(slices.Clip(base), produced...)
		turn, err := ec.Call(ctx, step, state, ec.LLM, history, inputs...)
		if err != nil {
			return produced, turns.Merge(nil, stepTurns...), err
		}
		inputs = nil
		stepTurns = append(stepTurns, turn)
		produced = append(produced, turn.Messages...)
		if turn.Response == nil || !turn.Response.HasToolCalls() {
			return produced, turns.Merge(nil, stepTurns...), nil
		}
	}
}

func describeFailure(steps []agent.PlanStep, failed []failure) string {
	var b strings.Builder
	b.WriteString("The plan could not be completed. Current plan and status:\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "- %s [%s]: %s\n", s.ID, s.Status, s.Description)
	}
	for _, f := range failed {
		fmt.Fprintf(&b, "Step %q failed: %v\n", f.step.ID, f.err)
	}
	return b.String()
}

func (p *plan) finalAnswer(ctx context.Context, ec *agent.ExecutionContext, state *agent.State) (*agent.State, error) {
	state, step := ec.StartStep(ctx, state, map[string]any{"phase": "answer"})
	msgs, turn, err := untilAnswer(ctx, ec, step, state, state.Messages(),
		"All steps of the plan are complete. Using their results, give the final answer to the original request.")
	if err != nil {
		return nil, err
	}
	state = state.WithMessages(msgs...)
	state, _, err = ec.EndStep(ctx, step, turn, state, map[string]any{"phase": "answer"})
	return state, err
}
