package agentfile_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/uampagent"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hooks is a webhook receiver that records the calls it gets.
type hooks struct {
	mu    sync.Mutex
	calls []string // "PATH task args"
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Task string         `json:"task"`
		Args map[string]any `json:"args"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &req); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	args, _ := json.Marshal(req.Args)
	h.mu.Lock()
	h.calls = append(h.calls, r.URL.Path+" "+req.Task+" "+string(args))
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/lookup":
		io.WriteString(w, `{"result": {"order": "o-1", "status": "shipped"}}`)
	case "/missing":
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"detail": "no such order"}`)
	default:
		io.WriteString(w, `{"result": "ok"}`)
	}
}

func (h *hooks) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

var quiet = slog.New(slog.DiscardHandler)

// agentDir writes agent files and their scripts into a directory.
func agentDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, c := range files {
		write(t, dir, n, c)
	}
	return dir
}

func startServer(t *testing.T, dir string, opts *agentfile.Options, pub ed25519.PublicKey) *server.Server {
	t.Helper()
	return startServerWith(t, dir, opts, pub, nil)
}

// startServerWith is startServer with setup changing the configuration
// before the agents are built.
func startServerWith(t *testing.T, dir string, opts *agentfile.Options, pub ed25519.PublicKey, setup func(*server.Config)) *server.Server {
	t.Helper()
	defs, err := agentfile.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), "memory:")
	if err != nil {
		t.Fatal(err)
	}
	keys := govern.NewKeyring()
	if pub != nil {
		if _, err := keys.Add("alice", pub); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &server.Config{Store: st, Logger: quiet, Governance: &govern.Options{Keyring: keys}}
	if setup != nil {
		setup(cfg)
	}
	if err := agentfile.Build(cfg, defs, opts); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()); st.Close() })
	return srv
}

func waitRun(t *testing.T, srv *server.Server, agentName, input string) *runs.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net far beyond the work
	defer cancel()
	run, err := srv.Runs().Start(ctx, &runs.StartParams{Agent: agentName, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	if run, err = srv.Runs().Wait(ctx, run.RequestID); err != nil {
		t.Fatal(err)
	}
	return run
}

// A defined agent runs under governance: a read_only webhook runs and
// its result reaches the model; a webhook's refusal is a tool error the
// model sees; the run delivers.
func TestBuild_WebhookToolsRunGoverned(t *testing.T) {
	h := &hooks{}
	hs := httptest.NewServer(h)
	defer hs.Close()
	t.Setenv("HOOK_BASE", hs.URL)
	dir := agentDir(t, map[string]string{
		"orders.yaml": `description: Looks orders up
model: scripted:scripts/orders.yaml
tools:
  - webhook: {name: lookup_order, url: "${HOOK_BASE}/lookup", risk: read_only,
              input_schema: {type: object, properties: {order_id: {type: string}}}}
  - webhook: {name: lookup_missing, url: "${HOOK_BASE}/missing", risk: read_only}
`,
		"scripts/orders.yaml": `steps:
  - tool_calls:
      - {id: c1, name: lookup_order, arguments: {order_id: o-1}}
      - {id: c2, name: lookup_missing, arguments: {order_id: o-9}}
  - text: "o-1 is shipped; o-9 does not exist"
`})
	srv := startServer(t, dir, nil, nil)
	run := waitRun(t, srv, "orders", "where are o-1 and o-9?")
	if run.Status != runs.Delivered || run.Output != "o-1 is shipped; o-9 does not exist" {
		t.Fatalf("run %+v", run)
	}
	got := h.got()
	if len(got) != 2 || !contains(got, `/lookup lookup_order {"order_id":"o-1"}`) || !contains(got, `/missing lookup_missing {"order_id":"o-9"}`) {
		t.Errorf("webhook calls %q", got)
	}
}

// An agent's govern.policy (a rule policy file, relative to the agent
// file) decides its writes on top of the server's policy, the stricter
// decision standing: the agent's deny refuses a call the server allows;
// the server's deny stands over the agent's allow; another agent is not
// affected.
func TestBuild_AgentPolicy(t *testing.T) {
	h := &hooks{}
	hs := httptest.NewServer(h)
	defer hs.Close()
	script := `steps:
  - tool_calls: [{id: c1, name: note, arguments: {text: hi}}, {id: c2, name: erase, arguments: {}}]
  - text: "done"
`
	agent := func(policy string) string {
		return `model: scripted:scripts/` + policy + `.yaml
tools:
  - webhook: {name: note, url: "` + hs.URL + `/note"}
  - webhook: {name: erase, url: "` + hs.URL + `/erase"}
` + map[bool]string{true: "govern: {policy: policies/strict.yaml}\n"}[policy == "strict"]
	}
	dir := agentDir(t, map[string]string{
		"strict.yaml":          agent("strict"),
		"lax.yaml":             agent("lax"),
		"scripts/strict.yaml":  script,
		"scripts/lax.yaml":     script,
		"policies/strict.yaml": "rules:\n  - {name: no-notes, tools: [note], effect: deny, reason: this agent only reads}\n",
	})
	serverPolicy := &govern.RulePolicy{Rules: []govern.Rule{{Name: "no-erasing", Tools: []string{"erase"}, Effect: govern.Deny}}}
	srv := startServerWith(t, dir, nil, nil, func(cfg *server.Config) { cfg.Governance.Policy = serverPolicy })
	for _, tc := range []struct {
		agent string
		want  []string // the webhooks called
	}{
		{"strict", nil},
		{"lax", []string{`/note note {"text":"hi"}`}},
	} {
		before := len(h.got())
		run := waitRun(t, srv, tc.agent, "note and erase")
		if run.Status != runs.Delivered {
			t.Fatalf("%s: run %+v", tc.agent, run)
		}
		if got := h.got()[before:]; strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: webhook calls %q, want %q", tc.agent, got, tc.want)
		}
		blocked := map[string]string{}
		for ev, err := range srv.Runs().Events(context.Background(), run.RequestID, 0) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == runs.EventToolBlocked {
				blocked[ev.Tool] = string(ev.Reasons[0])
			}
			if ev.Type == runs.EventEnded {
				break
			}
		}
		if blocked["erase"] != "POLICY_BLOCKED" || (tc.agent == "strict") != (blocked["note"] == "POLICY_BLOCKED") {
			t.Errorf("%s: blocked %v", tc.agent, blocked)
		}
	}
	// A policy file that does not load is a file:line error.
	bad := agentDir(t, map[string]string{"a.yaml": "model: scripted:demo\ngovern:\n  policy: nowhere.yaml\n"})
	defs, err := agentfile.LoadDir(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := agentfile.Build(&server.Config{}, defs, nil); err == nil || !strings.Contains(err.Error(), "a.yaml:3: /govern/policy: ") || !strings.Contains(err.Error(), "nowhere.yaml") {
		t.Errorf("a missing policy file: %v", err)
	}
	policy := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(policy, []byte("default: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	invalid := agentDir(t, map[string]string{"a.yaml": "model: scripted:demo\ngovern:\n  policy: " + policy + "\n"})
	if defs, err = agentfile.LoadDir(invalid); err != nil {
		t.Fatal(err)
	}
	if err := agentfile.Build(&server.Config{}, defs, nil); err == nil || !strings.Contains(err.Error(), "a.yaml:3: /govern/policy: ") || !strings.Contains(err.Error(), "p.yaml: govern: policy") {
		t.Errorf("an invalid policy file: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A write_high_risk webhook waits for an approval: the run pauses and
// the webhook is not called; once approved the run resumes, the call
// runs once, and the run delivers. The tool's rollback is the declared
// compensating call, given the original arguments.
func TestBuild_HighRiskWebhookPausesForApproval(t *testing.T) {
	h := &hooks{}
	hs := httptest.NewServer(h)
	defer hs.Close()
	dir := agentDir(t, map[string]string{
		"refunds.yaml": `model: scripted:scripts/refunds.yaml
tools:
  - webhook:
      name: refund_order
      url: "` + hs.URL + `/refund"
      risk: write_high_risk
      rollback: {url: "` + hs.URL + `/reverse"}
`,
		"scripts/refunds.yaml": `steps:
  - tool_calls: [{id: c1, name: refund_order, arguments: {order_id: o-1}}]
  - text: "refunded o-1"
`})
	pub, priv, _ := ed25519.GenerateKey(nil)
	srv := startServer(t, dir, nil, pub)
	run := waitRun(t, srv, "refunds", "refund o-1")
	if run.Status != runs.Paused || len(run.PendingApprovals) != 1 {
		t.Fatalf("run %+v, want paused for one approval", run)
	}
	if got := h.got(); len(got) != 0 {
		t.Fatalf("the high-risk webhook ran before its approval: %q", got)
	}
	ctx := context.Background()
	req, err := srv.Governor().Approval(ctx, run.PendingApprovals[0])
	if err != nil {
		t.Fatal(err)
	}
	if req.Tool != "refund_order" || req.Tier != govern.WriteHighRisk || req.Rollback == nil || req.Rollback.Type != "agentfile.webhook" {
		t.Errorf("approval request %+v", req)
	}
	now := time.Now()
	tok, err := govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "jti-1",
		IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Governor().Decide(ctx, req.ID, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		got, err := srv.Runs().Wait(wctx, run.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Settled() {
			if got.Status != runs.Delivered || got.Output != "refunded o-1" {
				t.Fatalf("after the approval: %+v", got)
			}
			break
		}
	}
	if got := h.got(); len(got) != 1 || got[0] != `/refund refund_order {"order_id":"o-1"}` {
		t.Errorf("webhook calls %q, want the refund once", got)
	}
}

// The rollback handler Build registers calls the compensating webhook
// with the original arguments.
func TestBuild_RollbackCallsTheCompensatingWebhook(t *testing.T) {
	h := &hooks{}
	hs := httptest.NewServer(h)
	defer hs.Close()
	d, err := agentfile.Load(strings.NewReader(`model: scripted:demo
tools:
  - webhook: {name: pay, url: "`+hs.URL+`/pay", risk: write_high_risk, rollback: {url: "`+hs.URL+`/unpay"}}
`), "payer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{}
	if err := agentfile.Build(cfg, []*agentfile.Definition{d}, nil); err != nil {
		t.Fatal(err)
	}
	tool := cfg.Agents[0].Options.Tools[0]
	decl, ok := govern.DeclarationOf(tool)
	if !ok || decl.Tier != govern.WriteHighRisk || decl.Rollback == nil {
		t.Fatalf("declaration %+v, %v", decl, ok)
	}
	action, err := decl.Rollback(context.Background(), govern.Call{ID: "c1", Args: map[string]any{"amount": 5.0}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Governance.Rollbacks[action.Type](context.Background(), *action); err != nil {
		t.Fatal(err)
	}
	if got := h.got(); len(got) != 1 || got[0] != `/unpay pay {"amount":5}` {
		t.Errorf("webhook calls %q", got)
	}
}

// Building again with the same Options (a reload) shares the rollback
// handlers: the handler the first build gave the governor undoes a tool
// only the second build defines, and still the first build's.
func TestBuild_RebuildSharesRollbacks(t *testing.T) {
	h := &hooks{}
	hs := httptest.NewServer(h)
	defer hs.Close()
	load := func(name, tool string) *agentfile.Definition {
		d, err := agentfile.Load(strings.NewReader(`model: scripted:demo
tools:
  - webhook: {name: `+tool+`, url: "`+hs.URL+`/`+tool+`", risk: write_high_risk, rollback: {url: "`+hs.URL+`/un`+tool+`"}}
`), name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	opts := &agentfile.Options{}
	first := &server.Config{}
	if err := agentfile.Build(first, []*agentfile.Definition{load("payer", "pay")}, opts); err != nil {
		t.Fatal(err)
	}
	second := &server.Config{}
	if err := agentfile.Build(second, []*agentfile.Definition{load("shipper", "ship")}, opts); err != nil {
		t.Fatal(err)
	}
	handler := first.Governance.Rollbacks["agentfile.webhook"] // the governor's, from the first build
	for _, cfg := range []*server.Config{second, first} {
		decl, _ := govern.DeclarationOf(cfg.Agents[0].Options.Tools[0])
		action, err := decl.Rollback(context.Background(), govern.Call{ID: "c1", Args: map[string]any{"n": 1.0}})
		if err != nil {
			t.Fatal(err)
		}
		if err := handler(context.Background(), *action); err != nil {
			t.Fatalf("rollback of %s: %v", action.Target, err)
		}
	}
	if got := h.got(); len(got) != 2 || got[0] != `/unship ship {"n":1}` || got[1] != `/unpay pay {"n":1}` {
		t.Errorf("webhook calls %q", got)
	}
}

// TestBuild_Errors: what only Build can know — the environment, the
// builtins it is given — is a file:line error; nothing is added.
func TestBuild_Errors(t *testing.T) {
	builtins := map[string]llm.Tool{
		"calculate": govern.Declare(llm.Tool{Name: "calculate", Parameters: llm.Schema{"type": "object"}}, govern.Declaration{Tier: govern.ReadOnly}),
		"wipe":      govern.Declare(llm.Tool{Name: "wipe", Parameters: llm.Schema{"type": "object"}}, govern.Declaration{Tier: govern.WriteLowRisk}),
	}
	for _, c := range []struct{ name, file, want string }{
		{"unset variable", "model: scripted:demo\ntools:\n  - webhook: {name: a, url: 'http://${NO_SUCH_VAR_X}/a'}\n", `a.yaml:3: /tools/0/webhook/url: environment variable NO_SUCH_VAR_X is not set`},
		{"unset key variable", "model: scripted:demo\napi_key_env: NO_SUCH_KEY_X\n", `a.yaml:1: /model: api_key_env: environment variable NO_SUCH_KEY_X is not set`},
		{"not a URL", "model: scripted:demo\ntools:\n  - webhook: {name: a, url: 'ftp://x/a'}\n", `a.yaml:3: /tools/0/webhook/url: must be an absolute http or https URL`},
		{"unknown builtin", "model: scripted:demo\ntools:\n  - builtin: shell\n", `a.yaml:3: /tools/0/builtin: no builtin tool is named "shell" (have calculate, wipe)`},
		{"lowering a builtin", "model: scripted:demo\ntools:\n  - builtin: wipe\ngovern:\n  risk: {wipe: read_only}\n", `would lower tool "wipe" from write_low_risk to read_only`},
		{"no scripted file", "model: scripted:nope.yaml\n", `a.yaml:1: /model: scripted: open`},
		{"own workflow without a server", "model: scripted:demo\ntools:\n  - workflow: store\n", `a.yaml:3: /tools/0/workflow: workflow "store" is the server's own, but no server serves workflows here: give its url`},
		{"uamp", "model: scripted:demo\ntools:\n  - uamp: {url: 'https://h', did: 'did:web:h'}\n", `a.yaml:3: /tools/0/uamp: a uamp tool needs a UAMP identity to ask with`},
		{"mcp url", "model: scripted:demo\ntools:\n  - mcp: {url: 'ftp://x'}\n", `a.yaml:3: /tools/0/mcp/url: must be an absolute http or https URL`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := agentfile.Load(strings.NewReader(c.file), "a.yaml")
			if err != nil {
				t.Fatal(err)
			}
			cfg := &server.Config{}
			err = agentfile.Build(cfg, []*agentfile.Definition{d}, &agentfile.Options{Builtins: builtins})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
			if len(cfg.Agents) != 0 || cfg.Governance != nil {
				t.Errorf("a failed Build changed cfg: %+v", cfg)
			}
		})
	}
}

// A builtin keeps its declared tier; govern.risk may raise it.
func TestBuild_BuiltinTiers(t *testing.T) {
	builtins := map[string]llm.Tool{"calculate": govern.Declare(llm.Tool{Name: "calculate", Parameters: llm.Schema{"type": "object"}}, govern.Declaration{Tier: govern.ReadOnly})}
	for _, c := range []struct {
		file string
		want govern.Tier
	}{
		{"model: scripted:demo\ntools: [{builtin: calculate}]\n", govern.ReadOnly},
		{"model: scripted:demo\ntools: [{builtin: calculate}]\ngovern: {risk: {'calc*': write_low_risk}}\n", govern.WriteLowRisk},
	} {
		d, err := agentfile.Load(strings.NewReader(c.file), "a.yaml")
		if err != nil {
			t.Fatal(err)
		}
		cfg := &server.Config{}
		if err := agentfile.Build(cfg, []*agentfile.Definition{d}, &agentfile.Options{Builtins: builtins}); err != nil {
			t.Fatal(err)
		}
		if decl, _ := govern.DeclarationOf(cfg.Agents[0].Options.Tools[0]); decl.Tier != c.want {
			t.Errorf("%q: tier %s, want %s", c.file, decl.Tier, c.want)
		}
	}
}

// A sub-agent tool runs another agent of the directory as a governed
// child run: its own tools are governed by its own file, its answer is
// the tool's result.
func TestBuild_SubagentTool(t *testing.T) {
	h := &hooks{}
	hs := httptest.NewServer(h)
	defer hs.Close()
	dir := agentDir(t, map[string]string{
		"boss.yaml": `description: Delegates
model: scripted:scripts/boss.yaml
tools:
  - agent: helper
`,
		"helper.yaml": `description: Looks orders up
model: scripted:scripts/helper.yaml
tools:
  - webhook: {name: lookup_order, url: "` + hs.URL + `/lookup", risk: read_only}
`,
		"scripts/boss.yaml": `steps:
  - tool_calls: [{id: b1, name: helper, arguments: {input: "status of o-1"}}]
  - text: "the helper says: shipped"
`,
		"scripts/helper.yaml": `steps:
  - tool_calls: [{id: h1, name: lookup_order, arguments: {order_id: o-1}}]
  - text: "shipped"
`})
	srv := startServer(t, dir, nil, nil)
	run := waitRun(t, srv, "boss", "what about o-1?")
	if run.Status != runs.Delivered || run.Output != "the helper says: shipped" {
		t.Fatalf("run %+v", run)
	}
	if got := h.got(); len(got) != 1 || got[0] != `/lookup lookup_order {"order_id":"o-1"}` {
		t.Errorf("webhook calls %q", got)
	}
}

// A sub-agent's write_high_risk call cannot wait for an approval (it
// runs inside its parent's call): it is refused, as an error the
// sub-agent's model sees; the webhook never runs, no approval is
// pending, and the parent delivers what the sub-agent said.
func TestBuild_SubagentHighRiskCallIsRefused(t *testing.T) {
	h := &hooks{}
	hs := httptest.NewServer(h)
	defer hs.Close()
	dir := agentDir(t, map[string]string{
		"boss.yaml": `model: scripted:scripts/boss.yaml
tools:
  - agent: refunder
`,
		"refunder.yaml": `model: scripted:scripts/refunder.yaml
tools:
  - webhook: {name: refund_order, url: "` + hs.URL + `/refund", risk: write_high_risk, rollback: {url: "` + hs.URL + `/reverse"}}
`,
		"scripts/boss.yaml": `steps:
  - tool_calls: [{id: b1, name: refunder, arguments: {input: "refund o-1"}}]
  - text: "the refunder could not refund"
`,
		"scripts/refunder.yaml": `steps:
  - tool_calls: [{id: r1, name: refund_order, arguments: {order_id: o-1}}]
  - text: "refund refused"
`})
	pub, _, _ := ed25519.GenerateKey(nil)
	srv := startServer(t, dir, nil, pub)
	run := waitRun(t, srv, "boss", "refund o-1 through the refunder")
	if run.Status != runs.Delivered || run.Output != "the refunder could not refund" || len(run.PendingApprovals) != 0 {
		t.Fatalf("run %+v", run)
	}
	if got := h.got(); len(got) != 0 {
		t.Errorf("the sub-agent's high-risk webhook ran: %q", got)
	}
	pending, err := srv.Governor().Approvals(context.Background(), true)
	if err != nil || len(pending) != 0 {
		t.Errorf("pending approvals %v %v", pending, err)
	}
	var refused bool
	for ev, err := range srv.Runs().Events(context.Background(), run.RequestID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == runs.EventToolResult && ev.Tool == "refunder" && ev.Outcome == govern.Success && strings.Contains(string(ev.Result), "refund refused") {
			refused = true
		}
		if ev.Type == runs.EventEnded {
			break
		}
	}
	if !refused {
		t.Error("no tool_result of the refunder saying the refund was refused")
	}
}

// An MCP server's tools (Streamable HTTP) are the agent's, governed with
// the tiers of their annotations; the call reaches the server.
func TestBuild_MCPTools(t *testing.T) {
	var mu sync.Mutex
	var got []string
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			got = append(got, in.Text)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close) // after the agent server's shutdown, which ends the MCP session's stream
	dir := agentDir(t, map[string]string{
		"researcher.yaml": `model: scripted:scripts/r.yaml
tools:
  - mcp: {url: "` + hs.URL + `", prefix: ev_}
`,
		"scripts/r.yaml": `steps:
  - tool_calls: [{id: c1, name: ev_echo, arguments: {text: hello}}]
  - text: "it said hello"
`})
	srv := startServer(t, dir, nil, nil)
	run := waitRun(t, srv, "researcher", "ask the server")
	if run.Status != runs.Delivered || run.Output != "it said hello" {
		t.Fatalf("run %+v", run)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "hello" {
		t.Errorf("the MCP server got %q", got)
	}
}

// A workflow tool walks a workflow the same server serves: the run gets
// a UAIP session of its own, and the stage's tasks are its tools.
func TestBuild_WorkflowTools(t *testing.T) {
	var handler atomic.Pointer[http.Handler]
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	dir := agentDir(t, map[string]string{
		"shopper.yaml": `model: scripted:scripts/shopper.yaml
tools:
  - workflow: store
`,
		"scripts/shopper.yaml": `steps:
  - tool_calls: [{id: c1, name: search_products, arguments: {category: coffee}}]
  - text: "found coffee"
`})
	srv := startServerWith(t, dir, &agentfile.Options{WorkflowURL: hs.URL}, nil, func(cfg *server.Config) {
		cfg.Workflows = []*workflow.Workflow{builtin.Store()}
	})
	h := srv.Handler()
	handler.Store(&h)
	run := waitRun(t, srv, "shopper", "find me coffee")
	if run.Status != runs.Delivered || run.Output != "found coffee" {
		t.Fatalf("run %+v", run)
	}
	// The task ran in the run's session and returned the coffee.
	if ev := toolResult(t, srv, run.RequestID, "search_products"); ev.Outcome != govern.Success || !strings.Contains(string(ev.Result), "SKU-001") {
		t.Errorf("search_products: %+v (result %s)", ev, ev.Result)
	}
}

// limits.timeout bounds a run's execution: a tool that never answers
// ends in fail_safe once the timeout has passed.
func TestBuild_Timeout(t *testing.T) {
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers on its own
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) })
	dir := agentDir(t, map[string]string{
		"slow.yaml": `model: scripted:scripts/slow.yaml
limits: {timeout: 1s}
tools:
  - webhook: {name: wait, url: "` + hs.URL + `/wait", risk: read_only}
`,
		"scripts/slow.yaml": `steps:
  - tool_calls: [{id: c1, name: wait, arguments: {}}]
  - text: "never"
`})
	srv := startServer(t, dir, nil, nil)
	run := waitRun(t, srv, "slow", "wait")
	if run.Status != runs.FailSafe || run.Output != "" {
		t.Fatalf("run %+v, want fail_safe", run)
	}
}

// A workflow entry gives the governor the workflow tasks' rollback
// handler; one the configuration has is kept.
func TestBuild_WorkflowRollback(t *testing.T) {
	d, err := agentfile.Load(strings.NewReader("model: scripted:demo\ntools:\n  - workflow: {name: store, url: 'http://127.0.0.1:9'}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &server.Config{}
	if err := agentfile.Build(cfg, []*agentfile.Definition{d}, nil); err != nil {
		t.Fatal(err)
	}
	if cfg.Governance == nil || cfg.Governance.Rollbacks["uaip.task"] == nil {
		t.Fatalf("no rollback handler for the workflow's tasks: %+v", cfg.Governance)
	}
	mine := func(context.Context, govern.RollbackAction) error { return nil }
	cfg = &server.Config{Governance: &govern.Options{Rollbacks: map[string]govern.RollbackFunc{"uaip.task": mine}}}
	if err := agentfile.Build(cfg, []*agentfile.Definition{d}, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%p", cfg.Governance.Rollbacks["uaip.task"]) != fmt.Sprintf("%p", mine) {
		t.Error("Build replaced the configuration's own rollback handler")
	}
}

// A uamp tool asks a remote agent over UAMP (signed envelopes, mutual
// TLS): its answer is the tool's result.
func TestBuild_UAMPTool(t *testing.T) {
	remote, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.New(scripted.Step{Text: "Sheep eat grass."}).Ref()}})
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := messaging.GenerateDevCert(nil)
	if err != nil {
		t.Fatal(err)
	}
	clientKey, err := envelope.GenerateKey(envelope.EdDSA, "did:web:client.example#key-1")
	if err != nil {
		t.Fatal(err)
	}
	trusted, _ := envelope.NewKeySet(clientKey.Public())
	usrv := messaging.NewServer(uampagent.NewHandler(remote, nil), &messaging.Options{
		ID: "did:web:agent.example", Keys: trusted, Authenticate: messaging.ClientKeys(trusted, nil)})
	t.Cleanup(func() { usrv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := messaging.NewHTTPServer(usrv, messaging.RequestClientCertificates(messaging.TLSConfig(serverCert.TLS, nil)))
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })
	clientCert, err := messaging.KeyCertificate(clientKey, "did:web:client.example", 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := agentDir(t, map[string]string{
		"asker.yaml": `model: scripted:scripts/asker.yaml
tools:
  - uamp: {url: "https://` + ln.Addr().String() + `", did: "did:web:agent.example", name: shepherd, description: Knows sheep, ca: certs/shepherd.pem}
`,
		"certs/shepherd.pem": string(serverCert.CertPEM),
		"scripts/asker.yaml": `steps:
  - tool_calls: [{id: c1, name: shepherd, arguments: {input: "What do sheep eat?"}}]
  - text: "they eat grass"
`})
	// The remote server's self-signed certificate is trusted through the
	// entry's ca file, not the client's roots.
	opts := &agentfile.Options{UAMP: &messaging.ClientOptions{Key: clientKey,
		TLS: &tls.Config{Certificates: []tls.Certificate{clientCert}}}}
	srv := startServer(t, dir, opts, nil)
	run := waitRun(t, srv, "asker", "ask the shepherd")
	if run.Status != runs.Delivered || run.Output != "they eat grass" {
		t.Fatalf("run %+v", run)
	}
	if ev := toolResult(t, srv, run.RequestID, "shepherd"); ev.Outcome != govern.Success || !strings.Contains(string(ev.Result), "Sheep eat grass.") {
		t.Errorf("shepherd: outcome %s, result %s", ev.Outcome, ev.Result)
	}
	// A ca that holds no certificate is a build error with file and line.
	bad := agentDir(t, map[string]string{"a.yaml": "model: scripted:demo\ntools:\n  - uamp: {url: \"https://h\", did: \"did:web:h\", ca: a.yaml}\n"})
	defs, err := agentfile.LoadDir(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := agentfile.Build(&server.Config{}, defs, opts); err == nil || !strings.Contains(err.Error(), "a.yaml:3: /tools/0/uamp/ca: ") || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a ca without certificates: %v", err)
	}
}

// toolResult returns the tool_result event of the run's call of tool,
// failing the test when the run ended without one.
func toolResult(t *testing.T, srv *server.Server, requestID, tool string) *runs.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net far beyond the work
	defer cancel()
	for ev, err := range srv.Runs().Events(ctx, requestID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Type == runs.EventToolResult && ev.Tool == tool:
			return ev
		case ev.Type == runs.EventEnded:
			t.Fatalf("no tool_result event for %s", tool)
		}
	}
	t.Fatalf("the events of %s ended without a tool_result for %s", requestID, tool)
	return nil
}

// A sub-agent's run streams into its parent's run events, named as
// UAP-1.1 §8 names them: subagent_start with the input, subagent_event
// with its tool calls and text, subagent_end with its answer. (The boss
// first calls a gate that opens once the test follows the run: the
// sub-agent's events are transient, sent to those following.)
func TestBuild_SubagentEventsInTheRunEvents(t *testing.T) {
	dir := agentDir(t, map[string]string{
		"boss.yaml":       "model: scripted:scripts/boss.yaml\ntools:\n  - builtin: gate\n  - agent: calculator\n",
		"calculator.yaml": "model: scripted:demo\ntools:\n  - builtin: calculate\n",
		"scripts/boss.yaml": `steps:
  - tool_calls: [{id: b1, name: gate, arguments: {}}]
  - tool_calls: [{id: b2, name: calculator, arguments: {input: "What is 6*7?"}}]
  - text: "42"
`})
	open := make(chan struct{})
	readOnly := govern.Declaration{Tier: govern.ReadOnly}
	opts := &agentfile.Options{Builtins: map[string]llm.Tool{
		"gate": govern.Declare(llm.Tool{Name: "gate", Description: "Waits.", Parameters: llm.Schema{"type": "object"},
			Run: func(ctx context.Context, _ map[string]any) (any, error) {
				select {
				case <-open:
					return "open", nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}}, readOnly),
		"calculate": govern.Declare(llm.Tool{Name: "calculate", Description: "Calculates.",
			Parameters: llm.Schema{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}, "required": []any{"expression"}},
			Run:        func(context.Context, map[string]any) (any, error) { return "42", nil }}, readOnly)}}
	srv := startServer(t, dir, opts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net far beyond the work
	defer cancel()
	run, err := srv.Runs().Start(ctx, &runs.StartParams{Agent: "boss", Input: "What is 6*7?"})
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull2(srv.Runs().Events(ctx, run.RequestID, 0))
	defer stop()
	var got []string
	for opened := false; ; {
		ev, err, ok := next()
		if !ok || err != nil {
			t.Fatalf("events: %v %v", err, ok)
		}
		if !opened { // following the run now
			close(open)
			opened = true
		}
		switch ev.Type {
		case runs.EventSubagentStart:
			got = append(got, "start "+ev.Agent+" "+ev.Text)
		case runs.EventSubagentEvent:
			for _, c := range ev.ToolCalls {
				got = append(got, "call "+ev.Agent+" "+c.Tool)
			}
		case runs.EventSubagentEnd:
			got = append(got, "end "+ev.Agent+" "+string(ev.Outcome)+" "+ev.Output)
		}
		if ev.Type == runs.EventEnded {
			break
		}
	}
	want := []string{"start calculator What is 6*7?", "call calculator calculate", "end calculator success 6*7 = 42."}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sub-agent events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
