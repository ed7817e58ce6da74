package uaipconformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/google/uuid"
)

type runner struct {
	opts   Options
	base   string
	hc     *http.Client
	report *Report

	wf     string          // the workflow under test
	schema *workflowSchema // nil when GET /api/workflows/{name} was unusable
	seen   []*exchange     // every response, for the transport checks
	// callable lists the initial stage's tasks that answered 200 to
	// generated arguments; later checks use them as probes.
	callable []string
	args     map[string]map[string]any // task → generated arguments
}

func (r *runner) add(res result) { r.report.Results = append(r.report.Results, res) }

func (r *runner) pass(name, clause, want string) {
	r.add(result{Name: name, Clause: clause, Passed: true, Expectation: want})
}

func (r *runner) fail(name, clause, want, got string) {
	r.add(result{Name: name, Clause: clause, Expectation: want, Got: got})
}

func (r *runner) skip(name, clause, want, why string) {
	r.add(result{Name: name, Clause: clause, Skipped: true, Expectation: want, Got: why})
}

func (r *runner) check(name, clause, want string, problems []string, x *exchange) {
	if len(problems) == 0 {
		r.pass(name, clause, want)
		return
	}
	got := strings.Join(problems, "; ")
	if x != nil {
		got += " — " + x.String()
	}
	r.fail(name, clause, want, got)
}

// expectOK checks a successful response: HTTP 200 and a JSON
// object body.
func (r *runner) expectOK(name, clause, want string, x *exchange) (map[string]any, bool) {
	m, isObj := x.object()
	switch {
	case x.status != http.StatusOK:
		r.fail(name, clause, want, x.String())
	case !isObj:
		r.fail(name, clause, want, "the body is not a JSON object — "+x.String())
	default:
		r.pass(name, clause, want)
		return m, true
	}
	return nil, false
}

// expectError checks an error response: the status and a JSON object
// with a string detail.
func (r *runner) expectError(name, clause string, status int, x *exchange) bool {
	want := fmt.Sprintf("HTTP %d with a JSON object carrying a string \"detail\"", status)
	_, hasDetail := x.detail()
	switch {
	case x.status != status:
		r.fail(name, clause, want, x.String())
	case !hasDetail:
		r.fail(name, clause, want, "no string detail in a JSON object — "+x.String())
	default:
		r.pass(name, clause, want)
		return true
	}
	return false
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (r *runner) run(ctx context.Context) {
	if r.base == "" {
		r.fail("setup/base-url", "Transport", "a base URL", "Options.BaseURL is empty")
		return
	}
	r.wf = r.opts.Workflow
	if r.wf == "" {
		if r.wf = r.discover(ctx); r.wf == "" {
			return
		}
		r.report.Workflow = r.wf
	}
	r.checkSchema(ctx)
	session, initial := r.checkInitialize(ctx)
	r.checkBadBodies(ctx, "initialize", "/initialize", "")
	r.checkExecuteErrors(ctx, session, initial)
	r.checkRefusedLeaveSession(ctx, session)
	r.checkActions(ctx)
	r.checkIndependence(ctx)
	r.checkTransport()
}

// discover picks the workflow from GET /api/workflows (an agentry
// extension; other servers need Options.Workflow).
func (r *runner) discover(ctx context.Context) string {
	const name, clause = "setup/workflow", "GET /api/workflows (discovery; not in the spec)"
	want := "Options.Workflow, or a server listing its workflows at GET /api/workflows"
	x := r.send(ctx, http.MethodGet, "/api/workflows", "", nil)
	var names []string
	if x.status == http.StatusOK {
		var body any
		if json.Unmarshal(x.body, &body) == nil {
			if m, ok := body.(map[string]any); ok {
				body = m["workflows"]
			}
			if list, ok := body.([]any); ok {
				for _, e := range list {
					switch v := e.(type) {
					case string:
						names = append(names, v)
					case map[string]any:
						if n, ok := v["name"].(string); ok {
							names = append(names, n)
						}
					}
				}
			}
		}
	}
	if len(names) == 0 {
		r.fail(name, clause, want, "no workflow could be discovered — "+x.String())
		return ""
	}
	sort.Strings(names)
	return names[0]
}

func (r *runner) checkSchema(ctx context.Context) {
	want := "HTTP 200 JSON object {name, initial_stage, stages: {<name>: {name, tasks: {<task>: {name, description, parameters}}, transitions}}}"
	x := r.send(ctx, http.MethodGet, "/api/workflows/"+url.PathEscape(r.wf), "", nil)
	m, ok := x.object()
	switch {
	case x.status != http.StatusOK:
		r.fail("schema/get", clauseSchema, want, x.String())
	case !ok:
		r.fail("schema/get", clauseSchema, want, "the body is not a JSON object — "+x.String())
	default:
		s, problems := parseSchema(m, r.wf)
		r.check("schema/get", clauseSchema, want, problems, nil)
		r.schema = s
	}
	x = r.send(ctx, http.MethodGet, "/api/workflows/"+url.PathEscape(unknownName()), "", nil)
	r.expectError("schema/unknown-workflow", clause404Workflow, http.StatusNotFound, x)
}

func unknownName() string { return "conformance-no-such-workflow-" + uuid.NewString()[:8] }

// initialize creates a session, returning its ID ("" on failure).
func (r *runner) initialize(ctx context.Context) (string, *exchange) {
	x := r.post(ctx, "/initialize", "", map[string]any{"workflow_name": r.wf})
	m, _ := x.object()
	id, _ := m["session_id"].(string)
	if x.status != http.StatusOK {
		id = ""
	}
	return id, x
}

// checkInitialize checks POST /initialize and returns the session it made
// and its initial stage.
func (r *runner) checkInitialize(ctx context.Context) (session, initial string) {
	want := `HTTP 200 JSON object {"session_id": <uuid>, "workflow", "initial_stage", "stages": [..]}`
	id, x := r.initialize(ctx)
	m, ok := x.object()
	if x.status != http.StatusOK || !ok {
		r.fail("initialize/response", clauseInitResponse, want, x.String())
		r.skip("initialize/x-session-id-header", clauseInitHeader, "X-Session-Id equal to session_id", "/initialize failed")
	} else {
		var problems []string
		if !uuidRE.MatchString(id) {
			problems = append(problems, fmt.Sprintf("session_id %s is not a UUID", describe(m["session_id"])))
		}
		if w, _ := m["workflow"].(string); w != r.wf {
			problems = append(problems, fmt.Sprintf("workflow is %s, not %q", describe(m["workflow"]), r.wf))
		}
		initial, _ = m["initial_stage"].(string)
		switch {
		case initial == "":
			problems = append(problems, "initial_stage is not a non-empty string")
		case r.schema != nil && initial != r.schema.initial:
			problems = append(problems, fmt.Sprintf("initial_stage is %q, the schema says %q", initial, r.schema.initial))
		}
		stages, ok := stringList(m["stages"])
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("stages is %s, not a list of stage names", describe(m["stages"])))
		case r.schema != nil:
			got := append([]string(nil), stages...)
			sort.Strings(got)
			if want := r.schema.stageNames(); strings.Join(got, ",") != strings.Join(want, ",") {
				problems = append(problems, fmt.Sprintf("stages are %v, the schema has %v", stages, want))
			}
		case !contains(stages, initial):
			problems = append(problems, fmt.Sprintf("stages %v lack the initial stage", stages))
		}
		if !x.isJSON() {
			problems = append(problems, "Content-Type is not application/json")
		}
		r.check("initialize/response", clauseInitResponse, want, problems, x)
		hdr := x.header.Get("X-Session-Id")
		if hdr != "" && hdr == id {
			r.pass("initialize/x-session-id-header", clauseInitHeader, "X-Session-Id equal to session_id")
		} else {
			r.fail("initialize/x-session-id-header", clauseInitHeader, "X-Session-Id equal to session_id",
				fmt.Sprintf("X-Session-Id %q, session_id %q", hdr, id))
		}
		session = id
	}
	if initial == "" && r.schema != nil {
		initial = r.schema.initial
	}
	x = r.post(ctx, "/initialize", "", map[string]any{"workflow_name": unknownName()})
	r.expectError("initialize/unknown-workflow", clause404Workflow, http.StatusNotFound, x)
	return session, initial
}

// badBodies are request bodies the spec's "Missing or invalid request
// body" row covers: none, malformed JSON, and JSON that is not an object.
var badBodies = []struct{ name, body string }{
	{"missing", ""},
	{"malformed-json", `{"workflow_name": `},
	{"array", `[]`},
	{"string", `"workflow_name"`},
	{"number", `42`},
	{"null", `null`},
}

func (r *runner) checkBadBodies(ctx context.Context, endpoint, path, session string) {
	for _, b := range badBodies {
		x := r.send(ctx, http.MethodPost, path, session, []byte(b.body))
		r.expectError(endpoint+"/400-body-"+b.name, clause400Body, http.StatusBadRequest, x)
	}
	if endpoint == "initialize" {
		x := r.send(ctx, http.MethodPost, path, session, []byte(`{"workflow_name": 42}`))
		r.expectError(endpoint+"/400-body-workflow_name-not-a-string", clause400Body, http.StatusBadRequest, x)
		x = r.send(ctx, http.MethodPost, path, session, []byte(`{}`))
		r.expectError(endpoint+"/400-body-workflow_name-missing", clause400Body, http.StatusBadRequest, x)
	}
}

func (r *runner) checkExecuteErrors(ctx context.Context, session, initial string) {
	x := r.execute(ctx, "", map[string]any{"action": "state_input", "state_updates": map[string]any{}})
	r.expectError("execute/400-missing-session-header", clause400Header, http.StatusBadRequest, x)

	x = r.execute(ctx, uuid.NewString(), map[string]any{"action": "state_input", "state_updates": map[string]any{}})
	r.expectError("execute/404-unknown-session", clause404Session, http.StatusNotFound, x)

	const noSession = "/initialize gave no session"
	names := []string{"execute/404-unknown-workflow", "execute/422-invalid-action", "execute/422-unknown-task",
		"execute/422-task-of-another-stage", "execute/422-transition-to-unknown-stage", "execute/422-transition-not-in-graph"}
	if session == "" {
		for _, b := range badBodies {
			names = append(names, "execute/400-body-"+b.name)
		}
		for _, n := range names {
			r.skip(n, clauseOf(n), "", noSession)
		}
		return
	}
	r.checkBadBodies(ctx, "execute", "/execute", session)

	x = r.post(ctx, "/execute", session, map[string]any{"workflow_name": unknownName(), "action": "state_input", "state_updates": map[string]any{}})
	r.expectError("execute/404-unknown-workflow", clause404Workflow, http.StatusNotFound, x)

	x = r.execute(ctx, session, map[string]any{"action": "conformance_no_such_action"})
	r.expectError("execute/422-invalid-action", clause422Action, http.StatusUnprocessableEntity, x)

	x = r.execute(ctx, session, map[string]any{"action": "method_call", "task": "conformance_no_such_task", "args": map[string]any{}})
	r.expectError("execute/422-unknown-task", clause422Task, http.StatusUnprocessableEntity, x)

	if task, stage := r.foreignTask(initial); task == "" {
		why := "no other stage has a task the initial stage lacks (or no schema)"
		if r.opts.ReadOnly {
			why = "no other stage has a read-only task the initial stage lacks (or no schema)"
		}
		r.skip("execute/422-task-of-another-stage", clause422Task, "", why)
	} else {
		x = r.execute(ctx, session, map[string]any{"action": "method_call", "task": task, "args": r.argsOrEmpty(task, stage)})
		r.expectError("execute/422-task-of-another-stage", clause422Task, http.StatusUnprocessableEntity, x)
	}

	x = r.execute(ctx, session, map[string]any{"action": "stage_transition", "stage": "conformance-no-such-stage"})
	r.expectError("execute/422-transition-to-unknown-stage", clause422Transition, http.StatusUnprocessableEntity, x)

	if to := r.unreachableFrom(initial); to == "" {
		r.skip("execute/422-transition-not-in-graph", clause422Transition, "", "every stage is one transition from the initial stage (or no schema)")
	} else {
		x = r.execute(ctx, session, map[string]any{"action": "stage_transition", "stage": to})
		r.expectError("execute/422-transition-not-in-graph", clause422Transition, http.StatusUnprocessableEntity, x)
	}
}

func clauseOf(name string) string {
	switch {
	case strings.Contains(name, "400-body"):
		return clause400Body
	case strings.Contains(name, "404-unknown-workflow"):
		return clause404Workflow
	case strings.Contains(name, "invalid-action"):
		return clause422Action
	case strings.Contains(name, "task"):
		return clause422Task
	case strings.Contains(name, "transition"):
		return clause422Transition
	}
	return ""
}

// checkRefusedLeaveSession checks that the refused actions of
// checkExecuteErrors left the session where it was: the transition out of
// the initial stage still succeeds.
func (r *runner) checkRefusedLeaveSession(ctx context.Context, session string) {
	const name = "execute/refused-actions-leave-session"
	from, to := r.target()
	want := "after the refused actions the session is still at the initial stage"
	switch {
	case session == "":
		r.skip(name, clauseTransition, want, "/initialize gave no session")
		return
	case from == nil || to == nil || len(to.prerequisites) > 0:
		r.skip(name, clauseTransition, want, "no transition without prerequisites from the initial stage (or no schema)")
		return
	}
	x := r.execute(ctx, session, map[string]any{"action": "stage_transition", "stage": to.name})
	if x.status == http.StatusOK {
		r.pass(name, clauseTransition, want)
		return
	}
	r.fail(name, clauseTransition, want, fmt.Sprintf("the transition %s→%s then answered %s", from.name, to.name, x.String()))
}

// foreignTask returns a task of another stage that the initial stage
// does not have.
func (r *runner) foreignTask(initial string) (task string, stage *stageSchema) {
	if r.schema == nil || r.schema.stages[initial] == nil {
		return "", nil
	}
	for _, name := range r.schema.stageNames() {
		if name == initial {
			continue
		}
		st := r.schema.stages[name]
		for _, t := range tasksOnlyIn(st, r.schema.stages[initial]) {
			// A conformant server refuses it, but one that does not would
			// run it: in read-only mode, only a task that reads.
			if !r.opts.ReadOnly || st.readOnly(t) {
				return t, st
			}
		}
	}
	return "", nil
}

// unreachableFrom returns a stage other than from that its transitions do
// not name.
func (r *runner) unreachableFrom(from string) string {
	if r.schema == nil || r.schema.stages[from] == nil {
		return ""
	}
	for _, name := range r.schema.stageNames() {
		if name != from && !contains(r.schema.stages[from].transitions, name) {
			return name
		}
	}
	return ""
}

// argsOrEmpty returns generated arguments for a task, or {}.
func (r *runner) argsOrEmpty(task string, st *stageSchema) map[string]any {
	if a, err := genArgs(st.tasks[task]); err == nil {
		return a
	}
	return map[string]any{}
}

// target picks the transition the action checks take from the initial
// stage: the first one whose stage has no prerequisites, else the first.
func (r *runner) target() (from, to *stageSchema) {
	if r.schema == nil {
		return nil, nil
	}
	from = r.schema.stages[r.schema.initial]
	for _, t := range from.transitions {
		if st := r.schema.stages[t]; st != nil && t != from.name && len(st.prerequisites) == 0 {
			return from, st
		}
	}
	for _, t := range from.transitions {
		if st := r.schema.stages[t]; st != nil && t != from.name {
			return from, st
		}
	}
	return from, nil
}

// checkActions runs each /execute action on a fresh session: the initial
// stage's tasks, a state_input, a transition, and the tasks of the stage
// reached.
func (r *runner) checkActions(ctx context.Context) {
	session, _ := r.initialize(ctx)
	from, to := r.target()
	if session == "" || from == nil {
		why := "/initialize gave no session"
		if session != "" {
			why = "no usable workflow schema"
		}
		r.skip("execute/method_call", clauseMethodCall, "", why)
		r.skip("execute/state_input", clauseStateInput, "", why)
		r.skip("execute/stage_transition", clauseTransition, "", why)
		return
	}
	r.args = map[string]map[string]any{}
	r.callable = r.checkMethodCalls(ctx, session, from)

	stateWant := "HTTP 200 with a JSON object"
	x := r.execute(ctx, session, map[string]any{"action": "state_input", "state_updates": map[string]any{"conformance.probe": "value"}})
	r.expectOK("execute/state_input", clauseStateInput, stateWant, x)

	name := "execute/stage_transition/" + from.name + "->"
	if to == nil {
		r.skip(name, clauseTransition, "", fmt.Sprintf("stage %q has no outgoing transition", from.name))
		return
	}
	name += to.name
	if len(to.prerequisites) > 0 {
		updates := map[string]any{}
		for _, k := range to.prerequisites {
			updates[k] = "conformance"
		}
		r.execute(ctx, session, map[string]any{"action": "state_input", "state_updates": updates})
	}
	x = r.execute(ctx, session, map[string]any{"action": "stage_transition", "stage": to.name})
	m, ok := r.expectOK(name, clauseTransition, "HTTP 200 with a JSON object", x)
	if !ok {
		r.skip("execute/stage_transition/session-moved", clauseTransition, "", "the transition failed")
		return
	}
	r.checkMoved(ctx, session, m, from, to)
	if len(to.prerequisites) == 0 { // placeholder prerequisites could make tasks fail
		r.checkMethodCalls(ctx, session, to)
	}
}

// checkMethodCalls calls every task of a stage with generated arguments
// and returns those that answered 200.
func (r *runner) checkMethodCalls(ctx context.Context, session string, st *stageSchema) []string {
	var ok []string
	for _, task := range st.taskNames() {
		name := "execute/method_call/" + st.name + "." + task
		if r.opts.ReadOnly && !st.readOnly(task) {
			tier := st.tiers[task]
			if tier == "" {
				tier = "none declared"
			}
			r.skip(name, clauseMethodCall, "HTTP 200 with a JSON object", "read-only mode: the task may write (risk_tier: "+tier+")")
			continue
		}
		args, err := genArgs(st.tasks[task])
		if err != nil {
			r.skip(name, clauseMethodCall, "HTTP 200 with a JSON object", "arguments cannot be generated: "+err.Error())
			continue
		}
		x := r.execute(ctx, session, map[string]any{"action": "method_call", "task": task, "args": args})
		if _, passed := r.expectOK(name, clauseMethodCall, "HTTP 200 with a JSON object for arguments "+describe(args), x); passed {
			ok = append(ok, task)
			r.args[task] = args
		}
	}
	return ok
}

// checkMoved checks that a transition moved the session: the response's
// current_stage (when it has one), a task only the old stage has is now
// refused, and a task only the new stage has is now accepted.
func (r *runner) checkMoved(ctx context.Context, session string, resp map[string]any, from, to *stageSchema) {
	const name = "execute/stage_transition/session-moved"
	want := fmt.Sprintf("the session is at %q: tasks of %q only are refused with 422", to.name, from.name)
	var problems []string
	probed := false
	if cs, has := resp["current_stage"]; has {
		probed = true
		if cs != to.name {
			problems = append(problems, fmt.Sprintf("the response's current_stage is %s", describe(cs)))
		}
	}
	if p := r.probeTask(from, to); p != "" {
		probed = true
		x := r.execute(ctx, session, map[string]any{"action": "method_call", "task": p, "args": r.args[p]})
		if x.status != http.StatusUnprocessableEntity {
			problems = append(problems, fmt.Sprintf("task %q of stage %q answered %s", p, from.name, x.String()))
		}
	}
	if !probed {
		r.skip(name, clauseTransition, want, "no task tells the stages apart")
		return
	}
	r.check(name, clauseTransition, want, problems, nil)
}

// probeTask returns a task of from that answered 200 and that to lacks.
func (r *runner) probeTask(from, to *stageSchema) string {
	for _, t := range r.callable {
		if _, ok := to.tasks[t]; !ok {
			if _, ok := from.tasks[t]; ok {
				return t
			}
		}
	}
	return ""
}

// checkIndependence moves one session and checks another stays put.
func (r *runner) checkIndependence(ctx context.Context) {
	const name = "sessions/independent"
	from, to := r.target()
	want := "moving session A does not move session B"
	if from == nil || to == nil || len(to.prerequisites) > 0 {
		r.skip(name, clauseSessionIsolate, want, "no transition without prerequisites from the initial stage (or no schema)")
		return
	}
	a, xa := r.initialize(ctx)
	b, xb := r.initialize(ctx)
	if a == "" || b == "" {
		r.fail(name, clauseSessionIsolate, want, "/initialize failed — "+xa.String()+" / "+xb.String())
		return
	}
	if a == b {
		r.fail(name, clauseSessionIsolate, want, "two /initialize calls returned the same session_id "+a)
		return
	}
	x := r.execute(ctx, a, map[string]any{"action": "stage_transition", "stage": to.name})
	if x.status != http.StatusOK {
		r.fail(name, clauseSessionIsolate, want, "moving A failed — "+x.String())
		return
	}
	var problems []string
	if p := r.probeTask(from, to); p != "" {
		x = r.execute(ctx, b, map[string]any{"action": "method_call", "task": p, "args": r.args[p]})
		if x.status != http.StatusOK {
			problems = append(problems, fmt.Sprintf("B (never moved) could not call %q of stage %q: %s", p, from.name, x.String()))
		}
	}
	if !contains(to.transitions, to.name) {
		// Valid only from the initial stage: B must still be there.
		x = r.execute(ctx, b, map[string]any{"action": "stage_transition", "stage": to.name})
		if x.status != http.StatusOK {
			problems = append(problems, fmt.Sprintf("B (never moved) could not make the transition %s→%s: %s", from.name, to.name, x.String()))
		}
	}
	r.check(name, clauseSessionIsolate, want, problems, nil)
}

// checkTransport checks every response the suite saw: JSON, and error
// bodies with a string detail.
func (r *runner) checkTransport() {
	if len(r.seen) == 0 {
		r.skip("transport/content-type-json", clauseTransport, "every response has Content-Type application/json", "no response was received")
		r.skip("errors/detail", clauseErrorShape, "every error response is a JSON object with a string \"detail\"", "no response was received")
		return
	}
	var notJSON, noDetail []string
	for _, x := range r.seen {
		where := fmt.Sprintf("%s %s → %d", x.method, x.path, x.status)
		if !x.isJSON() {
			notJSON = append(notJSON, fmt.Sprintf("%s (%q)", where, x.header.Get("Content-Type")))
		}
		if _, ok := x.detail(); x.status >= 400 && !ok {
			noDetail = append(noDetail, where)
		}
	}
	r.check("transport/content-type-json", clauseTransport,
		fmt.Sprintf("every response (%d seen) has Content-Type application/json", len(r.seen)), summarize(notJSON), nil)
	r.check("errors/detail", clauseErrorShape, "every error response is a JSON object with a string \"detail\"", summarize(noDetail), nil)
}

func summarize(xs []string) []string {
	const max = 5
	if len(xs) > max {
		return append(xs[:max:max], fmt.Sprintf("and %d more", len(xs)-max))
	}
	return xs
}
