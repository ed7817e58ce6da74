package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/demo"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/server"
	"github.com/spf13/cobra"
)

// builtinTools are the tools an agent file's "builtin:" entries may
// name: the demo's calculate and word_stats (read_only), and the example
// support agent's lookup_order (read_only) and refund_order
// (write_high_risk, rolled back on ledger).
func builtinTools(ledger *builtin.Ledger) map[string]llm.Tool {
	tools := map[string]llm.Tool{}
	for _, t := range demo.Tools() {
		tools[t.Name] = govern.Declare(t, govern.Declaration{Tier: govern.ReadOnly})
	}
	for _, t := range builtin.SupportTools(ledger) {
		tools[t.Name] = t
	}
	return tools
}

func agentsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Check and list agent files (docs/agents.md)",
		Long: `An agent file declares one agent: its model, instructions, strategy,
limits and tools (builtin, webhook, mcp, workflow, agent, uamp), with a
UAICP risk tier per tool. agentry serve --agents DIR serves a directory of
them under governance.`,
	}
	check := &cobra.Command{
		Use:   "check DIR",
		Short: "Check a directory of agent files; print every problem with its file and line (exit 1)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defs, err := loadAgents(args[0], true)
			if err != nil {
				fmt.Fprintln(e.stderr, err)
				return &exitError{code: 1, err: err, quiet: true}
			}
			names := make([]string, len(defs))
			for i, d := range defs {
				names[i] = d.Name
			}
			fmt.Fprintf(e.stdout, "%d agents: %s\n", len(defs), strings.Join(names, ", "))
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list DIR",
		Short: "List the agents of a directory of agent files: name, model, tools, description",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defs, err := loadAgents(args[0], false)
			if err != nil {
				fmt.Fprintln(e.stderr, err)
				return &exitError{code: 1, err: err, quiet: true}
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tMODEL\tTOOLS\tDESCRIPTION")
			for _, d := range defs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, d.Model, strings.Join(d.Tools, " "), firstLine(d.Description))
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(check, list)
	return cmd
}

// loadAgents reads a directory of agent files; with build it also
// builds them against the binary's builtins and the environment, so that
// check reports what serve would refuse.
func loadAgents(dir string, build bool) ([]*agentfile.Definition, error) {
	defs, err := agentfile.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(defs) == 0 {
		return nil, fmt.Errorf("%s: no agent files (*.yaml, *.yml, *.json)", dir)
	}
	if build {
		if err := agentfile.Build(&server.Config{}, defs, &agentfile.Options{Builtins: builtinTools(builtin.NewLedger())}); err != nil {
			return nil, err
		}
	}
	return defs, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
