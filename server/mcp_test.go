package server_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/server"
)

// mcpClient connects a go-sdk client to url; progress receives the
// messages of notifications/progress.
func mcpClient(t *testing.T, url string, progress chan<- string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if progress != nil {
				progress <- r.Params.Message
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// /mcp/agents: every agent is a tool; a call is a governed run that
// delivers (reported by progress notifications while it runs), or pauses
// for an approval, which the result names.
func TestServer_MCPAgents(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	cfg := supportConfig(t, nil, pub)
	cfg.Agents = append(cfg.Agents, server.Agent{Name: "echo", Description: "Says it back.",
		Options: agent.Options{LLMOptions: llm.LLMOptions{Model: builtin.EchoModel().Ref()}}})
	srv := newServer(t, cfg)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close) // after the client's Close (cleanups run last first): it ends the event stream
	progress := make(chan string, 1000)
	cs := mcpClient(t, hs.URL+"/mcp/agents", progress)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"echo", "support"}) {
		t.Fatalf("tools: %v", names)
	}

	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "hello there"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError || mcpText(res) != "hello there" {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	// The notifications went out before the result; the client may
	// hand them to its handler after it returned the result.
	var seen []string
	for !slices.Contains(seen, "ended: delivered") {
		select {
		case m := <-progress:
			seen = append(seen, m)
		case <-ctx.Done():
			t.Fatalf("progress notifications: %q, want up to \"ended: delivered\"", seen)
		}
	}
	if !slices.Contains(seen, "run started") {
		t.Errorf("progress notifications: %q", seen)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "support", Arguments: map[string]any{"input": "refund o-1001"}})
	if err != nil || res.IsError {
		t.Fatalf("support refund: %+v, %v", res, err)
	}
	var paused struct {
		RequestID        string   `json:"request_id"`
		Status           string   `json:"status"`
		PendingApprovals []string `json:"pending_approvals"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &paused); err != nil || paused.Status != "paused" || len(paused.PendingApprovals) != 1 {
		t.Fatalf("a refund: %s, %v; want paused for one approval", b, err)
	}
	if !strings.Contains(mcpText(res), paused.PendingApprovals[0]) {
		t.Errorf("the text does not name the approval: %s", mcpText(res))
	}
	run, err := srv.Runs().Get(ctx, paused.RequestID)
	if err != nil || run.Status != "paused" {
		t.Errorf("the run over /v1/runs: %+v, %v", run, err)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "support", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), `"input"`) {
		t.Errorf("no input: %+v, %v", res, err)
	}
}

// /mcp/workflows/{name}: the MCP session is a UAIP session that the UAIP
// endpoints see.
func TestServer_MCPWorkflowIsAUAIPSession(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	srv := newServer(t, supportConfig(t, nil, pub))
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close) // after the client's Close (cleanups run last first): it ends the event stream
	cs := mcpClient(t, hs.URL+"/mcp/workflows/store", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stage_transition", Arguments: map[string]any{"stage": "cart"}})
	if err != nil || res.IsError {
		t.Fatalf("stage_transition: %+v, %v", res, err)
	}
	id, _ := res.StructuredContent.(map[string]any)["session_id"].(string)
	resp, err := http.Get(hs.URL + "/api/sessions/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Stage string `json:"current_stage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || s.Stage != "cart" {
		t.Errorf("GET /api/sessions/%s: %d %+v %v", id, resp.StatusCode, s, err)
	}
}
