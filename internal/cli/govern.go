package cli

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/agentry-dev/agentry/govern/approverkey"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/models"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/runs"
	"github.com/agentry-dev/agentry/store"
)

// governance is what agentry serve mounts for UAICP: the approval API and
// the governed runs of the built-in agents.
type governance struct {
	g         *govern.Governor
	runs      *runs.Service
	approvals http.Handler
	runsHTTP  http.Handler
}

// startGovernance builds the governor on the store's journal, recovers
// what a crash left open, and starts the run service, resuming runs whose
// approvals were decided while no server ran.
func startGovernance(ctx context.Context, e *env, f *serveFlags, st *store.Store, logger *slog.Logger) (*governance, error) {
	keys, keyringPath, err := loadApprovers(f, logger)
	if err != nil {
		return nil, err
	}
	var policy govern.Policy
	if f.policy != "" {
		p, err := govern.LoadRulePolicy(f.policy)
		if err != nil {
			return nil, err
		}
		policy = p
	}
	ledger := builtin.NewLedger()
	var svc *runs.Service
	g, err := govern.New(ctx, govern.Options{
		Journal: st.Journal(), Node: f.node, Policy: policy, Keyring: keys, Logger: logger,
		Classes:    []govern.TaskClass{builtin.SupportClass()},
		Rollbacks:  map[string]govern.RollbackFunc{builtin.RefundReversal: ledger.RollbackHandler()},
		OnDecision: func(req govern.ApprovalRequest) { svc.OnDecision(req) },
	})
	if err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	rep, err := g.Recover(ctx)
	if err != nil {
		return nil, fmt.Errorf("governance: recovering the journal: %w", err)
	}
	if len(rep.Closed) > 0 || rep.RollbackFailures > 0 {
		logger.Warn("governed runs left open by a crash were closed", "runs", len(rep.Closed), "rolled_back", rep.RolledBack, "rollback_failures", rep.RollbackFailures)
	}
	if len(rep.Resumable) > 0 {
		logger.Info("governed runs whose resume a crash interrupted continue", "runs", len(rep.Resumable))
	}
	model := builtin.SupportModel().Ref()
	if f.agentModel != "" {
		if model, err = models.Resolve(f.agentModel, f.agentBaseURL); err != nil {
			return nil, usageError("--agent-model: %v", err)
		}
	}
	support, err := agent.New(agent.Options{
		LLMOptions: llm.LLMOptions{Model: model, Tools: builtin.SupportTools(ledger),
			System: "You are a support agent. Look orders up before answering; refund only when asked."},
		Middleware: []agent.Middleware{g.Middleware(govern.AgentOptions{Name: builtin.SupportAgentName, TaskClass: builtin.SupportTaskClass,
			Identity: govern.Identity{AgentID: "agent:support", OwnerID: "agentry:serve", ControlClass: govern.HumanSupervised}})},
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	svc, err = runs.New(ctx, &runs.Options{Governor: g, Agents: map[string]*agent.Agent{builtin.SupportAgentName: support}, Results: st.Checkpoints(), Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := svc.ResumeDecided(ctx); err != nil {
		logger.Error("resuming decided runs", "error", err)
	}
	n := len(keys.Keys())
	logger.Info("governance", "approver_keys", n, "keyring", keyringPath, "paused_runs", len(rep.Paused))
	if n == 0 {
		fmt.Fprintf(e.stderr, "agentry: no approver keys trusted yet: high-risk calls wait for approvals nobody can give (create one: agentry keys create NAME --dir %s; the server picks it up without a restart)\n", filepath.Dir(keyringPath))
	}
	return &governance{g: g, runs: svc,
		approvals: approvalapi.NewHandler(g, approvalapi.Options{BearerToken: f.token, Logger: logger}),
		runsHTTP:  bearer(f.token, svc.Handler()),
	}, nil
}

// loadApprovers opens --approvers, which must exist, or the keyring of
// agentry keys under --data, which may not exist yet. The server follows
// the file (govern.OpenKeyring): keys created while it runs are trusted
// at their first use, keys removed stop being trusted.
func loadApprovers(f *serveFlags, logger *slog.Logger) (*govern.Keyring, string, error) {
	path := f.approvers
	if path == "" {
		path = approverkey.Dir(filepath.Join(f.data, "keys")).KeyringPath()
	} else if _, err := os.Stat(path); err != nil {
		return nil, "", fmt.Errorf("approvers: %w", err)
	}
	hint := "add the approver's public key to the keyring file"
	if filepath.Base(path) == approverkey.KeyringFile {
		hint = fmt.Sprintf("add it with `agentry keys create NAME --dir %s`", filepath.Dir(path))
	}
	k, err := govern.OpenKeyring(path, &govern.KeyringOptions{Hint: hint, Logger: logger})
	if err != nil {
		return nil, "", fmt.Errorf("approvers: %w", err)
	}
	return k, path, nil
}

// bearer requires "Authorization: Bearer <token>" when token is set.
func bearer(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentry"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"UNAUTHORIZED","message":"a valid bearer token is required"}}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
