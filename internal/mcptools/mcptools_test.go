package mcptools_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/mcptools"
	"github.com/agentry-dev/agentry/llm"
)

// TestMain makes the test binary an MCP stdio server when asked to: the
// server the stdio tests start as a child process.
func TestMain(m *testing.M) {
	if os.Getenv("MCPTOOLS_TEST_SERVER") == "1" {
		s := newServer()
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text"`
}

// newServer is the test server: echo (read-only), add (plain), wipe
// (destructive), fail (reports an error), crash (exits the process).
func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	yes := true
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct{ A, B float64 }) (*mcp.CallToolResult, struct{ Sum float64 }, error) {
			return nil, struct{ Sum float64 }{in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wipe", Description: "Wipes.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the disk is full")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	return s
}

func names(tools []llm.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

func find(t *testing.T, tools []llm.Tool, name string) llm.Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q in %v", name, names(tools))
	return llm.Tool{}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net far beyond the work
	t.Cleanup(cancel)
	return ctx
}

// checkTools checks what both transports must give: the listed tools
// with include/exclude/prefix applied, tiers from annotations, results,
// structured results and tool errors.
func checkTools(t *testing.T, ts *mcptools.Toolset) {
	ctx := ctxT(t)
	tools, err := ts.Tools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(tools), []string{"t_add", "t_echo", "t_fail", "t_wipe"}; !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	for name, want := range map[string]govern.Tier{"t_echo": govern.ReadOnly, "t_add": govern.WriteLowRisk, "t_wipe": govern.WriteHighRisk} {
		if d, ok := govern.DeclarationOf(find(t, tools, name)); !ok || d.Tier != want {
			t.Errorf("%s: tier %v (declared %v), want %v", name, d.Tier, ok, want)
		}
	}
	if got, err := find(t, tools, "t_echo").Run(ctx, map[string]any{"text": "hi"}); err != nil || got != "echo: hi" {
		t.Errorf("echo: %v, %v", got, err)
	}
	if got, err := find(t, tools, "t_add").Run(ctx, map[string]any{"A": 2, "B": 3}); err != nil || fmt.Sprint(got) != "map[Sum:5]" {
		t.Errorf("add: %v, %v", got, err)
	}
	if _, err := find(t, tools, "t_fail").Run(ctx, nil); err == nil || !strings.Contains(err.Error(), "the disk is full") {
		t.Errorf("fail: %v", err)
	}
	if _, err := find(t, tools, "t_echo").Run(ctx, map[string]any{"text": 5}); err == nil {
		t.Error("echo with a number: no error")
	}
}

func TestStreamableHTTP(t *testing.T) {
	s := newServer()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer hs.Close()
	ts, err := mcptools.New(&mcptools.Options{URL: hs.URL, Prefix: "t_", Exclude: []string{"crash"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	checkTools(t, ts)
}

func stdioOptions() *mcptools.Options {
	return &mcptools.Options{Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{"MCPTOOLS_TEST_SERVER": "1"}, Prefix: "t_"}
}

func TestStdio(t *testing.T) {
	o := stdioOptions()
	o.Exclude = []string{"crash"}
	ts, err := mcptools.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	checkTools(t, ts)
}

// A stdio server that dies: the call in flight is a tool error, and the
// next step's tools come from a server started again.
func TestStdio_RestartAfterDeath(t *testing.T) {
	o := stdioOptions()
	o.Include = []string{"echo", "crash"}
	ts, err := mcptools.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	ctx := ctxT(t)
	tools, err := ts.Tools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := find(t, tools, "t_crash").Run(ctx, nil); err == nil {
		t.Fatal("a call that killed the server succeeded")
	}
	// The session ends when the process is gone; the next step finds
	// the server gone and starts it again.
	for {
		tools, err = ts.Tools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := find(t, tools, "t_echo").Run(ctx, map[string]any{"text": "again"})
		if err == nil && got == "echo: again" {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the server was not started again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notifications/tools/list_changed: the next step's tools are listed
// again.
func TestListChanged(t *testing.T) {
	s := newServer()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer hs.Close()
	ts, err := mcptools.New(&mcptools.Options{URL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	ctx := ctxT(t)
	if tools, err := ts.Tools(ctx, nil); err != nil || len(tools) != 5 {
		t.Fatalf("%v, %v", names(tools), err)
	}
	s.RemoveTools("crash", "wipe")
	for {
		tools, err := ts.Tools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(names(tools), []string{"add", "echo", "fail"}) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the list did not change: %v", names(tools))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNew_NeedsOneTransport(t *testing.T) {
	if _, err := mcptools.New(&mcptools.Options{}); err == nil {
		t.Error("no transport: no error")
	}
	if _, err := mcptools.New(&mcptools.Options{Command: []string{"x"}, URL: "http://x"}); err == nil {
		t.Error("two transports: no error")
	}
}
