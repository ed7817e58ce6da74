package cli

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/agentry-dev/agentry/internal/approverkey"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/workflow"
)

// runDefined runs the agent of an agent file once, under governance: the
// answer goes to stdout. Without --store the run is kept in memory, away
// from the store a running server may own; with it, a run that waits for
// an approval stays paused there, and agentry serve on that store
// resumes it once an approver decides.
func runDefined(ctx context.Context, e *env, f *runFlags, args []string) error {
	prompt, err := readPrompt(e, args)
	if err != nil {
		return err
	}
	def, defs, err := findAgent(f.agent, f.agents)
	if err != nil {
		return err
	}
	url := "memory:"
	if f.storeSet {
		url = f.store
	}
	st, err := openStore(ctx, url, "")
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer st.Close()
	keys, err := govern.OpenKeyring(approverkey.Dir(f.keys).KeyringPath(), &govern.KeyringOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("approvers: %w", err)
	}
	ledger := builtin.NewLedger()
	cfg := &server.Config{Store: st, Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Governance: &govern.Options{Keyring: keys,
			Rollbacks: map[string]govern.RollbackFunc{builtin.RefundReversal: ledger.RollbackHandler()}}}
	opts := &agentfile.Options{Builtins: builtinTools(ledger)}
	if usesWorkflows(defs) {
		// "workflow: store" means the server's own workflows: serve the
		// built-in ones on a loopback port for the run.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		cfg.Listener, cfg.Workflows = ln, []*workflow.Workflow{builtin.Store()}
		opts.WorkflowURL = "http://" + ln.Addr().String()
	}
	if err := agentfile.Build(cfg, defs, opts); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return err
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return err
	}
	bg := context.WithoutCancel(ctx) // the server stops with Shutdown, not ctx
	served := make(chan error, 1)
	if cfg.Listener != nil {
		go func() { served <- srv.Serve(bg) }()
	}
	defer func() {
		srv.Shutdown(bg)
		if cfg.Listener != nil {
			<-served
		}
	}()
	ctx, cancel := f.withTimeout(ctx)
	defer cancel()
	run, err := srv.Runs().Start(ctx, &runs.StartParams{Agent: def.Name, Input: prompt})
	if err != nil {
		return err
	}
	if run, err = settle(ctx, srv, run.RequestID); err != nil {
		return err
	}
	if run.Status == runs.Paused && e.isTTY {
		if run, err = decideOnTerminal(ctx, e, f, srv, keys, run); err != nil {
			return err
		}
	}
	switch run.Status {
	case runs.Delivered:
		fmt.Fprintln(e.stdout, run.Output)
		fmt.Fprintf(e.stderr, "— %s · run %s delivered\n", def.Name, run.RequestID)
		return nil
	case runs.Paused:
		if !f.storeSet {
			fmt.Fprintf(e.stderr, "agentry: run %s is paused: a write_high_risk call waits for approval (%s); it was kept in memory and ends here.\n"+
				"Give --store to keep it, then serve that store (agentry serve --agents DIR --store URL) and approve it (agentry approve ID).\n",
				run.RequestID, strings.Join(run.PendingApprovals, ", "))
			return &exitError{code: 3, err: fmt.Errorf("run %s paused for approval", run.RequestID), quiet: true}
		}
		fmt.Fprintf(e.stderr, "agentry: run %s is paused: a write_high_risk call waits for approval (%s).\n"+
			"Serve the store (agentry serve --agents DIR --store %s) and approve it (agentry approve ID); the run then resumes there.\n",
			run.RequestID, strings.Join(run.PendingApprovals, ", "), f.store)
		return &exitError{code: 3, err: fmt.Errorf("run %s paused for approval", run.RequestID), quiet: true}
	}
	msg := fmt.Sprintf("run %s failed safe", run.RequestID)
	if len(run.Reasons) > 0 {
		msg += fmt.Sprintf(" (%v)", run.Reasons)
	}
	if run.Error != nil {
		msg += ": " + run.Error.Message
	}
	return fmt.Errorf("%s", msg)
}

// settle waits until the run delivers, fails safe or waits for a human.
func settle(ctx context.Context, srv *server.Server, id string) (*runs.Run, error) {
	for {
		run, err := srv.Runs().Wait(ctx, id)
		if err != nil || run.Settled() {
			return run, err
		}
	}
}

// decideOnTerminal asks the approver (--as, else the only one of
// --keys) to approve or deny each call the paused run waits for, on the
// terminal, signing approvals with the approver's key as agentry approve
// does, until the run settles otherwise. Without an approver key, or
// when the terminal has nothing more to say (EOF), the run stays paused.
func decideOnTerminal(ctx context.Context, e *env, f *runFlags, srv *server.Server, keys *govern.Keyring, run *runs.Run) (*runs.Run, error) {
	name := f.as
	if name == "" {
		names := map[string]bool{}
		for _, k := range keys.Keys() {
			names[k.Approver] = true
		}
		switch len(names) {
		case 0:
			fmt.Fprintf(e.stderr, "agentry: a write_high_risk call waits for approval, and %s holds no approver to ask (create one: agentry keys create NAME --dir %s)\n", f.keys, f.keys)
			return run, nil
		case 1:
		default:
			fmt.Fprintf(e.stderr, "agentry: a write_high_risk call waits for approval: give --as NAME, one of the approvers of %s, to decide it here\n", f.keys)
			return run, nil
		}
		for n := range names {
			name = n
		}
	}
	key, err := approverkey.Dir(f.keys).Key(name)
	if err != nil {
		return nil, fmt.Errorf("approver %s: %w", name, err)
	}
	in := bufio.NewReader(e.stdin)
	for run.Status == runs.Paused && len(run.PendingApprovals) > 0 {
		for _, id := range run.PendingApprovals {
			req, err := srv.Governor().Approval(ctx, id)
			if err != nil {
				return nil, err
			}
			fmt.Fprintln(e.stderr)
			describeApproval(e.stderr, &req)
			fmt.Fprintf(e.stderr, "Approve %s as %s? [y/N] ", req.Tool, name)
			answer, err := in.ReadString('\n')
			if err != nil && answer == "" {
				fmt.Fprintln(e.stderr)
				return run, nil // nobody to ask: the run stays paused
			}
			input := govern.ApprovalInput{Approver: name, Reason: "denied on the terminal"}
			if a := strings.ToLower(strings.TrimSpace(answer)); a == "y" || a == "yes" {
				token, err := approvalapi.Sign(key.Approver, key.Private, req, approvalapi.DefaultTokenTTL)
				if err != nil {
					return nil, fmt.Errorf("not signing: %w", err)
				}
				input = govern.ApprovalInput{Approve: true, Token: token}
			}
			if _, err := srv.Governor().Decide(ctx, id, input); err != nil {
				return nil, err
			}
		}
		if run, err = settle(ctx, srv, run.RequestID); err != nil {
			return nil, err
		}
	}
	return run, nil
}

// findAgent reads the agent file at ref, or the agent named ref in dir,
// and returns it with the definitions to build: it and the sub-agents it
// calls, directly or not, looked up in its directory.
func findAgent(ref, dir string) (*agentfile.Definition, []*agentfile.Definition, error) {
	var def *agentfile.Definition
	if dir == "" {
		if _, err := os.Stat(ref); err != nil && !strings.ContainsAny(ref, `/\.`) {
			return nil, nil, usageError("--agent %s: no such file; give a path, or --agents DIR to look the name up in", ref)
		}
		f, err := os.Open(ref)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		if def, err = agentfile.Load(f, ref); err != nil {
			return nil, nil, err
		}
		if len(subagents(def)) == 0 {
			return def, []*agentfile.Definition{def}, nil
		}
		dir = filepath.Dir(ref)
	}
	all, err := agentfile.LoadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*agentfile.Definition{}
	for _, d := range all {
		byName[d.Name] = d
		if def == nil && d.Name == ref || def != nil && d.Name == def.Name {
			def = d
		}
	}
	if def == nil {
		return nil, nil, usageError("--agent %s: no agent of that name in %s", ref, dir)
	}
	// The agent and its sub-agents, each once (LoadDir refused cycles).
	defs, seen := []*agentfile.Definition{def}, map[string]bool{def.Name: true}
	for i := 0; i < len(defs); i++ {
		for _, name := range subagents(defs[i]) {
			if d, ok := byName[name]; ok && !seen[name] {
				seen[name] = true
				defs = append(defs, d)
			}
		}
	}
	return def, defs, nil
}

// usesWorkflows reports whether an agent of defs has a workflow tool.
func usesWorkflows(defs []*agentfile.Definition) bool {
	for _, d := range defs {
		for _, t := range d.Tools {
			if strings.HasPrefix(t, "workflow:") {
				return true
			}
		}
	}
	return false
}

// subagents names the agents d's agent: tools call.
func subagents(d *agentfile.Definition) []string {
	var out []string
	for _, t := range d.Tools {
		if name, ok := strings.CutPrefix(t, "agent:"); ok {
			out = append(out, name)
		}
	}
	return out
}
