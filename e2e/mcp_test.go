package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/peertest"
)

// inspector is the MCP Inspector's CLI (@modelcontextprotocol/inspector),
// an independent MCP client, installed from e2e/mcp/package-lock.json by
// `npm ci --prefix e2e/mcp` (.ci/run does it).
func inspector(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join("mcp", "node_modules", ".bin", "mcp-inspector"))
	_, err := os.Stat(bin)
	if _, lerr := exec.LookPath("node"); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		peertest.Missing(t, "AGENTRY_REQUIRE_MCP", "the MCP Inspector is not installed (npm ci --prefix e2e/mcp): "+err.Error())
	}
	return bin
}

// runInspector runs the Inspector CLI with args, expecting exit status
// code, and decodes its JSON output into v.
func runInspector(t *testing.T, bin string, code int, v any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--cli"}, args...)...)
	home := t.TempDir() // its catalog goes there, not into the user's home
	cmd.Env = append(childEnv(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == code {
		err = nil
	}
	if err == nil && code != 0 && cmd.ProcessState.ExitCode() != code {
		err = fmt.Errorf("exit status %d, want %d", cmd.ProcessState.ExitCode(), code)
	}
	if err != nil {
		t.Fatalf("mcp-inspector %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
		t.Fatalf("mcp-inspector %v: output is not JSON: %v\n%s", args, err, stdout.String())
	}
}

// The MCP Inspector lists a workflow's tools and calls a task against a
// running agentry serve, through the token.
func TestMCPInspectorWorkflow(t *testing.T) {
	bin := inspector(t)
	srv := startServer(t, "--store", "memory:", "--data", t.TempDir(), "--token", "s3cret")
	url := srv.URL + "/mcp/workflows/store"
	auth := "Authorization: Bearer s3cret"

	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			Annotations struct {
				ReadOnlyHint bool `json:"readOnlyHint"`
			} `json:"annotations"`
		} `json:"tools"`
	}
	runInspector(t, bin, 0, &list, url, "--transport", "http", "--header", auth, "--method", "tools/list")
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Name == "search_products" && !tool.Annotations.ReadOnlyHint {
			t.Error("search_products is not readOnlyHint")
		}
	}
	if !slices.Equal(names, []string{"get_product", "search_products", "stage_transition", "state_input"}) {
		t.Errorf("tools/list: %v", names)
	}

	var call struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Products []struct {
				ID string `json:"product_id"`
			} `json:"products"`
		} `json:"structuredContent"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	runInspector(t, bin, 0, &call, url, "--transport", "http", "--header", auth,
		"--method", "tools/call", "--tool-name", "search_products", "--tool-arg", "query=grinder")
	if call.IsError || len(call.StructuredContent.Products) != 1 || call.StructuredContent.Products[0].ID != "SKU-004" {
		t.Errorf("tools/call search_products: %+v", call)
	}

	// A refusal is a result with isError (the Inspector exits 5 for it),
	// not a protocol error.
	call.IsError = false
	runInspector(t, bin, 5, &call, url, "--transport", "http", "--header", auth,
		"--method", "tools/call", "--tool-name", "stage_transition", "--tool-arg", "stage=checkout")
	if !call.IsError || len(call.Content) == 0 || !strings.Contains(call.Content[0].Text, "Invalid transition from 'browse' to 'checkout'") {
		t.Errorf("an unreachable stage: %+v", call)
	}
	srv.stop(t)
}
