package mcptools_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/mcptools"
	"github.com/agentry-dev/agentry/internal/peertest"
)

// everything is the MCP reference server, @modelcontextprotocol/
// server-everything, installed from e2e/mcp/package-lock.json by
// `npm ci --prefix e2e/mcp` (.ci/run does it).
func everything(t *testing.T) string {
	t.Helper()
	index, _ := filepath.Abs(filepath.Join("..", "..", "e2e", "mcp", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	_, err := os.Stat(index)
	if _, lerr := exec.LookPath("node"); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		peertest.Missing(t, "AGENTRY_REQUIRE_MCP", "the MCP reference server is not installed (npm ci --prefix e2e/mcp): "+err.Error())
	}
	return index
}

// checkEverything lists the reference server's tools and calls two.
func checkEverything(t *testing.T, ts *mcptools.Toolset) {
	ctx := ctxT(t)
	tools, err := ts.Tools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := names(tools)
	for _, want := range []string{"echo", "get-sum"} {
		if !slices.Contains(got, want) {
			t.Fatalf("tools %v lack %q", got, want)
		}
	}
	if r, err := find(t, tools, "echo").Run(ctx, map[string]any{"message": "héllo"}); err != nil || r != "Echo: héllo" {
		t.Errorf("echo: %v, %v", r, err)
	}
	if r, err := find(t, tools, "get-sum").Run(ctx, map[string]any{"a": 2, "b": 40}); err != nil || !strings.Contains(fmt.Sprint(r), "42") {
		t.Errorf("get-sum: %v, %v", r, err)
	}
	if _, err := find(t, tools, "echo").Run(ctx, map[string]any{"message": 5}); err == nil {
		t.Error("echo with a number: no error")
	}
}

func TestEverything_Stdio(t *testing.T) {
	ts, err := mcptools.New(&mcptools.Options{Command: []string{"node", everything(t), "stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	checkEverything(t, ts)
}

func TestEverything_StreamableHTTP(t *testing.T) {
	index := everything(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", index, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the reference server exited before listening")
		}
	case <-time.After(60 * time.Second): // a safety net far beyond the work
		t.Fatal("the reference server did not listen within 60 s")
	}
	ts, err := mcptools.New(&mcptools.Options{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	checkEverything(t, ts)
}
