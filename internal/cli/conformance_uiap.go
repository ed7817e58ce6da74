package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/agentry-dev/agentry/uicontrol/uiapconformance"
	"github.com/spf13/cobra"
)

func conformanceUIAPCmd(e *env) *cobra.Command {
	var url, token string
	var timeout time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "uiap",
		Short: "Check a UIAP Core 0.1 app endpoint (ours or anyone's) against the spec",
		Long: `Run the UIAP Core 0.1 conformance suite against the app endpoint at --url
(the ws@0.1 binding), connecting as an agent: the handshake, version
negotiation, nothing before the handshake, the envelope rules (missing
field, non-object payload, version mismatch, duplicate id, unknown type),
capabilities.get with include, ping/pong, a second initialize, an invalid
resume token (over an interrupted session's own connection, and for an
unknown session), exactly one answer to every request before the
handshake, while active and while interrupted, and silence after
termination. Each check opens its own session; a request left unanswered
fails its check after --timeout.

One line per check (PASS, or FAIL with the expectation and what the app
did), then "N passed, M failed". The exit status is 1 when a check failed.`,
		Example: `  agentry conformance uiap --url 'ws://127.0.0.1:8080/uiap/ws?workflow=store'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fromEnv(cmd, "token", "AGENTRY_TOKEN", &token)
			header := http.Header{}
			if token != "" {
				header.Set("Authorization", "Bearer "+token)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			rep, err := uiapconformance.Run(ctx, &uiapconformance.Options{URL: url, Header: header, Timeout: timeout})
			if err != nil {
				return usageError("%v", err)
			}
			if err := writeReport(e.stdout, rep, rep.Results, asJSON); err != nil {
				return err
			}
			if n := rep.Failed(); n > 0 {
				return &exitError{code: 1, err: fmt.Errorf("uiap conformance: %d of %d checks failed against %s", n, len(rep.Results), url)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&url, "url", "ws://127.0.0.1:8080/uiap/ws", "the app's ws@0.1 endpoint")
	fl.StringVar(&token, "token", "", "bearer token for the endpoint (env AGENTRY_TOKEN)")
	fl.DurationVar(&timeout, "timeout", 10*time.Second, "timeout of each check")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
