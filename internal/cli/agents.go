package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/agentry-dev/agentry/agentfile"
	exampleagents "github.com/agentry-dev/agentry/examples/agents"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/demo"
	"github.com/agentry-dev/agentry/internal/models"
	"github.com/agentry-dev/agentry/internal/yamldoc"
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
				model, err := yamldoc.ExpandEnv(d.Model, os.LookupEnv)
				if err != nil {
					model = d.Model
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, model, strings.Join(d.Tools, " "), firstLine(d.Description))
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
		// A workflow entry without url is checked as agentry serve would
		// run it (building contacts no server).
		opts := &agentfile.Options{Builtins: builtinTools(builtin.NewLedger()), WorkflowURL: "http://" + server.DefaultAddr}
		if err := agentfile.Build(&server.Config{}, defs, opts); err != nil {
			return nil, err
		}
	}
	return defs, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// serveAgents loads the agent files serve serves: those of --agents, or
// the example support and echo agents built into the binary.
func serveAgents(f *serveFlags) ([]*agentfile.Definition, error) {
	if f.agents != "" {
		defs, err := agentfile.LoadDir(f.agents)
		if err != nil {
			return nil, fmt.Errorf("agents:\n%w", err)
		}
		if len(defs) == 0 {
			return nil, fmt.Errorf("agents: no agent files (*.yaml, *.yml, *.json) in %s", f.agents)
		}
		return defs, nil
	}
	return defaultAgents()
}

// defaultAgents loads examples/agents.Defaults, named by their paths in
// the repository.
func defaultAgents() ([]*agentfile.Definition, error) {
	entries, err := fs.ReadDir(exampleagents.Defaults, ".")
	if err != nil {
		return nil, err
	}
	var defs []*agentfile.Definition
	for _, e := range entries {
		f, err := exampleagents.Defaults.Open(e.Name())
		if err != nil {
			return nil, err
		}
		d, err := agentfile.Load(f, path.Join("examples/agents", e.Name()))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("agents: %w", err)
		}
		defs = append(defs, d)
	}
	return defs, nil
}

// agentEnv is the environment agent files read: the process's, with
// SUPPORT_MODEL and its provider's base URL variable set by
// --agent-model and --agent-base-url.
func agentEnv(f *serveFlags) func(string) (string, bool) {
	set := map[string]string{}
	if f.agentModel != "" {
		set["SUPPORT_MODEL"] = f.agentModel
		if f.agentBaseURL != "" {
			provider, _, _ := strings.Cut(f.agentModel, ":")
			set[models.EnvBaseURLName(provider)] = f.agentBaseURL
		}
	}
	return func(name string) (string, bool) {
		if v, ok := set[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
}
