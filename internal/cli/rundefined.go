package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/approverkey"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/server"
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
	def, err := findAgent(f.agent, f.agents)
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
	dataDir := "agentry-data"
	keys, err := govern.OpenKeyring(approverkey.Dir(filepath.Join(dataDir, "keys")).KeyringPath(), &govern.KeyringOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("approvers: %w", err)
	}
	ledger := builtin.NewLedger()
	cfg := &server.Config{Store: st, Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Governance: &govern.Options{Keyring: keys,
			Rollbacks: map[string]govern.RollbackFunc{builtin.RefundReversal: ledger.RollbackHandler()}}}
	if err := agentfile.Build(cfg, []*agentfile.Definition{def}, &agentfile.Options{Builtins: builtinTools(ledger)}); err != nil {
		return err
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	ctx, cancel := f.withTimeout(ctx)
	defer cancel()
	run, err := srv.Runs().Start(ctx, &runs.StartParams{Agent: def.Name, Input: prompt})
	if err != nil {
		return err
	}
	if run, err = srv.Runs().Wait(ctx, run.RequestID); err != nil {
		return err
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

// findAgent reads the agent file at ref, or the agent named ref in dir.
func findAgent(ref, dir string) (*agentfile.Definition, error) {
	if dir == "" {
		if _, err := os.Stat(ref); err == nil || strings.ContainsAny(ref, `/\\.`) {
			f, err := os.Open(ref)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return agentfile.Load(f, ref)
		}
		return nil, usageError("--agent %s: no such file; give a path, or --agents DIR to look the name up in", ref)
	}
	defs, err := agentfile.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range defs {
		if d.Name == ref {
			return d, nil
		}
	}
	return nil, usageError("--agent %s: no agent of that name in %s", ref, dir)
}
