package cli

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startMCPStdio runs "agentry mcp stdio args…" in-process and connects a
// go-sdk client to its stdin and stdout.
func startMCPStdio(t *testing.T, changed chan<- struct{}, args ...string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), append([]string{"mcp", "stdio"}, args...), &env{stdin: inR, stdout: outW, stderr: stderr})
		outW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if changed != nil {
				changed <- struct{}{}
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connecting: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("agentry mcp stdio exited %d: %s", code, stderr.String())
			}
		case <-time.After(time.Minute):
			t.Error("agentry mcp stdio did not exit when its stdin closed")
		}
	})
	return cs
}

func TestMCPStdioWorkflow(t *testing.T) {
	changed := make(chan struct{}, 100)
	cs := startMCPStdio(t, changed, "--workflow", "store", "--store", "memory:")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	tools := func() []string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	waitChanged := func() {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("no notifications/tools/list_changed")
		}
	}
	if got := tools(); !slices.Contains(got, "search_products") {
		t.Fatalf("tools in browse: %v", got)
	}
	steps := []struct {
		tool    string
		args    map[string]any
		isError string // the refusal expected, "" for success
	}{
		{"stage_transition", map[string]any{"stage": "cart"}, ""},
		{"add_to_cart", map[string]any{"product_id": "SKU-002", "quantity": 1}, ""},
		{"stage_transition", map[string]any{"stage": "checkout"}, "missing state 'user.email'"},
		{"state_input", map[string]any{"state_updates": map[string]any{"user.email": "a@example.com"}}, ""},
		{"stage_transition", map[string]any{"stage": "checkout"}, ""},
		{"place_order", map[string]any{"payment_method": "invoice"}, ""},
		{"stage_transition", map[string]any{"stage": "complete"}, ""},
	}
	for _, s := range steps {
		res := call(s.tool, s.args)
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if res.IsError != (s.isError != "") || !strings.Contains(text, s.isError) {
			t.Fatalf("%s %v: isError %v %q, want refusal %q", s.tool, s.args, res.IsError, text, s.isError)
		}
		if s.tool == "stage_transition" && !res.IsError {
			waitChanged()
		}
	}
	if got := tools(); !slices.Equal(got, []string{"cancel_order", "order_status", "state_input"}) {
		t.Errorf("tools in complete: %v", got)
	}
}

func TestMCPStdioAgents(t *testing.T) {
	cs := startMCPStdio(t, nil, "--store", "memory:", "--data", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "over stdio"}})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "over stdio" {
		t.Fatalf("echo: %+v, %v", res, err)
	}
}

func TestMCPStdioUnknownWorkflow(t *testing.T) {
	code, _, stderr := runCLI(t, "", "mcp", "stdio", "--workflow", "nope", "--store", "memory:")
	if code != 2 || !strings.Contains(stderr, `--workflow "nope": no such workflow`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
