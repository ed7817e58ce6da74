package mcpserve_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/mcpserve"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
)

// BenchmarkToolsCallVsExecute measures one round trip of the same task
// (search_products of the store workflow, read-only) as an MCP tools/call
// through the go-sdk client and as a UAIP POST /execute, each on one
// keep-alive connection to one server, alternating in the same loop; it
// reports both and their ratio (the goal: MCP within 1.5× of UAIP).
//
//	go test -run '^$' -bench ToolsCallVsExecute -benchtime 5000x ./internal/mcpserve/
func BenchmarkToolsCallVsExecute(b *testing.B) {
	e := workflow.NewEngine(memstore.New().Sessions(), &workflow.EngineOptions{Logger: quiet(), CacheSessions: 100})
	if err := e.Register(builtin.Store()); err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mcpH := mcpserve.Workflows(e, &mcpserve.Options{Logger: quiet()})
	mux.Handle("/mcp/workflows/{name}", mcpH)
	mux.Handle("/", workflow.NewHandler(e, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer mcpH.Close()

	one := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	}
	// MCP: the standalone event stream takes a connection of its own; the
	// calls go over one more.
	mcpClient := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 2, MaxIdleConnsPerHost: 2}}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	ctx := context.Background()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/workflows/store", HTTPClient: mcpClient}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "search_products", Arguments: map[string]any{"query": "coffee"}}

	uaip := one()
	s, err := workflow.NewClient(srv.URL, &workflow.ClientOptions{HTTPClient: uaip}).Initialize(ctx, "store")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"workflow_name":"store","action":"method_call","task":"search_products","args":{"query":"coffee"}}`)
	execute := func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/execute", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-Id", s.SessionID)
		resp, err := uaip.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("execute: %d", resp.StatusCode)
		}
	}
	call := func() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("tools/call: %+v, %v", res, err)
		}
	}
	for range 100 { // warm both paths
		execute()
		call()
	}
	var tUAIP, tMCP time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		execute()
		t1 := time.Now()
		call()
		tMCP += time.Since(t1)
		tUAIP += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tUAIP.Nanoseconds())/n, "uaip-ns/op")
	b.ReportMetric(float64(tMCP.Nanoseconds())/n, "mcp-ns/op")
	b.ReportMetric(float64(tMCP)/float64(tUAIP), "mcp/uaip")
}
