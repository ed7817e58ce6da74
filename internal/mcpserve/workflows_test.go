package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/mcpserve"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
)

// safety bounds every wait of these tests; none of them measures time.
const safety = 30 * time.Second

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newEngine(t *testing.T) *workflow.Engine {
	t.Helper()
	e := workflow.NewEngine(memstore.New().Sessions(), &workflow.EngineOptions{Logger: quiet()})
	if err := e.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	return e
}

// serveWorkflows serves e's workflows at /mcp/workflows/{name} and
// returns the base URL.
func serveWorkflows(t *testing.T, e *workflow.Engine, opts *mcpserve.Options) string {
	t.Helper()
	if opts == nil {
		opts = &mcpserve.Options{}
	}
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	h := mcpserve.Workflows(e, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp/workflows/{name}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return srv.URL
}

// peer is a go-sdk client session with its notifications on channels.
type peer struct {
	cs       *mcp.ClientSession
	changed  chan struct{} // notifications/tools/list_changed
	updated  chan string   // notifications/resources/updated (URI)
	progress chan string   // notifications/progress (message)
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectHTTP(t *testing.T, url, token string) *peer {
	t.Helper()
	p, err := tryConnect(url, token)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { p.cs.Close() })
	return p
}

func tryConnect(url, token string) (*peer, error) {
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: bearerTransport{token}}
	}
	return connect(tr)
}

func connect(tr mcp.Transport) (*peer, error) {
	p := &peer{changed: make(chan struct{}, 100), updated: make(chan string, 100), progress: make(chan string, 1000)}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { p.changed <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { p.updated <- r.Params.URI },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			p.progress <- r.Params.Message
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		return nil, err
	}
	p.cs = cs
	return p, nil
}

func (p *peer) toolNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, tool := range p.tools(t) {
		names = append(names, tool.Name)
	}
	return names
}

func (p *peer) tools(t *testing.T) []*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	res, err := p.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return res.Tools
}

func (p *peer) call(t *testing.T, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: a JSON-RPC error, not a tool result: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and returns its structured content.
func (p *peer) ok(t *testing.T, name string, args any) map[string]any {
	t.Helper()
	res := p.call(t, name, args)
	if res.IsError {
		t.Fatalf("tools/call %s: isError: %s", name, text(res))
	}
	obj, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("tools/call %s: structuredContent %T, want an object", name, res.StructuredContent)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("tools/call %s: the text is not the JSON of the structured content: %v", name, err)
	}
	if diff := cmp.Diff(obj, fromText); diff != "" {
		t.Errorf("tools/call %s: text and structuredContent differ (-structured +text):\n%s", name, diff)
	}
	return obj
}

// refused calls a tool that UAIP must refuse and returns the message.
func (p *peer) refused(t *testing.T, name string, args any) string {
	t.Helper()
	res := p.call(t, name, args)
	if !res.IsError {
		t.Fatalf("tools/call %s: not an error: %s", name, text(res))
	}
	return text(res)
}

func (p *peer) waitChanged(t *testing.T) {
	t.Helper()
	select {
	case <-p.changed:
	case <-time.After(safety):
		t.Fatal("no notifications/tools/list_changed")
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func (p *peer) session(t *testing.T) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	res, err := p.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserve.SessionURI("store")})
	if err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// storeFlow drives the store workflow from browse to complete through
// p, checking the tools at each stage and UAIP's refusals.
func storeFlow(t *testing.T, p *peer) {
	t.Helper()
	want := func(names ...string) {
		t.Helper()
		slices.Sort(names) // the SDK lists tools by name
		if diff := cmp.Diff(names, p.toolNames(t)); diff != "" {
			t.Fatalf("tools/list (-want +got):\n%s", diff)
		}
	}
	want("get_product", "search_products", "stage_transition", "state_input")
	found := p.ok(t, "search_products", map[string]any{"query": "espresso"})
	if ps, _ := found["products"].([]any); len(ps) != 1 {
		t.Errorf("search_products: %v", found)
	}
	if msg := p.refused(t, "place_order", map[string]any{"payment_method": "card"}); !strings.Contains(msg, "Task 'place_order' not available in stage 'browse'") {
		t.Errorf("a task of another stage: %q", msg)
	}
	if msg := p.refused(t, "stage_transition", map[string]any{"stage": "complete"}); !strings.Contains(msg, "Invalid transition from 'browse' to 'complete'") {
		t.Errorf("an unreachable stage: %q", msg)
	}

	moved := p.ok(t, "stage_transition", map[string]any{"stage": "cart"})
	if moved["current_stage"] != "cart" {
		t.Errorf("stage_transition: %v", moved)
	}
	p.waitChanged(t)
	want("add_to_cart", "remove_from_cart", "view_cart", "stage_transition", "state_input")
	if msg := p.refused(t, "add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 0}); !strings.Contains(msg, "Invalid arguments for task 'add_to_cart': /quantity") {
		t.Errorf("bad arguments: %q", msg)
	}
	p.ok(t, "add_to_cart", map[string]any{"product_id": "SKU-001", "quantity": 2})
	msg := p.refused(t, "stage_transition", map[string]any{"stage": "checkout"})
	if !strings.Contains(msg, "Cannot enter stage 'checkout': missing state 'user.email'") {
		t.Errorf("missing prerequisites: %q", msg)
	}
	p.ok(t, "state_input", map[string]any{"state_updates": map[string]any{"user.email": "a@example.com"}})
	p.ok(t, "stage_transition", map[string]any{"stage": "checkout"})
	p.waitChanged(t)
	want("place_order", "view_cart", "stage_transition", "state_input")
	order := p.ok(t, "place_order", map[string]any{"payment_method": "card"})
	if id, _ := order["order_id"].(string); !strings.HasPrefix(id, "ORD-") {
		t.Errorf("place_order: %v", order)
	}
	p.ok(t, "stage_transition", map[string]any{"stage": "complete"})
	p.waitChanged(t)
	want("cancel_order", "order_status", "state_input") // complete has no way out
	if s := p.session(t); s["current_stage"] != "complete" || s["state"].(map[string]any)["order.id"] != order["order_id"] {
		t.Errorf("the session resource: %v", s)
	}
}

func TestWorkflowStoreFlow(t *testing.T) {
	e := newEngine(t)
	url := serveWorkflows(t, e, nil)
	p := connectHTTP(t, url+"/mcp/workflows/store", "")
	storeFlow(t, p)
	// The MCP session is a UAIP session: UAIP sees where it stands.
	id := p.session(t)["session_id"].(string)
	s, err := e.Session(context.Background(), id)
	if err != nil || s.Stage != "complete" {
		t.Fatalf("the UAIP session: %v, %v", s, err)
	}
}

// The annotations come from the task's risk tier: readOnlyHint exactly
// for read_only, destructiveHint false for write_low_risk and true for
// write_high_risk; the input schema is the task's parameters.
func TestWorkflowToolAnnotations(t *testing.T) {
	no, yes := false, true
	wf := &workflow.Workflow{Name: "tiers", InitialStage: "s", Stages: map[string]*workflow.Stage{"s": {Tasks: map[string]*workflow.Task{
		"read":  {Description: "r", Risk: workflow.RiskReadOnly, Run: nop},
		"low":   {Description: "l", Risk: workflow.RiskWriteLow, Run: nop, Idempotent: true},
		"high":  {Description: "h", Risk: workflow.RiskWriteHigh, Run: nop},
		"undec": {Description: "u", Run: nop, Returns: workflow.Schema{"type": "object"}},
	}}}}
	e := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := e.Register(wf); err != nil {
		t.Fatal(err)
	}
	p := connectHTTP(t, serveWorkflows(t, e, nil)+"/mcp/workflows/tiers", "")
	got := map[string]*mcp.ToolAnnotations{}
	var undec *mcp.Tool
	for _, tool := range p.tools(t) {
		got[tool.Name] = tool.Annotations
		if tool.Name == "undec" {
			undec = tool
		}
	}
	want := map[string]*mcp.ToolAnnotations{
		"read":        {ReadOnlyHint: true},
		"low":         {DestructiveHint: &no, IdempotentHint: true},
		"high":        {DestructiveHint: &yes},
		"undec":       {},
		"state_input": {DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "object"}, undec.OutputSchema); diff != "" {
		t.Errorf("outputSchema (-want +got):\n%s", diff)
	}
}

func nop(context.Context, *workflow.TaskRequest) (*workflow.TaskResponse, error) {
	return &workflow.TaskResponse{Result: map[string]any{}}, nil
}

// Twenty MCP sessions at once, each its own UAIP session: their stages
// and carts do not mix.
func TestWorkflowConcurrentSessions(t *testing.T) {
	e := newEngine(t)
	url := serveWorkflows(t, e, nil) + "/mcp/workflows/store"
	const n = 20
	peers := make([]*peer, n)
	for i := range peers {
		peers[i] = connectHTTP(t, url, "")
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, p := range peers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), safety)
			defer cancel()
			call := func(name string, args any) (map[string]any, error) {
				res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					return nil, err
				}
				if res.IsError {
					return nil, errors.New(text(res))
				}
				m, _ := res.StructuredContent.(map[string]any)
				return m, nil
			}
			if i%2 == 1 { // the odd ones stay in browse
				_, err := call("search_products", map[string]any{"query": "tea"})
				errs <- err
				return
			}
			if _, err := call("stage_transition", map[string]any{"stage": "cart"}); err != nil {
				errs <- err
				return
			}
			if _, err := call("add_to_cart", map[string]any{"product_id": "SKU-005", "quantity": i + 1}); err != nil {
				errs <- err
				return
			}
			cart, err := call("view_cart", nil)
			if err == nil {
				items, _ := cart["items"].([]any)
				if len(items) != 1 || items[0].(map[string]any)["quantity"] != float64(i+1) {
					err = fmt.Errorf("session %d: cart %v", i, cart)
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i, p := range peers {
		names := p.toolNames(t)
		want := "search_products"
		if i%2 == 0 {
			want = "add_to_cart"
		}
		if !slices.Contains(names, want) {
			t.Errorf("session %d lists %v, want %s among them", i, names, want)
		}
	}
}

// Ending the MCP session (DELETE) ends its UAIP session.
func TestWorkflowDeleteEndsUAIPSession(t *testing.T) {
	e := newEngine(t)
	url := serveWorkflows(t, e, nil)
	p, err := tryConnect(url+"/mcp/workflows/store", "")
	if err != nil {
		t.Fatal(err)
	}
	id := p.session(t)["session_id"].(string)
	if _, err := e.Session(context.Background(), id); err != nil {
		t.Fatalf("the UAIP session before: %v", err)
	}
	if err := p.cs.Close(); err != nil { // sends DELETE
		t.Fatal(err)
	}
	if _, err := e.Session(context.Background(), id); !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Fatalf("the UAIP session after DELETE: %v, want not found", err)
	}
}

// A session closed for idleness ends its UAIP session too.
func TestWorkflowIdleSessionEnds(t *testing.T) {
	e := newEngine(t)
	url := serveWorkflows(t, e, &mcpserve.Options{SessionTimeout: 200 * time.Millisecond})
	p := connectHTTP(t, url+"/mcp/workflows/store", "")
	id := p.session(t)["session_id"].(string)
	deadline := time.Now().Add(safety)
	for {
		_, err := e.Session(context.Background(), id)
		if errors.Is(err, workflow.ErrSessionNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the UAIP session of an idle MCP session still exists: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A change made over UAIP (or by another replica) shows in the tools
// the MCP session lists next.
func TestWorkflowFollowsUAIPChanges(t *testing.T) {
	e := newEngine(t)
	p := connectHTTP(t, serveWorkflows(t, e, nil)+"/mcp/workflows/store", "")
	id := p.session(t)["session_id"].(string)
	if _, err := e.Execute(context.Background(), id, &workflow.ExecuteRequest{WorkflowName: "store", Action: workflow.ActionStageTransition, Stage: "cart"}); err != nil {
		t.Fatal(err)
	}
	if names := p.toolNames(t); !slices.Contains(names, "add_to_cart") {
		t.Errorf("tools after a UAIP transition: %v", names)
	}
	p.waitChanged(t)
}

func TestWorkflowResourceUpdated(t *testing.T) {
	p := connectHTTP(t, serveWorkflows(t, newEngine(t), nil)+"/mcp/workflows/store", "")
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	uri := mcpserve.SessionURI("store")
	if err := p.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	p.ok(t, "state_input", map[string]any{"state_updates": map[string]any{"note": "x"}})
	select {
	case got := <-p.updated:
		if got != uri {
			t.Errorf("resources/updated for %q, want %q", got, uri)
		}
	case <-time.After(safety):
		t.Fatal("no notifications/resources/updated")
	}
	if s := p.session(t); s["state"].(map[string]any)["note"] != "x" {
		t.Errorf("the resource: %v", s)
	}
}

func TestWorkflowBadArguments(t *testing.T) {
	p := connectHTTP(t, serveWorkflows(t, newEngine(t), nil)+"/mcp/workflows/store", "")
	for _, tc := range []struct {
		tool string
		args any
		want string
	}{
		{"stage_transition", map[string]any{}, `stage_transition needs "stage"`},
		{"stage_transition", map[string]any{"stage": 3}, `stage_transition needs "stage"`},
		{"state_input", map[string]any{"state_updates": "x"}, `state_input needs "state_updates"`},
		{"search_products", map[string]any{"query": 1}, "Invalid arguments for task 'search_products': /query"},
		{"no_such_task", nil, "Task 'no_such_task' not available in stage 'browse'; allowed: get_product, search_products"},
	} {
		if msg := p.refused(t, tc.tool, tc.args); !strings.Contains(msg, tc.want) {
			t.Errorf("%s %v: %q, want it to contain %q", tc.tool, tc.args, msg, tc.want)
		}
	}
}

// With a token, every request needs it: 401 with a WWW-Authenticate
// challenge otherwise.
func TestWorkflowToken(t *testing.T) {
	url := serveWorkflows(t, newEngine(t), &mcpserve.Options{Token: "s3cret"}) + "/mcp/workflows/store"
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("without the token: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if _, err := tryConnect(url, "wrong"); err == nil {
		t.Error("a client with a wrong token connected")
	}
	p := connectHTTP(t, url, "s3cret")
	if names := p.toolNames(t); len(names) == 0 {
		t.Error("no tools with the token")
	}
}

// A browser origin not allowed is refused (MCP 2025-11-25, Streamable
// HTTP, "Security Warning": servers MUST validate Origin).
func TestWorkflowOrigin(t *testing.T) {
	url := serveWorkflows(t, newEngine(t), &mcpserve.Options{Origins: []string{"https://ok.example"}}) + "/mcp/workflows/store"
	for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "https://ok.example": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initialize("2025-11-25")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Origin %s: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}

func initialize(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
}

func TestWorkflowSessionLimit(t *testing.T) {
	url := serveWorkflows(t, newEngine(t), &mcpserve.Options{MaxSessions: 2}) + "/mcp/workflows/store"
	connectHTTP(t, url, "")
	connectHTTP(t, url, "")
	if _, err := tryConnect(url, ""); err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("a third session: %v, want 503", err)
	}
}

func TestWorkflowUnknown(t *testing.T) {
	url := serveWorkflows(t, newEngine(t), nil) + "/mcp/workflows/nope"
	if _, err := tryConnect(url, ""); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Errorf("an unknown workflow: %v, want 404", err)
	}
}

// The stateless revision 2026-07-28 is refused (docs/spec-notes/mcp.md):
// server/discover is answered with UnsupportedProtocolVersion listing the
// revisions served, and the go-sdk client falls back to 2025-11-25.
func TestWorkflowRefusesStatelessRevision(t *testing.T) {
	url := serveWorkflows(t, newEngine(t), nil) + "/mcp/workflows/store"
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
	}
	if msg.Error.Code != mcp.CodeUnsupportedProtocolVersion || !slices.Contains(msg.Error.Data.Supported, "2025-11-25") || slices.Contains(msg.Error.Data.Supported, "2026-07-28") {
		t.Errorf("server/discover at 2026-07-28: %s", body)
	}
	p := connectHTTP(t, url, "")
	if v := p.cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %q, want 2025-11-25", v)
	}
}

// pipeTransports returns the two ends of a stdio connection.
func pipeTransports() (client, server *mcp.IOTransport) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	return &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.IOTransport{Reader: sr, Writer: sw}
}

// The same flow over stdio: one MCP session, one UAIP session, ended
// when the host closes the session.
func TestWorkflowStdioStoreFlow(t *testing.T) {
	e := newEngine(t)
	ct, st := pipeTransports()
	served := make(chan error, 1)
	go func() {
		served <- mcpserve.ServeStdio(context.Background(), st, &mcpserve.Stdio{Engine: e, Workflow: "store"}, &mcpserve.Options{Logger: quiet()})
	}()
	p, err := connect(ct)
	if err != nil {
		t.Fatal(err)
	}
	storeFlow(t, p)
	id := p.session(t)["session_id"].(string)
	p.cs.Close()
	select {
	case <-served:
	case <-time.After(safety):
		t.Fatal("ServeStdio did not return when the host closed the session")
	}
	if _, err := e.Session(context.Background(), id); !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Errorf("the UAIP session after the stdio session ended: %v, want not found", err)
	}
}
