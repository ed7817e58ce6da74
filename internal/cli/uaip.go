package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentry-dev/agentry/workflow"
	"github.com/spf13/cobra"
)

// uaipCmd groups the UAIP client commands, for people poking at a server.
func uaipCmd(e *env) *cobra.Command {
	var url, token string
	client := func() *workflow.Client {
		return workflow.NewClient(url, &workflow.ClientOptions{BearerToken: token})
	}
	cmd := &cobra.Command{
		Use:   "uaip",
		Short: "Talk to a UAIP server: list workflows, start sessions, run actions",
		Example: `  agentry uaip workflows
  S=$(agentry uaip init store -q)
  agentry uaip exec -s $S -w store --task search_products --args '{"category":"coffee"}'
  agentry uaip exec -s $S -w store --stage cart
  agentry uaip exec -s $S -w store --task add_to_cart --args '{"product_id":"SKU-001","quantity":2}'
  agentry uaip exec -s $S -w store --state '{"user.email":"ada@example.com"}'
  agentry uaip exec -s $S -w store --stage checkout
  agentry uaip session $S`,
	}
	cmd.PersistentFlags().StringVar(&url, "url", "http://127.0.0.1:8080", "server base URL")
	cmd.PersistentFlags().StringVar(&token, "token", "", "bearer token")
	print := func(v any) error {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	cmd.AddCommand(&cobra.Command{
		Use: "workflows [NAME]", Short: "List the workflows, or show one's schema", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				w, err := client().Workflow(cmd.Context(), args[0])
				if err != nil {
					return uaipError(err)
				}
				return print(w)
			}
			ws, err := client().Workflows(cmd.Context())
			if err != nil {
				return uaipError(err)
			}
			return print(ws)
		},
	})
	var quiet bool
	initCmd := &cobra.Command{
		Use: "init WORKFLOW", Short: "Start a session: its id, workflow, initial stage and stages as JSON (-q: the id only)",
		Example: `  agentry uaip init store
  S=$(agentry uaip init store -q)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := client().Initialize(cmd.Context(), args[0])
			if err != nil {
				return uaipError(err)
			}
			if quiet {
				_, err := fmt.Fprintln(e.stdout, r.SessionID)
				return err
			}
			return print(r)
		},
	}
	initCmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the session id (for S=$(agentry uaip init NAME -q))")
	cmd.AddCommand(initCmd)
	cmd.AddCommand(&cobra.Command{
		Use: "session ID", Short: "Show a session's stage and state", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := client().Session(cmd.Context(), args[0])
			if err != nil {
				return uaipError(err)
			}
			return print(s)
		},
	})
	var session, wf, task, argsJSON, stage, stateJSON string
	exec := &cobra.Command{
		Use: "exec", Short: "Run one action: --task (with --args), --stage or --state", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &workflow.ExecuteRequest{WorkflowName: wf}
			set := 0
			if task != "" {
				set++
				req.Action, req.Task = workflow.ActionMethodCall, task
				if argsJSON != "" {
					if err := json.Unmarshal([]byte(argsJSON), &req.Args); err != nil {
						return usageError("--args is not a JSON object: %v", err)
					}
				}
			}
			if stage != "" {
				set++
				req.Action, req.Stage = workflow.ActionStageTransition, stage
			}
			if stateJSON != "" {
				set++
				req.Action = workflow.ActionStateInput
				if err := json.Unmarshal([]byte(stateJSON), &req.StateUpdates); err != nil {
					return usageError("--state is not a JSON object: %v", err)
				}
			}
			if set != 1 || session == "" || wf == "" {
				return usageError("exec needs --session, --workflow and exactly one of --task, --stage, --state")
			}
			r, err := client().Execute(cmd.Context(), session, req)
			if err != nil {
				return uaipError(err)
			}
			return print(r)
		},
	}
	exec.Flags().StringVarP(&session, "session", "s", "", "session id")
	exec.Flags().StringVarP(&wf, "workflow", "w", "", "workflow name")
	exec.Flags().StringVar(&task, "task", "", "task to call (method_call)")
	exec.Flags().StringVar(&argsJSON, "args", "", "task arguments as a JSON object")
	exec.Flags().StringVar(&stage, "stage", "", "stage to move to (stage_transition)")
	exec.Flags().StringVar(&stateJSON, "state", "", "state updates as a JSON object (state_input)")
	cmd.AddCommand(exec)
	return cmd
}

// uaipError adds the server's machine-readable extras to its detail.
func uaipError(err error) error {
	var we *workflow.Error
	if !errors.As(err, &we) {
		return err
	}
	msg := fmt.Sprintf("HTTP %d: %s", we.Status, we.Detail)
	if len(we.Missing) > 0 {
		msg += fmt.Sprintf(" (missing state: %v)", we.Missing)
	}
	for _, fe := range we.Errors {
		msg += "; " + fe.String()
	}
	if len(we.Allowed) > 0 {
		msg += fmt.Sprintf(" (allowed: %v)", we.Allowed)
	}
	return fmt.Errorf("%s", msg)
}
