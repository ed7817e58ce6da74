package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/agentry-dev/agentry/internal/approverkey"
	"github.com/spf13/cobra"
)

// defaultServer is the server the approval commands talk to unless
// --server or AGENTRY_SERVER say otherwise.
const defaultServer = "http://127.0.0.1:8080"

// serverFlags are the flags of the commands that call the approval API.
type serverFlags struct {
	server, bearer string
}

func (f *serverFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", defaultServer, "agentry server base URL (env AGENTRY_SERVER)")
	cmd.Flags().StringVar(&f.bearer, "bearer", "", "bearer token for the server (env AGENTRY_TOKEN)")
}

func (f *serverFlags) client(cmd *cobra.Command) *approvalapi.Client {
	fromEnv(cmd, "server", "AGENTRY_SERVER", &f.server)
	fromEnv(cmd, "bearer", "AGENTRY_TOKEN", &f.bearer)
	return &approvalapi.Client{BaseURL: f.server, BearerToken: f.bearer}
}

// apiError words an error answer of the approval API as code, message
// and status.
func apiError(err error) error {
	var ae *approvalapi.Error
	if !errors.As(err, &ae) {
		return err
	}
	if ae.Code == "" {
		return fmt.Errorf("HTTP %d: %s", ae.Status, ae.Message)
	}
	return fmt.Errorf("%s: %s (HTTP %d)", ae.Code, ae.Message, ae.Status)
}

func approvalsCmd(e *env) *cobra.Command {
	var sf serverFlags
	var all, jsonOut bool
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the approval requests waiting on a server (UAICP 0.3 §5.3)",
		Long: `List the approval requests of write_high_risk tool calls waiting on an agentry
server: id, tool, tier, requesting agent, creation time and status, and
under each the call's arguments and its rollback action — what approving
it lets happen and how it would be undone. --all adds the requests already
decided (of runs still open); --json prints the requests as JSON,
{"approvals":[…]}, arguments as "args" and the rollback action as
"rollback_action". Decide one with agentry approve.`,
		Example: `  agentry approvals
  agentry approvals --all --server https://agentry.internal:8443`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := sf.client(cmd).List(cmd.Context(), all)
			if err != nil {
				return apiError(err)
			}
			if jsonOut {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"approvals": list})
			}
			if len(list) == 0 {
				if all {
					fmt.Fprintln(e.stderr, "no approval requests")
				} else {
					fmt.Fprintln(e.stderr, "no pending approval requests")
				}
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTOOL\tTIER\tREQUESTER\tCREATED\tSTATUS")
			for _, a := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(a.ID), printable(a.Tool), a.Tier, printable(a.Requester.AgentID),
					a.CreatedAt.UTC().Format(time.RFC3339), printable(a.Status))
				// The detail lines' last cell is not part of a column: a
				// long argument list does not widen the table.
				fmt.Fprintf(tw, "\targuments\t%s\n", printable(argumentsText(a.Args)))
				fmt.Fprintf(tw, "\trollback\t%s\n", printable(rollbackText(a.Rollback)))
			}
			return tw.Flush()
		},
	}
	sf.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "include decided requests")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

type approveFlags struct {
	serverFlags
	as, dir, keyFile string
	deny             bool
	reason           string
	ttl              time.Duration
}

func approveCmd(e *env) *cobra.Command {
	var f approveFlags
	cmd := &cobra.Command{
		Use:   "approve ID (--as NAME [--dir DIR] | --key FILE) [--deny [--reason TEXT]]",
		Short: "Approve (or deny) a pending tool call with an approver key",
		Long: `Decide a pending approval request (UAICP 0.3 §5.3). The request is fetched and
shown — tool, tier, arguments, rollback action, requester — then approved with
an approval token signed by the approver's key and bound to exactly this
call: its run, tool, tier, arguments, rollback action and attempt. The token
is valid for --ttl (at most 24h) and can be used once.

The key is NAME's in the key directory (--as NAME, --dir default
$AGENTRY_KEYS_DIR or ` + defaultKeysDir + `) or a key file (--key). With --deny the
call is denied instead, in the approver's name; a denial is not signed.

Exit status: 0 when the request was decided, 1 otherwise (an invalid token is
reported with its code, APPROVAL_INVALID), 2 on misuse.`,
		Example: `  agentry approvals
  agentry approve 3f2a… --as alice
  agentry approve 3f2a… --key ~/.agentry/alice.key.json --server https://agentry.internal:8443
  agentry approve 3f2a… --as alice --deny --reason "refunds are frozen"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runApprove(cmd, e, &f, args[0]) },
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.as, "as", "", "approver name: use DIR/NAME.key.json")
	fl.StringVar(&f.dir, "dir", defaultKeysDir, "key directory (env AGENTRY_KEYS_DIR)")
	fl.StringVar(&f.keyFile, "key", "", "approver key file (instead of --as)")
	fl.BoolVar(&f.deny, "deny", false, "deny the call instead of approving it")
	fl.StringVar(&f.reason, "reason", "", "why the call is denied (with --deny)")
	fl.DurationVar(&f.ttl, "ttl", approvalapi.DefaultTokenTTL, "lifetime of the approval token")
	return cmd
}

func runApprove(cmd *cobra.Command, e *env, f *approveFlags, id string) error {
	switch {
	case (f.as == "") == (f.keyFile == ""):
		return usageError("approve needs exactly one of --as NAME and --key FILE")
	case f.reason != "" && !f.deny:
		return usageError("--reason goes with --deny")
	case f.deny && cmd.Flags().Changed("ttl"):
		return usageError("--ttl goes with approvals; a denial carries no token")
	case f.ttl <= 0 || f.ttl > govern.MaxTokenLifetime:
		return usageError("--ttl must be positive and at most %s", govern.MaxTokenLifetime)
	case f.as != "" && !approverkey.ValidName(f.as):
		return usageError("--as %q is not an approver name", f.as)
	}
	fromEnv(cmd, "dir", "AGENTRY_KEYS_DIR", &f.dir)

	// The key first: a local problem should not cost a round trip.
	approver := f.as
	var key *approverkey.Key
	if !f.deny || f.keyFile != "" {
		var err error
		if f.keyFile != "" {
			key, err = approverkey.ReadKeyFile(f.keyFile)
		} else {
			key, err = approverkey.Dir(f.dir).Key(f.as)
		}
		if errors.Is(err, fs.ErrNotExist) && f.keyFile == "" {
			return fmt.Errorf("approver %s has no key in %s; create one with: agentry keys create %s --dir %s", f.as, f.dir, f.as, f.dir)
		}
		if err != nil {
			return fmt.Errorf("approver key: %w", err)
		}
		approver = key.Approver
	}

	c := f.client(cmd)
	ctx := cmd.Context()
	req, err := c.Get(ctx, id)
	if err != nil {
		return apiError(err)
	}
	describeApproval(e.stdout, &req)
	if req.Status != govern.StatusPending {
		by := ""
		if req.Decision != nil {
			by = " by " + req.Decision.Approver
		}
		return fmt.Errorf("approval request %s is already %s%s", req.ID, req.Status, by)
	}

	var decided govern.ApprovalRequest
	if f.deny {
		decided, err = c.Deny(ctx, id, approver, f.reason)
	} else {
		token, serr := approvalapi.Sign(key.Approver, key.Private, req, f.ttl)
		if serr != nil {
			return fmt.Errorf("not signing: %w", serr)
		}
		decided, err = c.Approve(ctx, id, token)
	}
	if err != nil {
		return apiError(err)
	}
	d := decided.Decision
	if d == nil {
		return fmt.Errorf("the server answered without a decision")
	}
	fmt.Fprintf(e.stdout, "\n%s by %s", decided.Status, d.Approver)
	if d.TokenID != "" {
		fmt.Fprintf(e.stdout, " (token %s)", d.TokenID)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// describeApproval prints what an approval would approve.
func describeApproval(w io.Writer, a *govern.ApprovalRequest) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, printable(v)) }
	row("approval", a.ID)
	row("status", a.Status)
	row("tool", fmt.Sprintf("%s (%s)", a.Tool, a.Tier))
	row("arguments", argumentsText(a.Args))
	row("rollback", rollbackText(a.Rollback))
	who := "agent " + a.Requester.AgentID + ", owner " + a.Requester.OwnerID
	if a.Requester.UserID != "" {
		who += ", user " + a.Requester.UserID
	}
	row("requester", fmt.Sprintf("%s (%s)", who, a.Requester.ControlClass))
	row("run", fmt.Sprintf("request %s, trace %s, call %s, attempt %d", a.RequestID, a.TraceID, a.CallID, a.Attempt))
	if len(a.Reasons) > 0 {
		rs := make([]string, len(a.Reasons))
		for i, r := range a.Reasons {
			rs[i] = string(r)
		}
		row("reasons", strings.Join(rs, ", "))
	}
	if a.Policy != nil && a.Policy.Rule != "" {
		row("policy", fmt.Sprintf("%s (rule %s)", a.Policy.Effect, a.Policy.Rule))
	}
	row("requested", a.CreatedAt.UTC().Format(time.RFC3339))
	tw.Flush()
}

// argumentsText shows a call's arguments: their JSON, "none" when empty.
func argumentsText(args json.RawMessage) string {
	if len(args) == 0 || string(args) == "null" {
		return "none"
	}
	return string(args)
}

// rollbackText shows a rollback action: its type, target and payload, or
// "none".
func rollbackText(rb *govern.RollbackAction) string {
	if rb == nil {
		return "none"
	}
	s := rb.Type
	if rb.Target != "" {
		s += " on " + rb.Target
	}
	if rb.Payload != nil {
		if p, err := json.Marshal(rb.Payload); err == nil {
			s += " " + string(p)
		}
	}
	return s
}

// printable escapes the control and format characters of s (an agent
// chose most of what is shown): what the approver reads must be what is
// there, not what a terminal escape sequence or a bidi override makes of
// it.
func printable(s string) string {
	hidden := func(r rune) bool { return unicode.In(r, unicode.Cc, unicode.Cf) || r == utf8.RuneError }
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hidden(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
