package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/mcpserve"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
)

// BenchmarkToolsCallVsExecute measures one round trip of the same task
// (search_products of the store workflow, read-only) against one server,
// the ways below alternating in the same loop (in a random order each
// time round) so that all see the same load:
//
//   - uaip: a UAIP POST /execute with net/http;
//   - mcp-http: an MCP tools/call POST with net/http on the session (its
//     Mcp-Session-Id and MCP-Protocol-Version headers, the JSON response
//     read whole), as a host that is not the go-sdk makes it — this
//     compares the servers, the client being the same kind as uaip's;
//   - mcp-sdk: the same tools/call through the go-sdk client;
//   - sdk-floor: a tools/call POST with net/http, as mcp-http, to a bare
//     go-sdk server (the same StreamableHTTPHandler options) whose
//     middleware answers with a constant result at once: what the SDK's
//     server costs before any agentry code or workflow work.
//
// Each client has its own keep-alive connection (the go-sdk client one
// more, for its session's standalone event stream). It reports each time
// and its ratio to uaip's (the goal: MCP within 1.5× of UAIP).
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
	// The floor: a bare go-sdk server whose receiving middleware answers
	// tools/call at once with a constant, as mcpserve's middleware answers
	// it (the SDK's own tool dispatch is skipped); the handler's options are
	// the ones mcpserve uses.
	bare := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "1"}, nil)
	bare.AddTool(&mcp.Tool{Name: "search_products", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			panic("answered by the middleware")
		})
	constant := `{"products":[]}`
	bare.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				return &mcp.CallToolResult{StructuredContent: json.RawMessage(constant), Content: []mcp.Content{&mcp.TextContent{Text: constant}}}, nil
			}
			return next(ctx, method, req)
		}
	})
	mux.Handle("/floor", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare },
		&mcp.StreamableHTTPOptions{JSONResponse: true, MaxRequestBodyBytes: 1 << 20, SessionTimeout: 30 * time.Minute, Logger: quiet()}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer mcpH.Close()
	endpoint := srv.URL + "/mcp/workflows/store"
	ctx := context.Background()

	// UAIP.
	uaip := oneConn()
	s, err := workflow.NewClient(srv.URL, &workflow.ClientOptions{HTTPClient: uaip}).Initialize(ctx, "store")
	if err != nil {
		b.Fatal(err)
	}
	executeBody := []byte(`{"workflow_name":"store","action":"method_call","task":"search_products","args":{"query":"coffee"}}`)
	executeHeader := map[string]string{"Content-Type": "application/json", "X-Session-Id": s.SessionID}
	var buf bytes.Buffer
	execute := func() {
		if resp := post(b, uaip, srv.URL+"/execute", executeBody, executeHeader, &buf); resp.StatusCode != http.StatusOK {
			b.Fatalf("execute: %d %s", resp.StatusCode, buf.Bytes())
		}
	}

	// MCP through the go-sdk client: the standalone event stream takes a
	// connection of its own; the calls go over one more.
	sdkHTTP := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 2, MaxIdleConnsPerHost: 2}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: sdkHTTP}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "search_products", Arguments: map[string]any{"query": "coffee"}}
	callSDK := func() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("tools/call through the go-sdk: %+v, %v", res, err)
		}
	}

	ways := []struct {
		name string
		do   func()
	}{
		{"uaip", execute},
		{"mcp-http", httpToolCaller(b, endpoint, `{"query":"coffee"}`)},
		{"mcp-sdk", callSDK},
		{"sdk-floor", httpToolCaller(b, srv.URL+"/floor", `{"query":"coffee"}`)},
	}
	for range 100 { // warm every path
		for _, w := range ways {
			w.do()
		}
	}
	// Each iteration makes every round trip once, in a fresh random order:
	// what one leaves behind (its garbage, a client's goroutines finishing)
	// falls on whichever comes next, and the order spreads that evenly.
	took := make([]time.Duration, len(ways))
	order := make([]int, len(ways))
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			t := time.Now()
			ways[i].do()
			took[i] += time.Since(t)
		}
	}
	n := float64(b.N)
	for i, w := range ways {
		b.ReportMetric(float64(took[i].Nanoseconds())/n, w.name+"-ns/op")
		if i > 0 {
			b.ReportMetric(float64(took[i])/float64(took[0]), w.name+"/uaip")
		}
	}
}

// oneConn is an HTTP client of one keep-alive connection.
func oneConn() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
}

// post sends body to url and reads the whole answer into buf.
func post(b *testing.B, c *http.Client, url string, body []byte, header map[string]string, buf *bytes.Buffer) *http.Response {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

// httpToolCaller opens an MCP session at endpoint with net/http on a
// connection of its own (initialize, notifications/initialized) and
// returns a function that makes one tools/call of search_products with
// args there, as a host that is not the go-sdk would: a JSON-RPC POST
// with the session's headers, the JSON response read whole.
func httpToolCaller(b *testing.B, endpoint, args string) func() {
	const version = "2025-11-25"
	c := oneConn()
	var buf bytes.Buffer
	header := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	resp := post(b, c, endpoint, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+
		`","capabilities":{},"clientInfo":{"name":"bench-http","version":"1"}}}`), header, &buf)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		b.Fatalf("initialize: %d %s", resp.StatusCode, buf.Bytes())
	}
	header["Mcp-Session-Id"] = resp.Header.Get("Mcp-Session-Id")
	header["MCP-Protocol-Version"] = version
	if resp := post(b, c, endpoint, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), header, &buf); resp.StatusCode != http.StatusAccepted {
		b.Fatalf("notifications/initialized: %d %s", resp.StatusCode, buf.Bytes())
	}
	id := 0
	failed := []byte(`"isError":true`)
	call := func() {
		id++
		body := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) +
			`,"method":"tools/call","params":{"name":"search_products","arguments":` + args + `}}`)
		resp := post(b, c, endpoint, body, header, &buf)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || bytes.Contains(buf.Bytes(), failed) {
			b.Fatalf("tools/call over net/http: %d %s", resp.StatusCode, buf.Bytes())
		}
	}
	call()
	if err := checkCallResult(buf.Bytes(), id); err != nil {
		b.Fatal(err)
	}
	return call
}

// checkCallResult checks that body is the JSON-RPC response to call id
// with a tool result that is not an error and carries structured content.
func checkCallResult(body []byte, id int) error {
	var resp struct {
		ID     int             `json:"id"`
		Error  json.RawMessage `json:"error"`
		Result struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			Content           []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("tools/call response %s: %v", body, err)
	}
	if resp.ID != id || resp.Error != nil || resp.Result.IsError || len(resp.Result.StructuredContent) == 0 || len(resp.Result.Content) != 1 {
		return fmt.Errorf("tools/call response: %s", body)
	}
	return nil
}
