package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentry-dev/agentry/internal/mcpserve"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/workflow"
)

func mcpCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve workflows and agents to MCP hosts (Claude, Cursor, VS Code…)",
		Long: `agentry serve serves every workflow to MCP hosts at /mcp/workflows/{name}
and the agents at /mcp/agents (Streamable HTTP). "agentry mcp stdio" serves
one of them over stdio, for a host that launches agentry as a local MCP
server. docs/mcp.md shows the hosts' configuration.`,
	}
	cmd.AddCommand(mcpStdioCmd(e))
	return cmd
}

func mcpStdioCmd(e *env) *cobra.Command {
	var f serveFlags
	var name string
	cmd := &cobra.Command{
		Use:   "stdio",
		Short: "Serve a workflow (--workflow NAME) or the agents (--agents DIR) to an MCP host over stdio",
		Long: `Serve one MCP session over stdin and stdout: with --workflow NAME the
workflow (its stage's tasks, stage_transition and state_input as tools; the
tools change with the stage), else the agents (--agents DIR, or the example
support and echo agents), each a tool whose call is a governed run.

The workflow session lives in --store (default: the SQLite store under
--data, which "agentry serve" uses too); it ends when the host closes the
session. Logs go to stderr; stdout carries the protocol only. Every flag
can also be set by an environment variable AGENTRY_<FLAG>.`,
		Example: `  agentry mcp stdio --workflow store
  agentry mcp stdio --agents ./agents --data ~/.agentry`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return usageError("%v", err)
			}
			return runMCPStdio(cmd.Context(), e, &f, name)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "workflow", "", "the workflow to serve (default: serve the agents)")
	fl.StringSliceVar(&f.workflows, "workflows", nil, "workflow YAML/JSON files or directories (default: the built-in examples)")
	fl.StringVar(&f.data, "data", "./agentry-data", "data directory (the default SQLite store and approver keys live here)")
	fl.StringVar(&f.store, "store", "", "store URL: sqlite:///path, postgres://…, memory: (default sqlite in --data)")
	fl.DurationVar(&f.sessionTTL, "session-ttl", 24*time.Hour, "a workflow session expires after this long unused")
	fl.StringVar(&f.agents, "agents", "", "a directory of agent files to serve (default: the example support and echo agents)")
	fl.StringVar(&f.agentModel, "agent-model", "", "provider:model of the support agent (default: its offline model)")
	fl.StringVar(&f.agentBaseURL, "agent-base-url", "", "API address of --agent-model's provider")
	fl.StringVar(&f.approvers, "approvers", "", "keyring of trusted approver keys (default: <data>/keys/approvers.json when it exists)")
	fl.StringVar(&f.policy, "policy", "", "YAML rule policy for governed tool calls")
	fl.StringVar(&f.node, "node", "", "this process's name in the audit journal (default: the name kept in <data>/node)")
	fl.StringVar(&f.logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	return cmd
}

// nopWriteCloser keeps the transport from closing the process's stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func runMCPStdio(ctx context.Context, e *env, f *serveFlags, name string) error {
	logger, err := newLogger(e, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	defer useAsDefault(logger)()
	t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
	opts := &mcpserve.Options{Version: version(), Logger: logger}
	st, err := openStore(ctx, f.store, f.data)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer st.Close()
	if name != "" {
		wfs, err := loadWorkflows(f.workflows)
		if err != nil {
			return fmt.Errorf("workflows: %w", err)
		}
		engine := workflow.NewEngine(st.Sessions(), &workflow.EngineOptions{SessionTTL: f.sessionTTL, Logger: logger})
		for _, w := range wfs {
			if err := engine.Register(w); err != nil {
				return fmt.Errorf("workflow %q: %w", w.Name, err)
			}
		}
		if _, ok := engine.Workflow(name); !ok {
			return usageError("--workflow %q: no such workflow", name)
		}
		return mcpserve.ServeStdio(ctx, t, &mcpserve.Stdio{Engine: engine, Workflow: name}, opts)
	}
	defs, err := serveAgents(f)
	if err != nil {
		return err
	}
	cfg := &server.Config{Store: st, Logger: logger}
	if _, err := governance(e, f, cfg, defs, logger); err != nil {
		return err
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	list := make([]mcpserve.Agent, len(cfg.Agents))
	for i, a := range cfg.Agents {
		list[i] = mcpserve.Agent{Name: a.Name, Description: a.Description, Structured: a.Options.Structure != nil}
	}
	return mcpserve.ServeStdio(ctx, t, &mcpserve.Stdio{Runs: srv.Runs(), Agents: func() []mcpserve.Agent { return list }}, opts)
}
