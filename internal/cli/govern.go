package cli

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentry-dev/agentry/agentfile"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/approverkey"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/models"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/server"
)

// governance sets cfg's governance (--policy, --approvers, --node) and
// its agents: those defs define (serveAgents), whose builtin refunds the
// governor can roll back.
func governance(e *env, f *serveFlags, cfg *server.Config, defs []*agentfile.Definition, logger *slog.Logger) (*agentfile.Options, error) {
	keys, keyringPath, err := loadApprovers(f, logger)
	if err != nil {
		return nil, err
	}
	var policy govern.Policy
	if f.policy != "" {
		if policy, err = govern.LoadRulePolicy(f.policy); err != nil {
			return nil, err
		}
	}
	if f.agentModel != "" { // refused early, as a usage error, not as the agent file's
		if _, err := models.Resolve(f.agentModel, f.agentBaseURL); err != nil {
			return nil, usageError("--agent-model: %v", err)
		}
	}
	ledger := builtin.NewLedger()
	cfg.Governance = &govern.Options{
		Node: f.node, Policy: policy, Keyring: keys,
		Rollbacks: map[string]govern.RollbackFunc{builtin.RefundReversal: ledger.RollbackHandler()},
	}
	opts := &agentfile.Options{Builtins: builtinTools(ledger), WorkflowToken: f.token, LookupEnv: agentEnv(f)}
	if cfg.Listener != nil { // the server's own workflows, over its plain port
		opts.WorkflowURL = "http://" + cfg.Listener.Addr().String()
	}
	if u := cfg.UAMP; u != nil && u.Key != nil { // uamp tools ask as the server's UAMP identity
		cert, err := messaging.KeyCertificate(u.Key, u.DID, 0)
		if err != nil {
			return nil, fmt.Errorf("agents: a client certificate for uamp tools: %w", err)
		}
		opts.UAMP = &messaging.ClientOptions{Key: u.Key, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}
	}
	if err := agentfile.Build(cfg, defs, opts); err != nil {
		return nil, fmt.Errorf("agents:\n%w", err)
	}
	n := len(keys.Keys())
	logger.Info("governance", "approver_keys", n, "keyring", keyringPath)
	if n == 0 {
		fmt.Fprintf(e.stderr, "agentry: no approver keys trusted yet: high-risk calls wait for approvals nobody can give (create one: agentry keys create NAME --dir %s; the server picks it up without a restart)\n", filepath.Dir(keyringPath))
	}
	return opts, nil
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
