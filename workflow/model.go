package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/agentry-dev/agentry/internal/schemas"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Workflow is a directed graph of stages (UAIP-0.1 "Workflow").
type Workflow struct {
	Name         string              `json:"name"`
	Description  string              `json:"description,omitempty"`
	InitialStage string              `json:"initial_stage"`
	Stages       map[string]*Stage   `json:"stages"`
	Transitions  map[string][]string `json:"transitions"`

	compensators map[string]*Task // tasks named as another task's rollback
}

// Stage is a step of a workflow holding the tasks callable in it
// (UAIP-0.1 "Stage"). Prerequisites are session state keys that must be
// present before the stage can be entered.
type Stage struct {
	Name          string           `json:"name"`
	Description   string           `json:"description,omitempty"`
	Tasks         map[string]*Task `json:"tasks"`
	Prerequisites []string         `json:"prerequisites,omitempty"`
}

// Schema is a JSON Schema document (draft 2020-12) as a decoded JSON
// object: a task's parameters and result. It has the underlying type of
// llm.Schema, so a bridge to an agent converts one into the other
// (llm.Schema(s)) without copying.
type Schema map[string]any

// Task is a callable unit of business logic (UAIP-0.1 "Task"). Parameters
// is the JSON Schema its arguments are validated against; Run implements
// it.
type Task struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  Schema `json:"parameters"`
	Returns     Schema `json:"returns,omitempty"`
	// Run executes the task. It must be safe for concurrent use (different
	// sessions call it at once; one session never does).
	Run TaskFunc `json:"-"`
	// Idempotent marks a task that may be retried when its transport
	// fails (webhook tasks).
	Idempotent bool `json:"-"`
	// Risk is the task's declared UAICP risk tier (UAICP 0.3 §5.3, in the
	// UAICP/uaicp repository): RiskReadOnly, RiskWriteLow or
	// RiskWriteHigh. Empty leaves it undeclared, which a governed agent
	// treats as write_high_risk. Clients see it as "risk_tier".
	Risk string `json:"-"`
	// Rollback names the compensating task that undoes a call of this
	// one; a governed agent records it as the call's rollback action
	// before the call runs (a write_high_risk task needs one).
	Rollback *TaskRollback `json:"-"`

	params *jsonschema.Schema // compiled Parameters
}

// TaskRollback names a task's compensating task: Task (of the same
// workflow) is called with Args, each the value of an argument of the
// original call named by a dotted path ("order.id"), or the governed
// call's ID for "$call_id" (an idempotency key). A compensating task may
// be called from any stage: a rollback must stay possible after the
// session moved on.
type TaskRollback struct {
	Task string            `json:"task"`
	Args map[string]string `json:"args,omitempty"`
}

// TaskFunc implements a task.
type TaskFunc func(ctx context.Context, req *TaskRequest) (*TaskResponse, error)

// TaskRequest is one call of a task.
type TaskRequest struct {
	SessionID string         `json:"session_id"`
	Workflow  string         `json:"workflow"`
	Stage     string         `json:"stage"`
	Task      string         `json:"task"`
	Args      map[string]any `json:"args"`
	// State is a copy of the session state; changes go in
	// TaskResponse.StateUpdates.
	State map[string]any `json:"state"`
}

// TaskResponse is a task's outcome: its result and the session state keys
// to set (a null value deletes the key). Both are applied only when the
// task succeeds.
type TaskResponse struct {
	Result       any            `json:"result"`
	StateUpdates map[string]any `json:"state_updates,omitempty"`
}

// Validate checks the workflow: a name, an initial stage that exists,
// stages keyed by their names, transitions between known stages, every
// stage reachable from the initial one, tasks keyed by their names with a
// description, a Run function and parameters that compile as JSON Schema.
// It compiles the schemas; Engine.Register calls it.
func (w *Workflow) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if w.Name == "" {
		bad("workflow has no name")
	}
	if len(w.Stages) == 0 {
		bad("workflow %q has no stages", w.Name)
	}
	if _, ok := w.Stages[w.InitialStage]; !ok {
		bad("initial_stage %q is not a stage", w.InitialStage)
	}
	for _, key := range sortedKeys(w.Stages) {
		st := w.Stages[key]
		if st == nil {
			bad("stage %q is empty", key)
			continue
		}
		if st.Name == "" {
			st.Name = key
		}
		if st.Name != key {
			bad("stage %q is named %q", key, st.Name)
		}
		for _, tk := range sortedKeys(st.Tasks) {
			t := st.Tasks[tk]
			if t == nil {
				bad("stage %q: task %q is empty", key, tk)
				continue
			}
			if t.Name == "" {
				t.Name = tk
			}
			switch {
			case t.Name != tk:
				bad("stage %q: task %q is named %q", key, tk, t.Name)
			case t.Description == "":
				bad("stage %q: task %q has no description", key, tk)
			case t.Run == nil:
				bad("stage %q: task %q has no implementation", key, tk)
			}
			if t.Parameters == nil {
				t.Parameters = Schema{"type": "object", "properties": map[string]any{}}
			}
			sch, err := compileSchema(t.Parameters)
			if err != nil {
				bad("stage %q: task %q: parameters are not a valid JSON Schema: %v", key, tk, err)
				continue
			}
			t.params = sch
			if err := checkRisk(t.Risk); err != nil {
				bad("stage %q: task %q: %v", key, tk, err)
			}
			if t.Returns != nil {
				if _, err := compileSchema(t.Returns); err != nil {
					bad("stage %q: task %q: returns is not a valid JSON Schema: %v", key, tk, err)
				}
			}
		}
	}
	for _, from := range sortedKeys(w.Transitions) {
		if _, ok := w.Stages[from]; !ok {
			bad("transitions: unknown stage %q", from)
		}
		for _, to := range w.Transitions[from] {
			if _, ok := w.Stages[to]; !ok {
				bad("transitions: %q → unknown stage %q", from, to)
			}
		}
	}
	w.compensators = nil
	for _, key := range sortedKeys(w.Stages) {
		st := w.Stages[key]
		if st == nil {
			continue
		}
		for _, tk := range sortedKeys(st.Tasks) {
			t := st.Tasks[tk]
			if t == nil || t.Rollback == nil {
				continue
			}
			ct, err := w.findTask(t.Rollback.Task)
			if err != nil {
				bad("stage %q: task %q: rollback: %v", key, tk, err)
				continue
			}
			for arg, from := range t.Rollback.Args {
				if arg == "" || from == "" {
					bad("stage %q: task %q: rollback args need a name and a source", key, tk)
				}
			}
			if w.compensators == nil {
				w.compensators = map[string]*Task{}
			}
			w.compensators[ct.Name] = ct
		}
	}
	if len(errs) == 0 {
		reached := map[string]bool{w.InitialStage: true}
		queue := []string{w.InitialStage}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, to := range w.Transitions[s] {
				if !reached[to] {
					reached[to] = true
					queue = append(queue, to)
				}
			}
		}
		for _, key := range sortedKeys(w.Stages) {
			if !reached[key] {
				bad("stage %q is unreachable from %q", key, w.InitialStage)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("workflow %q: %w", w.Name, errors.Join(errs...))
	}
	return nil
}

// findTask returns the one task named name, in whichever stages define it
// (the same *Task may be listed in several).
func (w *Workflow) findTask(name string) (*Task, error) {
	var found *Task
	for _, key := range sortedKeys(w.Stages) {
		st := w.Stages[key]
		if st == nil {
			continue
		}
		if t := st.Tasks[name]; t != nil {
			if found != nil && found != t {
				return nil, fmt.Errorf("task %q is defined differently in several stages", name)
			}
			found = t
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no stage has a task %q", name)
	}
	return found, nil
}

// CanTransition reports whether the workflow allows from → to.
func (w *Workflow) CanTransition(from, to string) bool {
	return slices.Contains(w.Transitions[from], to)
}

// StageNames returns the stage names sorted, the initial stage first.
func (w *Workflow) StageNames() []string {
	names := []string{w.InitialStage}
	for _, n := range sortedKeys(w.Stages) {
		if n != w.InitialStage {
			names = append(names, n)
		}
	}
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func compileSchema(s Schema) (*jsonschema.Schema, error) {
	return schemas.Compile("task.json", s)
}
