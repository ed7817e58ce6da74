package uaipagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/workflow"
)

// Names of the bridge's own tools (prefixed so that they cannot clash with
// a workflow's task names).
const (
	ToolTransition = "uaip_stage_transition"
	ToolStateInput = "uaip_state_input"
)

// Toolset bridges a UAIP session to an agent (agent.Toolset): its tools
// are the current stage's tasks plus a transition tool (listing only the
// allowed stages) and a state-input tool, so the model can only call what
// the stage allows. A transition changes the stage, and with it the tools
// the agent's next step is offered. Safe for concurrent use.
type Toolset struct {
	client   *workflow.Client
	session  string
	workflow string

	mu   sync.Mutex
	next *workflow.Next
}

var _ agent.Toolset = (*Toolset)(nil)

// NewToolset starts a session of workflowName on the server and returns
// its toolset.
func NewToolset(ctx context.Context, c *workflow.Client, workflowName string) (*Toolset, error) {
	r, err := c.Initialize(ctx, workflowName)
	if err != nil {
		return nil, err
	}
	ts := &Toolset{client: c, session: r.SessionID, workflow: r.Workflow, next: r.Next}
	if ts.next == nil { // a server without the next extension
		if err := ts.refresh(ctx, r.InitialStage); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// AttachToolset returns the toolset of an existing session.
func AttachToolset(ctx context.Context, c *workflow.Client, sessionID string) (*Toolset, error) {
	s, err := c.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	ts := &Toolset{client: c, session: s.ID, workflow: s.Workflow}
	if err := ts.refresh(ctx, s.Stage); err != nil {
		return nil, err
	}
	return ts, nil
}

// refresh reads the stage's tasks and transitions from the workflow schema.
func (ts *Toolset) refresh(ctx context.Context, stage string) error {
	info, err := ts.client.Workflow(ctx, ts.workflow)
	if err != nil {
		return err
	}
	st, ok := info.Stages[stage]
	if !ok {
		return fmt.Errorf("uaip: workflow %s has no stage %s", ts.workflow, stage)
	}
	ts.mu.Lock()
	ts.next = &workflow.Next{Stage: stage, Description: st.Description, Tasks: st.Tasks, Transitions: st.Transitions}
	ts.mu.Unlock()
	return nil
}

// SessionID returns the session's ID.
func (ts *Toolset) SessionID() string { return ts.session }

// Stage returns the current stage.
func (ts *Toolset) Stage() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.next.Stage
}

func (ts *Toolset) observe(r *workflow.ExecuteResponse) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if r.Next != nil {
		ts.next = r.Next
	} else if r.CurrentStage != ts.next.Stage {
		ts.next = &workflow.Next{Stage: r.CurrentStage}
	}
}

// Tools returns the tools of the current stage, sorted by name, then the
// transition tool (when the stage has transitions) and the state-input
// tool. It reads what the session's last response said, without a
// request. Each tool declares its governance tier (govern.Declare): a
// task the tier the server declares for it (TaskInfo.RiskTier; none or an
// unknown one leaves it undeclared, which a governor treats as
// write_high_risk) and its rollback; the transition and state-input tools,
// which change only the session, write_low_risk.
func (ts *Toolset) Tools(context.Context, *agent.State) ([]llm.Tool, error) {
	ts.mu.Lock()
	next := ts.next
	ts.mu.Unlock()
	names := make([]string, 0, len(next.Tasks))
	for n := range next.Tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	tools := make([]llm.Tool, 0, len(names)+2)
	for _, n := range names {
		ti := next.Tasks[n]
		params := llm.Schema(ti.Parameters)
		if params == nil {
			params = llm.Schema{"type": "object", "properties": map[string]any{}}
		}
		tools = append(tools, ts.declare(llm.Tool{Name: n, Description: ti.Description, Parameters: params,
			Run: func(ctx context.Context, args map[string]any) (any, error) {
				return ts.act(ctx, &workflow.ExecuteRequest{Action: workflow.ActionMethodCall, Task: n, Args: args})
			}}, ti))
	}
	if len(next.Transitions) > 0 {
		stages := make([]any, len(next.Transitions))
		for i, s := range next.Transitions {
			stages[i] = s
		}
		tools = append(tools, govern.Declare(llm.Tool{Name: ToolTransition,
			Description: fmt.Sprintf("Move from stage %q to another stage of the %s workflow; the tools change with the stage.", next.Stage, ts.workflow),
			Parameters: llm.Schema{"type": "object", "properties": map[string]any{"stage": map[string]any{"type": "string", "enum": stages}},
				"required": []any{"stage"}, "additionalProperties": false},
			Run: func(ctx context.Context, args map[string]any) (any, error) {
				stage, _ := args["stage"].(string)
				return ts.act(ctx, &workflow.ExecuteRequest{Action: workflow.ActionStageTransition, Stage: stage})
			}}, govern.Declaration{Tier: govern.WriteLowRisk}))
	}
	tools = append(tools, govern.Declare(llm.Tool{Name: ToolStateInput,
		Description: "Set values in the session state (keys are flat strings such as \"user.email\"); some stages need keys set before they can be entered. A null value removes a key.",
		Parameters: llm.Schema{"type": "object", "properties": map[string]any{"state_updates": map[string]any{"type": "object"}},
			"required": []any{"state_updates"}, "additionalProperties": false},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			updates, _ := args["state_updates"].(map[string]any)
			return ts.act(ctx, &workflow.ExecuteRequest{Action: workflow.ActionStateInput, StateUpdates: updates})
		}}, govern.Declaration{Tier: govern.WriteLowRisk}))
	return tools, nil
}

// RollbackType is the type of the rollback actions of workflow tasks
// (workflow.TaskRollback): Target is "<session id>/<task>", Payload
// {"session_id", "workflow", "task", "args"}. RollbackHandler executes
// them.
const RollbackType = "uaip.task"

// declare records a task's risk tier and rollback for a governed agent
// (govern.Governor.Middleware). A task the server declares no tier for
// stays undeclared: the governor treats it as write_high_risk.
func (ts *Toolset) declare(t llm.Tool, ti workflow.TaskInfo) llm.Tool {
	var d govern.Declaration
	if ti.RiskTier != "" {
		tier, err := govern.ParseTier(ti.RiskTier)
		if err == nil {
			d.Tier = tier
		}
	}
	if rb := ti.Rollback; rb != nil {
		d.Rollback = func(ctx context.Context, call govern.Call) (*govern.RollbackAction, error) {
			args := map[string]any{}
			for name, from := range rb.Args {
				if from == "$call_id" {
					args[name] = call.ID
					continue
				}
				v, ok := lookupPath(call.Args, from)
				if !ok {
					return nil, fmt.Errorf("rollback of %s needs argument %q, which the call lacks", t.Name, from)
				}
				args[name] = v
			}
			return &govern.RollbackAction{Type: RollbackType, Target: ts.session + "/" + rb.Task,
				Payload: map[string]any{"session_id": ts.session, "workflow": ts.workflow, "task": rb.Task, "args": args}}, nil
		}
	}
	return govern.Declare(t, d)
}

func lookupPath(m map[string]any, dotted string) (any, bool) {
	var cur any = m
	for _, part := range strings.Split(dotted, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// RollbackHandler returns the governor rollback handler for RollbackType
// actions: it calls the compensating task in the session through c. Put it
// in govern.Options.Rollbacks[RollbackType].
func RollbackHandler(c *workflow.Client) govern.RollbackFunc {
	return func(ctx context.Context, a govern.RollbackAction) error {
		b, err := json.Marshal(a.Payload)
		if err != nil {
			return err
		}
		var p struct {
			SessionID string         `json:"session_id"`
			Workflow  string         `json:"workflow"`
			Task      string         `json:"task"`
			Args      map[string]any `json:"args"`
		}
		if err := json.Unmarshal(b, &p); err != nil || p.SessionID == "" || p.Task == "" {
			return fmt.Errorf("uaip: malformed %s rollback payload", RollbackType)
		}
		_, err = c.Call(ctx, p.SessionID, p.Workflow, p.Task, p.Args)
		return err
	}
}

// act runs an action and returns what the model sees: the result and
// where the session now stands; an error's detail and extras become the
// tool's error text.
func (ts *Toolset) act(ctx context.Context, req *workflow.ExecuteRequest) (any, error) {
	req.WorkflowName = ts.workflow
	r, err := ts.client.Execute(ctx, ts.session, req)
	if err != nil {
		var we *workflow.Error
		if errors.As(err, &we) {
			return nil, errors.New(describeError(we))
		}
		return nil, err
	}
	ts.observe(r)
	out := map[string]any{"current_stage": r.CurrentStage}
	if len(r.Result) > 0 && string(r.Result) != "null" {
		out["result"] = json.RawMessage(r.Result)
	}
	if req.Action != workflow.ActionMethodCall {
		out["state"] = r.State
	}
	if r.Next != nil {
		tasks := make([]string, 0, len(r.Next.Tasks))
		for n := range r.Next.Tasks {
			tasks = append(tasks, n)
		}
		sort.Strings(tasks)
		out["available_tasks"], out["transitions"] = tasks, r.Next.Transitions
	}
	return out, nil
}

func describeError(e *workflow.Error) string {
	var b strings.Builder
	b.WriteString(e.Detail)
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, " (set these state keys first with %s: %s)", ToolStateInput, strings.Join(e.Missing, ", "))
	}
	for _, f := range e.Errors {
		b.WriteString("; " + f.String())
	}
	if len(e.Allowed) > 0 {
		fmt.Fprintf(&b, " (allowed: %s)", strings.Join(e.Allowed, ", "))
	}
	return b.String()
}
