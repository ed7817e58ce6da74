package uaipconformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/uaipconformance"
)

// uaipHandler is our UAIP handler over the memory store serving the
// built-in store workflow.
func uaipHandler(t *testing.T, opts *workflow.HandlerOptions) http.Handler {
	t.Helper()
	e := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := e.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	return workflow.NewHandler(e, opts)
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func logReport(t *testing.T, rep *uaipconformance.Report) {
	t.Helper()
	for _, r := range rep.Results {
		t.Log(r)
	}
	t.Logf("%d passed, %d failed, %d skipped", rep.Passed(), rep.Failed(), rep.Skipped())
}

func TestUAIP_OurHandlerConforms(t *testing.T) {
	srv := serve(t, uaipHandler(t, nil))
	rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, Workflow: "store", HTTPClient: srv.Client()})
	logReport(t, rep)
	if rep.Failed() != 0 {
		t.Fatalf("%d checks failed against our handler", rep.Failed())
	}
	// Every spec clause is exercised; only tasks whose arguments need a
	// pattern (product ids) are skipped.
	for _, name := range []string{
		"schema/get", "schema/unknown-workflow",
		"initialize/response", "initialize/x-session-id-header", "initialize/unknown-workflow",
		"initialize/400-body-missing", "initialize/400-body-malformed-json", "initialize/400-body-array",
		"initialize/400-body-string", "initialize/400-body-number", "initialize/400-body-null",
		"initialize/400-body-workflow_name-missing", "initialize/400-body-workflow_name-not-a-string",
		"execute/400-missing-session-header", "execute/404-unknown-session", "execute/404-unknown-workflow",
		"execute/400-body-missing", "execute/400-body-array",
		"execute/422-invalid-action", "execute/422-unknown-task", "execute/422-task-of-another-stage",
		"execute/422-transition-to-unknown-stage", "execute/422-transition-not-in-graph",
		"execute/refused-actions-leave-session",
		"execute/method_call/browse.search_products", "execute/state_input",
		"execute/stage_transition/browse->cart", "execute/stage_transition/session-moved",
		"execute/method_call/cart.view_cart",
		"sessions/independent", "transport/content-type-json", "errors/detail",
	} {
		r, ok := rep.Find(name)
		if !ok || !r.Passed {
			t.Errorf("check %s: %+v (present %v)", name, r, ok)
		}
	}
	for _, name := range []string{"execute/method_call/browse.get_product", "execute/method_call/cart.add_to_cart"} {
		if r, _ := rep.Find(name); !r.Skipped || !strings.Contains(r.Got, "pattern") {
			t.Errorf("check %s: want skipped for its pattern, got %+v", name, r)
		}
	}
}

func TestUAIP_DiscoveryAndBearerToken(t *testing.T) {
	srv := serve(t, uaipHandler(t, &workflow.HandlerOptions{BearerToken: "s3cret"}))
	rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL + "/", BearerToken: "s3cret"})
	if rep.Workflow != "store" || rep.Failed() != 0 || rep.Passed() < 30 {
		logReport(t, rep)
		t.Fatalf("workflow %q: %d passed, %d failed", rep.Workflow, rep.Passed(), rep.Failed())
	}
	// Without the token nothing can be discovered.
	rep = uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL})
	if rep.Failed() != 1 || rep.Results[0].Name != "setup/workflow" || !strings.Contains(rep.Results[0].Got, "401") {
		logReport(t, rep)
		t.Fatal("want only the setup failure naming the 401")
	}
	// With the workflow named but no token the spec's checks fail.
	rep = uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, Workflow: "store"})
	if r, _ := rep.Find("initialize/response"); r.Passed || !strings.Contains(r.Got, "HTTP 401") {
		logReport(t, rep)
		t.Fatalf("initialize/response without the token: %+v", r)
	}
}

func TestUAIP_UnreachableServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: url, Workflow: "store"})
	if rep.Passed() != 0 || rep.Failed() == 0 {
		logReport(t, rep)
		t.Fatal("an unreachable server must fail")
	}
}

// pythonLike mimics the deviations of the Python reference server
// (concierge-hq/uaip): the spec's 422 cases answered with HTTP 200 and an "Error:"
// string, /initialize without stages, and a 500 in plain text for a body
// that is JSON but not an object.
func pythonLike(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status, body := rec.Code, rec.Body.Bytes()
		var m map[string]any
		json.Unmarshal(body, &m)
		detail, _ := m["detail"].(string)
		switch {
		case status == http.StatusUnprocessableEntity:
			status = http.StatusOK
			body, _ = json.Marshal("Error: " + detail)
		case status == http.StatusBadRequest && strings.Contains(detail, "JSON object"):
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("Internal Server Error"))
			return
		case req.URL.Path == "/initialize" && status == http.StatusOK:
			delete(m, "stages")
			body, _ = json.Marshal(m)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length") // the body was rewritten
		w.WriteHeader(status)
		w.Write(body)
	})
}

func TestUAIP_CatchesPythonLikeServer(t *testing.T) {
	srv := serve(t, pythonLike(uaipHandler(t, nil)))
	rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, Workflow: "store"})
	logReport(t, rep)
	for _, name := range []string{
		"initialize/response",
		"initialize/400-body-array", "initialize/400-body-number", "execute/400-body-null",
		"execute/422-invalid-action", "execute/422-unknown-task", "execute/422-task-of-another-stage",
		"execute/422-transition-to-unknown-stage", "execute/422-transition-not-in-graph",
		"execute/stage_transition/session-moved", // the refused probe answers 200
		"transport/content-type-json", "errors/detail",
	} {
		if r, ok := rep.Find(name); !ok || r.Passed || r.Skipped {
			t.Errorf("check %s should fail: %+v", name, r)
		}
	}
	r, _ := rep.Find("execute/422-invalid-action")
	if !strings.Contains(r.Got, "HTTP 200") || !strings.Contains(r.Got, "Error: ") {
		t.Errorf("the failure should show the 200 and the Error: text: %q", r.Got)
	}
}

// sharedStage mimics a server that keeps the current stage on the
// workflow instead of the session: every session it issues is served by
// the first one.
type sharedStage struct {
	h      http.Handler
	mu     sync.Mutex
	first  string
	issued map[string]bool
}

func (s *sharedStage) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/initialize" {
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		var m struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &m) == nil && m.SessionID != "" {
			s.mu.Lock()
			if s.first == "" {
				s.first = m.SessionID
			}
			s.issued[m.SessionID] = true
			s.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	s.mu.Lock()
	if id := req.Header.Get("X-Session-Id"); s.issued[id] {
		req.Header.Set("X-Session-Id", s.first)
	}
	s.mu.Unlock()
	s.h.ServeHTTP(w, req)
}

func TestUAIP_CatchesSharedStage(t *testing.T) {
	srv := serve(t, &sharedStage{h: uaipHandler(t, nil), issued: map[string]bool{}})
	rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, Workflow: "store"})
	logReport(t, rep)
	r, _ := rep.Find("sessions/independent")
	if r.Passed || r.Skipped {
		t.Fatalf("sessions/independent should fail: %+v", r)
	}
	// The session the error checks used serves every later session.
	for _, name := range []string{"execute/method_call/browse.search_products", "execute/stage_transition/browse->cart"} {
		if r, _ := rep.Find(name); r.Passed {
			t.Errorf("%s passed on a session that another one moved", name)
		}
	}
}

// missingSchema serves the spec's endpoints but not the workflow schema:
// the checks that need it skip, the others still run.
func TestUAIP_WithoutSchemaEndpoint(t *testing.T) {
	h := uaipHandler(t, nil)
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/api/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"detail":"Not Found"}`))
			return
		}
		h.ServeHTTP(w, req)
	}))
	rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, Workflow: "store"})
	logReport(t, rep)
	if r, _ := rep.Find("schema/get"); r.Passed {
		t.Error("schema/get passed against a 404")
	}
	if rep.Failed() != 1 {
		t.Errorf("%d failures; want only schema/get", rep.Failed())
	}
	for _, name := range []string{"initialize/response", "execute/422-invalid-action", "execute/404-unknown-session"} {
		if r, _ := rep.Find(name); !r.Passed {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

func TestReportString(t *testing.T) {
	r := uaipconformance.Result{Name: "execute/422-invalid-action", Clause: "Errors: 422 Invalid action type",
		Expectation: "HTTP 422", Got: "HTTP 200"}
	want := "FAIL  execute/422-invalid-action  [Errors: 422 Invalid action type]  want: HTTP 422; got: HTTP 200"
	if r.String() != want {
		t.Errorf("got  %q\nwant %q", r.String(), want)
	}
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(r)
	if !strings.Contains(b.String(), `"passed":false`) {
		t.Errorf("JSON: %s", b.String())
	}
}

// recorder is a UAIP server that records the task of every method_call
// it is sent, refused or not.
type recorder struct {
	mu    sync.Mutex
	tasks []string
}

func (rc *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/execute" {
			body, _ := io.ReadAll(r.Body)
			var req struct{ Action, Task string }
			if json.Unmarshal(body, &req) == nil && req.Action == "method_call" {
				rc.mu.Lock()
				rc.tasks = append(rc.tasks, req.Task)
				rc.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

func (rc *recorder) called() map[string]bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]bool{}
	for _, t := range rc.tasks {
		out[t] = true
	}
	return out
}

// tiered is a workflow whose tasks declare every risk tier, or none.
func tiered() *workflow.Workflow {
	task := func(name, tier string) *workflow.Task {
		return &workflow.Task{Name: name, Description: name, Risk: tier, Parameters: workflow.Schema{"type": "object"},
			Run: func(context.Context, *workflow.TaskRequest) (*workflow.TaskResponse, error) {
				return &workflow.TaskResponse{Result: map[string]any{"task": name}}, nil
			}}
	}
	return &workflow.Workflow{Name: "tiered", InitialStage: "start",
		Stages: map[string]*workflow.Stage{
			"start": {Name: "start", Tasks: map[string]*workflow.Task{
				"look": task("look", workflow.RiskReadOnly), "poke": task("poke", workflow.RiskWriteLow), "undeclared": task("undeclared", "")}},
			"next": {Name: "next", Tasks: map[string]*workflow.Task{
				"peek": task("peek", workflow.RiskReadOnly), "pay": task("pay", workflow.RiskWriteHigh)}},
			"end": {Name: "end", Tasks: map[string]*workflow.Task{"erase": task("erase", workflow.RiskWriteHigh)}},
		},
		Transitions: map[string][]string{"start": {"next"}, "next": {"start", "end"}, "end": {}},
	}
}

// In read-only mode the suite sends no method_call for a task that may
// write (a write tier or none declared), not even one it expects refused;
// without it, it calls them all.
func TestUAIP_ReadOnlyModeCallsNoWritingTask(t *testing.T) {
	writes := []string{"poke", "undeclared", "pay", "erase"}
	for _, readOnly := range []bool{true, false} {
		e := workflow.NewEngine(memstore.New().Sessions(), nil)
		if err := e.Register(tiered()); err != nil {
			t.Fatal(err)
		}
		rc := &recorder{}
		srv := serve(t, rc.wrap(workflow.NewHandler(e, nil)))
		rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, Workflow: "tiered", HTTPClient: srv.Client(), ReadOnly: readOnly})
		if rep.Failed() != 0 || rep.ReadOnly != readOnly {
			logReport(t, rep)
			t.Fatalf("read-only %v: %d failed", readOnly, rep.Failed())
		}
		called := rc.called()
		if !called["look"] || !called["peek"] {
			t.Errorf("read-only %v: the read-only tasks were not called: %v", readOnly, called)
		}
		for _, w := range writes {
			if readOnly && called[w] {
				t.Errorf("read-only mode sent a method_call for %s, which may write", w)
			}
		}
		if !readOnly && (!called["poke"] || !called["undeclared"] || !called["pay"]) {
			t.Errorf("default mode did not call the writing tasks: %v", called)
		}
		if readOnly {
			r, _ := rep.Find("execute/method_call/start.poke")
			if !r.Skipped || !strings.Contains(r.Got, "read-only mode") || !strings.Contains(r.Got, "write_low_risk") {
				t.Errorf("start.poke: %+v", r)
			}
			if r, _ := rep.Find("execute/422-task-of-another-stage"); !r.Passed {
				t.Errorf("the 422 check did not run with a read-only task: %+v", r)
			}
		}
	}
}
