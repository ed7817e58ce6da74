package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// mapStore is a minimal SessionStore for handler tests.
type mapStore struct {
	mu sync.Mutex
	m  map[string]*workflow.Session
}

func newMapStore() *mapStore { return &mapStore{m: map[string]*workflow.Session{}} }

func (s *mapStore) Create(_ context.Context, x *workflow.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[x.ID]; ok {
		return workflow.ErrConflict
	}
	s.m[x.ID] = x.Clone()
	return nil
}

func (s *mapStore) Get(_ context.Context, id string) (*workflow.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	if !ok || x.Expired(time.Now()) {
		return nil, workflow.ErrSessionNotFound
	}
	return x.Clone(), nil
}

func (s *mapStore) Update(_ context.Context, x *workflow.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[x.ID]
	if !ok {
		return workflow.ErrSessionNotFound
	}
	if cur.Version != x.Version-1 {
		return workflow.ErrConflict
	}
	s.m[x.ID] = x.Clone()
	return nil
}

func (s *mapStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
	return nil
}

func (s *mapStore) DeleteExpired(_ context.Context, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, x := range s.m {
		if x.Expired(now) {
			delete(s.m, id)
			n++
		}
	}
	return n, nil
}

func newServer(t *testing.T, opts *workflow.HandlerOptions) (*httptest.Server, *workflow.Engine) {
	t.Helper()
	e := workflow.NewEngine(newMapStore(), nil)
	if err := e.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(e, opts))
	t.Cleanup(srv.Close)
	return srv, e
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func do(t *testing.T, srv *httptest.Server, method, path, session, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %q", method, path, raw)
		}
	}
	if ct := resp.Header.Get("Content-Type"); len(raw) > 0 && ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return r
}

func initSession(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	r := do(t, srv, "POST", "/initialize", "", `{"workflow_name":"store"}`)
	if r.status != 200 {
		t.Fatalf("initialize: %d %s", r.status, r.raw)
	}
	return r.body["session_id"].(string)
}

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

// golden compares a JSON body (session ids and timestamps masked) with
// testdata/golden/<name>.json.
func golden(t *testing.T, name string, raw []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	b = uuidPattern.ReplaceAll(b, []byte("<uuid>"))
	b = regexp.MustCompile(`ORD-[0-9A-F]{8}`).ReplaceAll(b, []byte("ORD-<id>"))
	b = append(b, '\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, b, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), string(b)); diff != "" {
		t.Errorf("%s (-golden +got):\n%s", name, diff)
	}
}

func TestUAIP_Initialize(t *testing.T) {
	srv, _ := newServer(t, nil)
	r := do(t, srv, "POST", "/initialize", "", `{"workflow_name":"store"}`)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	id, _ := r.body["session_id"].(string)
	if !uuidPattern.MatchString(id) || r.header.Get("X-Session-Id") != id {
		t.Errorf("session id %q, header %q", id, r.header.Get("X-Session-Id"))
	}
	if r.body["workflow"] != "store" || r.body["initial_stage"] != "browse" {
		t.Errorf("body %v", r.body)
	}
	if diff := cmp.Diff([]any{"browse", "cart", "checkout", "complete"}, r.body["stages"]); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
	golden(t, "initialize", r.raw)
}

func TestUAIP_GetWorkflow(t *testing.T) {
	srv, _ := newServer(t, nil)
	r := do(t, srv, "GET", "/api/workflows/store", "", "")
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	golden(t, "workflow_store", r.raw)
	stages := r.body["stages"].(map[string]any)
	cart := stages["cart"].(map[string]any)
	if cart["name"] != "cart" || cart["transitions"] == nil || cart["tasks"].(map[string]any)["add_to_cart"].(map[string]any)["parameters"] == nil {
		t.Errorf("cart stage %v", cart)
	}
	if r := do(t, srv, "GET", "/api/workflows/nope", "", ""); r.status != 404 || r.body["detail"] == nil {
		t.Errorf("unknown workflow: %d %s", r.status, r.raw)
	}
}

// The full store flow, every action, with golden bodies.
func TestUAIP_ExecuteActions(t *testing.T) {
	srv, _ := newServer(t, nil)
	id := initSession(t, srv)
	steps := []struct {
		name, body string
		status     int
	}{
		{"method_call_search", `{"workflow_name":"store","action":"method_call","task":"search_products","args":{"category":"equipment"}}`, 200},
		{"stage_transition_cart", `{"workflow_name":"store","action":"stage_transition","stage":"cart"}`, 200},
		{"method_call_add", `{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-001","quantity":2}}`, 200},
		{"prerequisite_missing", `{"workflow_name":"store","action":"stage_transition","stage":"checkout"}`, 422},
		{"state_input_email", `{"workflow_name":"store","action":"state_input","state_updates":{"user.email":"ada@example.com"}}`, 200},
		{"stage_transition_checkout", `{"workflow_name":"store","action":"stage_transition","stage":"checkout"}`, 200},
		{"method_call_order", `{"workflow_name":"store","action":"method_call","task":"place_order","args":{"payment_method":"card"}}`, 200},
		{"stage_transition_complete", `{"workflow_name":"store","action":"stage_transition","stage":"complete"}`, 200},
	}
	for _, s := range steps {
		r := do(t, srv, "POST", "/execute", id, s.body)
		if r.status != s.status {
			t.Fatalf("%s: status %d, want %d: %s", s.name, r.status, s.status, r.raw)
		}
		if s.status == 200 && r.header.Get("X-Session-Id") != id {
			t.Errorf("%s: X-Session-Id %q", s.name, r.header.Get("X-Session-Id"))
		}
		golden(t, "execute_"+s.name, r.raw)
	}
	// The dotted key is one literal key.
	r := do(t, srv, "GET", "/api/sessions/"+id, "", "")
	state := r.body["state"].(map[string]any)
	if state["user.email"] != "ada@example.com" || state["user"] != nil || r.body["current_stage"] != "complete" {
		t.Errorf("session %s", r.raw)
	}
}

// Every error row of the spec's table, and ours.
func TestUAIP_Errors(t *testing.T) {
	srv, _ := newServer(t, &workflow.HandlerOptions{MaxBodyBytes: 4096})
	id := initSession(t, srv)
	cases := []struct {
		name, method, path, session, body string
		status                            int
		detail                            string
	}{
		{"400 missing body", "POST", "/initialize", "", "", 400, "Missing request body"},
		{"400 invalid JSON", "POST", "/initialize", "", `{"workflow_name":`, 400, "Invalid JSON in request body: workflow_name: unexpected end of JSON input, expecting a value"},
		{"400 array body", "POST", "/initialize", "", `["store"]`, 400, "Request body must be a JSON object"},
		{"400 string body", "POST", "/execute", id, `"hi"`, 400, "Request body must be a JSON object"},
		{"400 null body", "POST", "/execute", id, `null`, 400, "Request body must be a JSON object"},
		{"400 two objects", "POST", "/initialize", "", `{"workflow_name":"store"}{}`, 400, "Request body must be a single JSON object (unexpected data after the JSON value at byte 25)"},
		{"400 wrong field type", "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"view_cart","args":[1]}`, 400, "Invalid request body: args: must be an object"},
		{"400 no workflow_name", "POST", "/initialize", "", `{}`, 400, "workflow_name is required"},
		{"400 missing X-Session-Id", "POST", "/execute", "", `{"workflow_name":"store","action":"state_input","state_updates":{}}`, 400, "Missing X-Session-Id header"},
		{"404 workflow on initialize", "POST", "/initialize", "", `{"workflow_name":"bank"}`, 404, "Workflow 'bank' not found"},
		{"404 workflow on execute", "POST", "/execute", id, `{"workflow_name":"bank","action":"state_input","state_updates":{}}`, 404, "Workflow 'bank' not found"},
		{"404 session", "POST", "/execute", "00000000-0000-4000-8000-000000000000", `{"workflow_name":"store","action":"state_input","state_updates":{}}`, 404, "Session not found"},
		{"422 invalid action", "POST", "/execute", id, `{"workflow_name":"store","action":"teleport"}`, 422, "Invalid action type 'teleport'"},
		{"422 task not in stage", "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-001","quantity":1}}`, 422, "Task 'add_to_cart' not available in stage 'browse'"},
		{"422 unknown task", "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"hack"}`, 422, "Task 'hack' not available in stage 'browse'"},
		{"422 invalid transition", "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition","stage":"checkout"}`, 422, "Invalid transition from 'browse' to 'checkout'"},
		{"422 transition to unknown stage", "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition","stage":"vault"}`, 422, "Invalid transition from 'browse' to 'vault'"},
		{"422 invalid arguments", "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"search_products","args":{"category":"cars","extra":1}}`, 422, ""},
		{"422 task error", "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"get_product","args":{"product_id":"SKU-999"}}`, 422, "Task 'get_product' failed: no product SKU-999"},
		{"400 task missing", "POST", "/execute", id, `{"workflow_name":"store","action":"method_call"}`, 400, "task is required for method_call"},
		{"400 stage missing", "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition"}`, 400, "stage is required for stage_transition"},
		{"400 state_updates missing", "POST", "/execute", id, `{"workflow_name":"store","action":"state_input"}`, 400, "state_updates must be an object"},
		{"413 too large", "POST", "/execute", id, `{"workflow_name":"store","action":"state_input","state_updates":{"x":"` + strings.Repeat("a", 5000) + `"}}`, 413, "Request body too large"},
		{"405 method", "GET", "/execute", "", "", 405, "Method Not Allowed"},
		{"404 route", "GET", "/nowhere", "", "", 404, "Not Found"},
		{"404 session view", "GET", "/api/sessions/unknown", "", "", 404, "Session not found"},
	}
	for _, c := range cases {
		r := do(t, srv, c.method, c.path, c.session, c.body)
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, r.status, c.status, r.raw)
			continue
		}
		d, _ := r.body["detail"].(string)
		if d == "" || (c.detail != "" && d != c.detail) {
			t.Errorf("%s: detail %q, want %q", c.name, d, c.detail)
		}
	}
	// Machine-readable extras.
	r := do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"search_products","args":{"category":"cars","extra":1}}`)
	golden(t, "error_invalid_arguments", r.raw)
	r = do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition","stage":"checkout"}`)
	if diff := cmp.Diff([]any{"cart"}, r.body["allowed"]); diff != "" {
		t.Errorf("allowed transitions (-want +got):\n%s", diff)
	}
	// Nothing that failed changed the session.
	s := do(t, srv, "GET", "/api/sessions/"+id, "", "")
	if s.body["current_stage"] != "browse" || s.body["version"] != 1.0 || len(s.body["state"].(map[string]any)) != 0 {
		t.Errorf("session changed by failed requests: %s", s.raw)
	}
}

func TestUAIP_PrerequisitesListMissingKeys(t *testing.T) {
	srv, _ := newServer(t, nil)
	id := initSession(t, srv)
	do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition","stage":"cart"}`)
	r := do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition","stage":"checkout"}`)
	if r.status != 422 {
		t.Fatalf("status %d", r.status)
	}
	if diff := cmp.Diff([]any{"user.email", "cart"}, r.body["missing"]); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
}

func TestUAIP_SessionsAreIndependent(t *testing.T) {
	srv, _ := newServer(t, nil)
	a, b := initSession(t, srv), initSession(t, srv)
	do(t, srv, "POST", "/execute", a, `{"workflow_name":"store","action":"stage_transition","stage":"cart"}`)
	ra := do(t, srv, "GET", "/api/sessions/"+a, "", "")
	rb := do(t, srv, "GET", "/api/sessions/"+b, "", "")
	if ra.body["current_stage"] != "cart" || rb.body["current_stage"] != "browse" {
		t.Errorf("a at %v, b at %v", ra.body["current_stage"], rb.body["current_stage"])
	}
}

func TestUAIP_ConcurrentExecuteOnOneSessionIsSerialized(t *testing.T) {
	srv, _ := newServer(t, nil)
	id := initSession(t, srv)
	do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition","stage":"cart"}`)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			r := do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-005","quantity":1}}`)
			if r.status != 200 {
				t.Errorf("status %d: %s", r.status, r.raw)
			}
		})
	}
	wg.Wait()
	r := do(t, srv, "GET", "/api/sessions/"+id, "", "")
	if q := r.body["state"].(map[string]any)["cart"].(map[string]any)["SKU-005"]; q != 20.0 {
		t.Errorf("quantity %v after 20 concurrent adds, want 20 (lost updates)", q)
	}
	if r.body["version"] != 22.0 {
		t.Errorf("version %v, want 22", r.body["version"])
	}
}

func TestUAIP_ListAndDeleteSessions(t *testing.T) {
	srv, _ := newServer(t, nil)
	r := do(t, srv, "GET", "/api/workflows", "", "")
	if ws := r.body["workflows"].([]any); len(ws) != 1 || ws[0].(map[string]any)["name"] != "store" {
		t.Errorf("workflows %s", r.raw)
	}
	id := initSession(t, srv)
	if r := do(t, srv, "DELETE", "/api/sessions/"+id, "", ""); r.status != 204 {
		t.Errorf("delete: %d", r.status)
	}
	if r := do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"state_input","state_updates":{}}`); r.status != 404 {
		t.Errorf("deleted session: %d", r.status)
	}
	if r := do(t, srv, "DELETE", "/api/sessions/"+id, "", ""); r.status != 404 {
		t.Errorf("second delete: %d", r.status)
	}
}

func TestUAIP_SessionTTL(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := newMapStore()
	e := workflow.NewEngine(store, &workflow.EngineOptions{SessionTTL: time.Hour, Now: clock})
	e.Register(builtin.Store())
	s, err := e.Initialize(context.Background(), "store")
	if err != nil {
		t.Fatal(err)
	}
	if !s.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("expires %v", s.ExpiresAt)
	}
	mu.Lock()
	now = now.Add(30 * time.Minute)
	mu.Unlock()
	res, err := e.Execute(context.Background(), s.ID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "stage_transition", Stage: "cart"})
	if err != nil || !res.Session.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("touch did not extend the TTL: %v %v", err, res)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if n, _ := e.SweepExpired(context.Background()); n != 1 {
		t.Errorf("swept %d", n)
	}
	_, err = e.Execute(context.Background(), s.ID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "state_input", StateUpdates: map[string]any{}})
	if !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Errorf("expired session: %v", err)
	}
}

func TestUAIP_BearerAuthAndCORS(t *testing.T) {
	srv, _ := newServer(t, &workflow.HandlerOptions{BearerToken: "s3cret", CORSOrigins: []string{"https://app.example"}})
	r := do(t, srv, "POST", "/initialize", "", `{"workflow_name":"store"}`)
	if r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d", r.status)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/initialize", strings.NewReader(`{"workflow_name":"store"}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Origin", "https://app.example")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Session-Id") {
		t.Errorf("authorized CORS request: %d %v", resp.StatusCode, resp.Header)
	}
	pre, _ := http.NewRequest("OPTIONS", srv.URL+"/execute", nil)
	pre.Header.Set("Origin", "https://app.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	resp, _ = srv.Client().Do(pre)
	resp.Body.Close()
	if resp.StatusCode != 204 || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "X-Session-Id") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	other, _ := http.NewRequest("GET", srv.URL+"/api/workflows", nil)
	other.Header.Set("Authorization", "Bearer s3cret")
	other.Header.Set("Origin", "https://evil.example")
	resp, _ = srv.Client().Do(other)
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS allowed an unlisted origin")
	}
	plain, _ := newServer(t, nil)
	pr, _ := http.NewRequest("GET", plain.URL+"/api/workflows", nil)
	pr.Header.Set("Origin", "https://app.example")
	resp, _ = plain.Client().Do(pr)
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS headers without configuration")
	}
}

func TestUAIP_TaskPanicIsA500WithoutDetails(t *testing.T) {
	wf := builtin.Store()
	wf.Stages["browse"].Tasks["get_product"].Run = func(context.Context, *workflow.TaskRequest) (*workflow.TaskResponse, error) {
		panic("secret internal state")
	}
	e := workflow.NewEngine(newMapStore(), &workflow.EngineOptions{Logger: discard()})
	e.Register(wf)
	srv := httptest.NewServer(workflow.NewHandler(e, &workflow.HandlerOptions{Logger: discard()}))
	defer srv.Close()
	id := initSession(t, srv)
	r := do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"method_call","task":"get_product","args":{"product_id":"SKU-001"}}`)
	if r.status != 500 || bytes.Contains(r.raw, []byte("secret")) {
		t.Errorf("panic: %d %s", r.status, r.raw)
	}
}

func FuzzExecuteRequest(f *testing.F) {
	for _, s := range []string{`{"workflow_name":"store","action":"method_call","task":"view_cart","args":{}}`,
		`{"workflow_name":"store","action":"stage_transition","stage":"cart"}`, `{"workflow_name":"store","action":"state_input","state_updates":{"a.b":null}}`,
		`[]`, `null`, `{"args":"x"}`, `{"workflow_name":1}`, ``} {
		f.Add(s)
	}
	e := workflow.NewEngine(newMapStore(), &workflow.EngineOptions{Logger: discard()})
	e.Register(builtin.Store())
	h := workflow.NewHandler(e, &workflow.HandlerOptions{Logger: discard()})
	s, _ := e.Initialize(context.Background(), "store")
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/execute", strings.NewReader(body))
		req.Header.Set("X-Session-Id", s.ID)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%d for %q: %s", rec.Code, body, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("response is not a JSON object: %q", rec.Body)
		}
		if rec.Code != 200 {
			if _, ok := out["detail"].(string); !ok {
				t.Fatalf("error without detail: %s", rec.Body)
			}
		}
		_ = fmt.Sprint(out)
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestEngineSessionCache(t *testing.T) {
	store := &countingStore{mapStore: newMapStore()}
	e := workflow.NewEngine(store, &workflow.EngineOptions{CacheSessions: 2})
	e.Register(builtin.Store())
	ctx := context.Background()
	s, _ := e.Initialize(ctx, "store")
	for _, st := range []string{"cart", "browse", "cart"} {
		if _, err := e.Execute(ctx, s.ID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "stage_transition", Stage: st}); err != nil {
			t.Fatal(err)
		}
	}
	if store.gets != 1 {
		t.Errorf("%d store reads for 3 actions, want 1 (then the cache)", store.gets)
	}
	// Another writer changes the session behind the engine's back: the
	// stale cache loses the compare-and-swap, and the next action reads
	// the store again.
	cur, _ := store.mapStore.Get(ctx, s.ID)
	cur.Version++
	cur.Stage = "browse"
	store.mapStore.Update(ctx, cur)
	_, err := e.Execute(ctx, s.ID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "state_input", StateUpdates: map[string]any{"k": 1.0}})
	if !errors.Is(err, workflow.ErrConflict) {
		t.Fatalf("stale cache: %v, want a lost compare-and-swap", err)
	}
	if _, err := e.Execute(ctx, s.ID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "stage_transition", Stage: "cart"}); err != nil {
		t.Errorf("after the conflict: %v", err)
	}
	for range 3 { // the cache stays bounded
		x, _ := e.Initialize(ctx, "store")
		e.Execute(ctx, x.ID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "stage_transition", Stage: "cart"})
	}
}

type countingStore struct {
	*mapStore
	gets int
}

func (c *countingStore) Get(ctx context.Context, id string) (*workflow.Session, error) {
	c.gets++
	return c.mapStore.Get(ctx, id)
}

func TestStateValuesAreStoredAsJSON(t *testing.T) {
	type item struct {
		N int `json:"n"`
	}
	wf := builtin.Store()
	wf.Stages["browse"].Tasks["get_product"].Run = func(context.Context, *workflow.TaskRequest) (*workflow.TaskResponse, error) {
		return &workflow.TaskResponse{StateUpdates: map[string]any{"count": 3, "item": item{N: 7}, "list": []int{1, 2}, "ok": true}}, nil
	}
	e := workflow.NewEngine(newMapStore(), &workflow.EngineOptions{CacheSessions: 10})
	e.Register(wf)
	ctx := context.Background()
	s, _ := e.Initialize(ctx, "store")
	res, err := e.Execute(ctx, s.ID, &workflow.ExecuteRequest{WorkflowName: "store", Action: "method_call", Task: "get_product", Args: map[string]any{"product_id": "SKU-001"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"count": 3.0, "item": map[string]any{"n": 7.0}, "list": []any{1.0, 2.0}, "ok": true}
	if diff := cmp.Diff(want, res.Session.State); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}
