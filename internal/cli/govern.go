package cli

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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
		b, err := os.ReadFile(f.policy)
		if err != nil {
			return nil, err
		}
		if policy, err = govern.ParseRulePolicy(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.policy, err)
		}
	}
	if f.agentModel != "" { // refused early, as a usage error, not as the agent file's
		if _, err := models.Resolve(f.agentModel, f.agentBaseURL); err != nil {
			return nil, usageError("--agent-model: %v", err)
		}
	}
	ledger := builtin.NewLedger()
	node := f.node
	if node == "" {
		if node, err = defaultNode(f.data); err != nil {
			return nil, err
		}
	}
	cfg.Governance = &govern.Options{
		Node: node, Lease: f.runLease, Policy: policy, Keyring: keys,
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

// defaultNode returns the node name kept in <data>/node, made ("node-"
// and 8 random hex digits) on the first start: stable across restarts,
// so that a restarted replica takes its runs back at once, and distinct
// for replicas with distinct --data.
func defaultNode(data string) (string, error) {
	path := filepath.Join(data, "node")
	if b, err := os.ReadFile(path); err == nil {
		name := strings.TrimSpace(string(b))
		if name == "" || strings.ContainsAny(name, " \t\r\n/") || len(name) > 128 {
			return "", fmt.Errorf("%s: not a node name (%q); delete it to make a new one", path, name)
		}
		return name, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := "node-" + hex.EncodeToString(b[:])
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(name+"\n"), 0o644); err != nil {
		return "", err
	}
	return name, nil
}
