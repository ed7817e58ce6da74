// Command notes is a small Model Context Protocol server over stdio,
// built with the official Go SDK: one read-only tool, search_notes, over
// a few notes about the protocols agentry implements. The example
// research agent (examples/agents/research.yaml) starts it as its MCP
// server:
//
//	tools:
//	  - mcp: {command: [go, run, ../mcp/notes]}
//
// Any MCP client can use it: go run ./examples/mcp/notes speaks MCP on
// stdin and stdout.
package main

import (
	"context"
	"log"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// note is one note of the collection.
type note struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

var notes = []note{
	{"UAP", "UAP 1.1 is the agent SDK protocol: an agent runs a model in a loop with tools, streams its events and can call sub-agents."},
	{"UAIP", "UAIP 0.1 makes an agent walk a workflow: stages, the tasks each stage allows, transitions with prerequisites, and session state."},
	{"UAICP", "UAICP 0.3 gates what an agent delivers on evidence and verification; writes are risk-tiered, high-risk ones need a human approval and a rollback."},
	{"UAMP", "UAMP 1.0 carries signed envelopes between agents, with delta streams, back-pressure and discovery over SSE, WebSocket and gRPC."},
	{"UIAP", "UIAP Core 0.1 is the session between a running app and the agent that drives it: states, actions and their results."},
	{"MCP", "The Model Context Protocol connects hosts to tool servers; agentry's agent files use MCP servers as tools."},
}

type searchIn struct {
	Query string `json:"query" jsonschema:"words to look for in the notes, such as a protocol's name"`
}

// search answers with the notes whose title the query names, else those
// whose text holds one of its words, as text.
func search(_ context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
	var words []string
	for _, w := range strings.Fields(strings.ToLower(in.Query)) {
		if w = strings.Trim(w, "?.,!;:"); len(w) > 3 {
			words = append(words, w)
		}
	}
	match := func(n note, inText bool) bool {
		for _, w := range words {
			if w == strings.ToLower(n.Title) || inText && strings.Contains(strings.ToLower(n.Text), w) {
				return true
			}
		}
		return false
	}
	var found []note
	for _, inText := range []bool{false, true} {
		for _, n := range notes {
			if match(n, inText) {
				found = append(found, n)
			}
		}
		if len(found) > 0 {
			break
		}
	}
	text := "No note matches."
	if len(found) > 0 {
		var b strings.Builder
		for _, n := range found {
			b.WriteString(n.Title + ": " + n.Text + "\n")
		}
		text = strings.TrimSpace(b.String())
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "agentry-notes", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "search_notes", Description: "Searches notes about agent protocols; returns the matching notes.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, search)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
