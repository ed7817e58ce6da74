package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/workflow"
)

var quiet = slog.New(slog.DiscardHandler)

// supportConfig is the configuration agentry serve builds for its
// built-in support agent, over st, trusting pub as approver "alice".
func supportConfig(t *testing.T, st *store.Store, pub ed25519.PublicKey) *server.Config {
	t.Helper()
	keys := govern.NewKeyring()
	if _, err := keys.Add("alice", pub); err != nil {
		t.Fatal(err)
	}
	ledger := builtin.NewLedger()
	return &server.Config{
		Store: st, Workflows: []*workflow.Workflow{builtin.Store()}, Logger: quiet,
		Governance: &govern.Options{Keyring: keys, Classes: []govern.TaskClass{builtin.SupportClass()},
			Rollbacks: map[string]govern.RollbackFunc{builtin.RefundReversal: ledger.RollbackHandler()}},
		Agents: []server.Agent{{Name: builtin.SupportAgentName,
			Options: agent.Options{LLMOptions: llm.LLMOptions{Model: builtin.SupportModel().Ref(), Tools: builtin.SupportTools(ledger)}},
			Govern:  govern.AgentOptions{TaskClass: builtin.SupportTaskClass, Identity: govern.Identity{OwnerID: "org:test", ControlClass: govern.HumanSupervised}}}},
	}
}

func newServer(t *testing.T, cfg *server.Config) *server.Server {
	t.Helper()
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv
}

func do(t *testing.T, h http.Handler, method, path, token, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// guardedRoutes are routes of every kind that the token guards.
var guardedRoutes = []struct{ method, path, body string }{
	{"GET", "/console/", ""},
	{"GET", "/console/app.js", ""},
	{"GET", "/console/style.css", ""},
	{"GET", "/console/config.json", ""},
	{"GET", "/console/api/workflows/store/sessions", ""},
	{"POST", "/initialize", `{"workflow_name":"store"}`},
	{"POST", "/execute", `{}`},
	{"GET", "/api/workflows", ""},
	{"GET", "/api/sessions/x", ""},
	{"POST", "/v1/runs", `{"agent":"support","input":"status of o-1002?"}`},
	{"GET", "/v1/runs", ""},
	{"GET", "/v1/runs/x", ""},
	{"GET", "/v1/runs/x/events", ""},
	{"GET", "/v1/runs/x/audit", ""},
	{"POST", "/v1/runs/x/cancel", ""},
	{"GET", "/v1/agents", ""},
	{"GET", "/v1/agents/support", ""},
	{"GET", "/v1/approvals", ""},
	{"GET", "/v1/approvals/x", ""},
	{"POST", "/v1/approvals/x", `{"decision":"deny","approver":"mallory"}`},
	{"POST", "/uiap/sessions", `{}`},
	{"GET", "/uiap/ws", ""},
	{"GET", "/metrics", ""},
	{"POST", "/mcp/workflows/store", `{}`},
	{"POST", "/mcp/agents", `{}`},
}

// Every endpoint of the plain handler needs the token but /healthz.
func TestServer_TokenGuardsEveryEndpoint(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	cfg := supportConfig(t, nil, pub)
	cfg.Token = "s3cret"
	cfg.WebDemo, cfg.Console = true, true
	h := newServer(t, cfg).Handler()
	for _, tc := range guardedRoutes {
		if code, _ := do(t, h, tc.method, tc.path, "", tc.body); code != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d, want 401", tc.method, tc.path, code)
		}
	}
	if code, _ := do(t, h, "GET", "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := do(t, h, "GET", "/web/demo/", "", ""); code != http.StatusNotFound {
		t.Errorf("the web demo with a token: %d, want 404", code)
	}
	if code, body := do(t, h, "GET", "/v1/agents", "s3cret", ""); code != http.StatusOK || !strings.Contains(body, `"support"`) {
		t.Errorf("/v1/agents with the token: %d %s", code, body)
	}
	if code, body := do(t, h, "GET", "/v1/agents/support", "s3cret", ""); code != http.StatusOK || !strings.Contains(body, `"name":"support"`) {
		t.Errorf("/v1/agents/support with the token: %d %s", code, body)
	}
	if code, body := do(t, h, "GET", "/v1/agents/nobody", "s3cret", ""); code != http.StatusNotFound || !strings.Contains(body, `"UNKNOWN_AGENT"`) {
		t.Errorf("/v1/agents/nobody with the token: %d %s", code, body)
	}
}

// Serve serves until Shutdown, which stops it gracefully (nil); a
// second Shutdown returns the first's result, a second Serve an error,
// and no run starts after it.
func TestServer_ServeUntilShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(nil)
	cfg := supportConfig(t, nil, pub)
	cfg.Listener = ln
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/runs", "application/json",
		strings.NewReader(`{"agent":"support","input":"status of o-1002?","wait":true}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"delivered"`) {
		t.Fatalf("a run over the listener: %d %s", resp.StatusCode, b)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second): // a safety net far beyond the work
		t.Fatal("Serve did not return after Shutdown")
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if err := srv.Serve(context.Background()); err == nil {
		t.Error("a second Serve did not fail")
	}
	if _, err := srv.Runs().Start(context.Background(), &runs.StartParams{Agent: "support", Input: "status of o-1002?"}); err == nil {
		t.Error("a run started after Shutdown")
	}
}

// Serve returns nil when its context ends.
func TestServer_ServeUntilContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, &server.Config{Listener: ln, Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestNew_RefusesBadConfig(t *testing.T) {
	key, err := envelope.GenerateKey(envelope.EdDSA, "did:web:a.example#key-1")
	if err != nil {
		t.Fatal(err)
	}
	wf := builtin.Store()
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"agent without a name", server.Config{Agents: []server.Agent{{}}}, "needs a Name"},
		{"two agents of one name", server.Config{Agents: []server.Agent{{Name: "a"}, {Name: "a"}}}, `two agents named "a"`},
		{"an agent that cannot be built", server.Config{Agents: []server.Agent{{Name: "a"}}}, `agent "a"`},
		{"two workflows of one name", server.Config{Workflows: []*workflow.Workflow{wf, wf}}, `two workflows named "store"`},
		{"UAMP without a DID", server.Config{UAMP: &server.UAMP{Key: key}}, "UAMP needs a DID"},
		{"UAMP without a key", server.Config{UAMP: &server.UAMP{DID: "did:web:a.example"}}, "UAMP needs an identity Key"},
		{"UAMP without a certificate", server.Config{UAMP: &server.UAMP{DID: "did:web:a.example", Key: key}}, "UAMP needs a TLS Certificate"},
		{"an audit export without a sink", server.Config{Audit: []server.AuditExport{{Name: "x"}}}, "needs a Name and a Sink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = quiet
			srv, err := server.New(context.Background(), &tc.cfg)
			if err == nil {
				srv.Shutdown(context.Background())
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// A run paused for an approval survives the server: a new server on the
// same store resumes it once the approval is decided, and it delivers.
func TestServer_PausedRunSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	url := "sqlite://" + filepath.Join(t.TempDir(), "agentry.db")
	pub, priv, _ := ed25519.GenerateKey(nil)

	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	first, err := server.New(ctx, supportConfig(t, st, pub))
	if err != nil {
		t.Fatal(err)
	}
	run, err := first.Runs().Start(ctx, &runs.StartParams{Agent: "support", Input: "refund o-1001"})
	if err != nil {
		t.Fatal(err)
	}
	if run, err = first.Runs().Wait(ctx, run.RequestID); err != nil || run.Status != runs.Paused || len(run.PendingApprovals) != 1 {
		t.Fatalf("before the restart: %+v, %v; want paused for one approval", run, err)
	}
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	second := newServer(t, supportConfig(t, st, pub))
	id := run.PendingApprovals[0]
	req, err := second.Governor().Approval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "jti-1",
		IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Governor().Decide(ctx, id, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute) // a safety net far beyond the work
	defer cancel()
	for {
		got, err := second.Runs().Wait(wctx, run.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == runs.Delivered {
			if !strings.Contains(got.Output, "o-1001") {
				t.Errorf("output %q does not name the order", got.Output)
			}
			return
		}
		if got.Status == runs.FailSafe {
			t.Fatalf("after the restart: %+v", got)
		}
	}
}

// UAMP is served on the TLS handler only, with the discovery documents;
// the plain handler serves neither.
func TestServer_UAMPOnTheTLSHandlerOnly(t *testing.T) {
	if srv := newServer(t, &server.Config{Logger: quiet}); srv.TLSHandler() != nil || srv.TLSConfig() != nil {
		t.Error("a TLS handler without UAMP")
	}
	key, err := envelope.GenerateKey(envelope.EdDSA, "did:web:localhost#key-1")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, &server.Config{Logger: quiet, UAMP: &server.UAMP{DID: "did:web:localhost", Key: key, Certificate: devCert(t)}})
	code, body := do(t, srv.TLSHandler(), "GET", "/.well-known/agent-manifest.json", "", "")
	if code != http.StatusOK || strings.Count(body, ".") != 2 { // a signed manifest: a compact JWS
		t.Errorf("discovery on the TLS handler: %d %s", code, body)
	}
	if code, _ := do(t, srv.Handler(), "GET", "/.well-known/agent-manifest.json", "", ""); code == http.StatusOK {
		t.Error("discovery on the plain handler")
	}
	if code, _ := do(t, srv.TLSHandler(), "GET", "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz on the TLS handler: %d", code)
	}
	if c := srv.TLSConfig(); c == nil || c.MinVersion < 0x0304 {
		t.Errorf("TLS config %+v, want TLS 1.3", c)
	}
}

func devCert(t *testing.T) tls.Certificate {
	t.Helper()
	dc, err := messaging.GenerateDevCert(&messaging.DevCertOptions{Hosts: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	return dc.TLS
}

// recordSink is an audit sink keeping what it is given.
type recordSink struct {
	mu   sync.Mutex
	recs []govern.Record
}

func (s *recordSink) Export(_ context.Context, recs []govern.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, recs...)
	return nil
}

// A run that Shutdown stops fails safe, and its last records reach the
// audit exports: they stop after the runs.
func TestServer_ShutdownExportsTheRecordsOfStoppedRuns(t *testing.T) {
	started := make(chan struct{})
	wait := govern.Declare(llm.Tool{Name: "wait", Description: "Waits until cancelled.", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, _ map[string]any) (any, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}}, govern.Declaration{Tier: govern.ReadOnly})
	model := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "wait", Arguments: map[string]any{}}}}, scripted.Step{Text: "done"})
	sink := &recordSink{}
	srv, err := server.New(context.Background(), &server.Config{Logger: quiet,
		ShutdownTimeout: time.Millisecond, // the run blocks until cancelled: no use waiting for it
		Audit:           []server.AuditExport{{Name: "test", Sink: sink}},
		Agents:          []server.Agent{{Name: "waiter", Options: agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{wait}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	run, err := srv.Runs().Start(context.Background(), &runs.StartParams{Agent: "waiter", Input: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, r := range sink.recs {
		if r.RequestID == run.RequestID && r.Kind == recordkind.Transition && r.To == govern.FailSafe {
			return
		}
	}
	t.Errorf("the stopped run's fail_safe transition was not exported; %d records exported", len(sink.recs))
}

// SetAgents replaces the agents: runs, GET /v1/agents, and UAMP (the hub
// lists each agent, its manifest is served); an invalid set changes
// nothing.
func TestServer_SetAgents(t *testing.T) {
	key, err := envelope.GenerateKey(envelope.EdDSA, "did:web:localhost#key-1")
	if err != nil {
		t.Fatal(err)
	}
	echoAgent := func(name, reply string) server.Agent {
		return server.Agent{Name: name, Description: "Says " + reply,
			Options: agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) {
				return scripted.Step{Text: reply}, nil
			}).Ref()}}}
	}
	srv := newServer(t, &server.Config{Logger: quiet, Agents: []server.Agent{echoAgent("a", "one")},
		UAMP: &server.UAMP{DID: "did:web:localhost", Key: key, Certificate: devCert(t)}})
	ask := func(name string) string {
		t.Helper()
		run, err := srv.Runs().Start(context.Background(), &runs.StartParams{Agent: name, Input: "hi"})
		if err != nil {
			return err.Error()
		}
		run, _ = srv.Runs().Wait(context.Background(), run.RequestID)
		return run.Output
	}
	hub := func() string {
		_, body := do(t, srv.TLSHandler(), "GET", "/.well-known/agent-hub.json", "", "")
		return body
	}
	if got := ask("a"); got != "one" || !strings.Contains(hub(), "did:web:localhost:agents:a") {
		t.Fatalf("before: a says %q; hub %s", got, hub())
	}
	if err := srv.SetAgents([]server.Agent{echoAgent("a", "uno"), echoAgent("b", "two")}); err != nil {
		t.Fatal(err)
	}
	if a, b := ask("a"), ask("b"); a != "uno" || b != "two" {
		t.Errorf("after SetAgents: a says %q, b %q", a, b)
	}
	if h := hub(); !strings.Contains(h, "did:web:localhost:agents:b") {
		t.Errorf("the hub does not list b: %s", h)
	}
	if code, body := do(t, srv.TLSHandler(), "GET", "/agents/b/.well-known/agent-manifest.json", "", ""); code != http.StatusOK || strings.Count(body, ".") != 2 {
		t.Errorf("b's manifest: %d %s", code, body)
	}
	if code, body := do(t, srv.Handler(), "GET", "/v1/agents/b", "", ""); code != http.StatusOK || !strings.Contains(body, `"Says two"`) {
		t.Errorf("GET /v1/agents/b: %d %s", code, body)
	}
	if err := srv.SetAgents([]server.Agent{echoAgent("c", "x"), echoAgent("c", "y")}); err == nil || !strings.Contains(err.Error(), `two agents named "c"`) {
		t.Errorf("two agents with one name: %v", err)
	}
	if got := ask("b"); got != "two" {
		t.Errorf("after a refused SetAgents, b says %q", got)
	}
	if got := ask("c"); !strings.Contains(got, "UNKNOWN_AGENT") && !strings.Contains(got, "no agent named") {
		t.Errorf("c after a refused SetAgents: %q", got)
	}
	if err := newServer(t, &server.Config{Logger: quiet}).SetAgents(nil); err != nil {
		t.Errorf("SetAgents(nil): %v", err)
	}
}
