package agentfile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/internal/mcptools"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// BenchmarkLoadDir100 loads a directory of 100 agent files, each with a
// few tools of several kinds.
func BenchmarkLoadDir100(b *testing.B) {
	dir := b.TempDir()
	t := &testing.T{}
	for i := range 100 {
		write(t, dir, fmt.Sprintf("agent%03d.yaml", i), fmt.Sprintf(`description: Agent %d
model: openai:gpt-4.1
instructions: You are agent %d.
limits: {max_steps: 8, max_tokens: 1024}
tools:
  - builtin: calculate
  - webhook: {name: lookup, url: "http://127.0.0.1:9/lookup", risk: read_only, input_schema: {type: object, properties: {id: {type: string}}}}
  - webhook: {name: refund, url: "http://127.0.0.1:9/refund", risk: write_high_risk, rollback: {url: "http://127.0.0.1:9/reverse"}}
  - mcp: {url: "http://127.0.0.1:9/mcp", prefix: m_}
govern:
  risk: {"lookup": read_only}
`, i, i))
	}
	b.ReportAllocs()
	for b.Loop() {
		defs, err := agentfile.LoadDir(dir)
		if err != nil || len(defs) != 100 {
			b.Fatal(len(defs), err)
		}
	}
}

// mcpServers starts n in-process MCP servers (Streamable HTTP) of per
// tools each.
func mcpServers(b *testing.B, n, per int) []string {
	var urls []string
	for s := range n {
		srv := mcp.NewServer(&mcp.Implementation{Name: fmt.Sprint("s", s), Version: "1"}, nil)
		for i := range per {
			mcp.AddTool(srv, &mcp.Tool{Name: fmt.Sprintf("tool_%d_%d", s, i), Description: "A tool.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(context.Context, *mcp.CallToolRequest, struct{ X string }) (*mcp.CallToolResult, any, error) {
					return nil, nil, nil
				})
		}
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		b.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	return urls
}

// stepAgent is a scripted agent whose every step answers at once, with
// tools: fixed ones, or toolsets resolved before each step.
func stepAgent(b *testing.B, tools []llm.Tool, sets []agent.Toolset) *agent.Agent {
	m := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) { return scripted.Step{Text: "ok"}, nil })
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref(), Tools: tools}, Toolsets: sets})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkStep compares a scripted agent step with 50 fixed tools and
// the same step whose 50 tools come from 3 MCP servers, resolved (from
// the toolsets' lists) before the step: the cost of resolution.
func BenchmarkStep(b *testing.B) {
	ctx := context.Background()
	var fixed []llm.Tool
	for i := range 50 {
		fixed = append(fixed, llm.Tool{Name: fmt.Sprint("tool_", i), Description: "A tool.", Parameters: llm.Schema{"type": "object"},
			Run: func(context.Context, map[string]any) (any, error) { return nil, nil }})
	}
	var sets []agent.Toolset
	for i, u := range mcpServers(b, 3, 17) {
		ts, err := mcptools.New(&mcptools.Options{URL: u})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ts.Close() })
		if i == 2 {
			ts2, _ := mcptools.New(&mcptools.Options{URL: u, Exclude: []string{"tool_2_16", "tool_2_15"}})
			ts.Close()
			ts = ts2
			b.Cleanup(func() { ts2.Close() })
		}
		sets = append(sets, ts)
	}
	for _, c := range []struct {
		name string
		a    *agent.Agent
	}{
		{"fixed50", stepAgent(b, fixed, nil)},
		{"mcp3x50", stepAgent(b, nil, sets)},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := c.a.Generate(ctx, llm.Text("hi"), nil); err != nil { // connects, lists
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.a.Generate(ctx, llm.Text("hi"), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
