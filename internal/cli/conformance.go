package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentry-dev/agentry/conformance"
	"github.com/agentry-dev/agentry/messaging/uampconformance"
	"github.com/agentry-dev/agentry/workflow/uaipconformance"
	"github.com/spf13/cobra"
)

// conformanceCmd groups the conformance suites a server can be run
// against; "uaip" is UAIP-0.1's (workflow/uaipconformance), "uamp" UAMP
// 1.0's (messaging/uampconformance).
func conformanceCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run a protocol's black-box conformance suite against a server",
	}
	var url, wf, token string
	var timeout time.Duration
	var asJSON, readOnly bool
	uaip := &cobra.Command{
		Use:   "uaip",
		Short: "Check a UAIP-0.1 server (ours or anyone's) against the spec; calls its tasks (--read-only: only read-only ones)",
		Long: `Run the UAIP-0.1 conformance suite against the server at --url.

The checks are derived from the spec (github.com/concierge-hq/uaip) and from the
workflow schema the server publishes at GET /api/workflows/{name}: the
shapes of /initialize and of the schema, every row of the error table,
each /execute action (method calls with arguments generated from the
task's parameters schema), that a transition moves the session, that
sessions are independent, and that every response is JSON.

WARNING: the suite calls every task it can reach, with generated
arguments. Against a real server these are real calls with real side
effects (orders placed, payments made, messages sent). Run it against a
test deployment, or with --read-only: then only the tasks the published
workflow schema declares read-only (risk_tier "read_only") are called;
tasks that may write, or declare nothing, are skipped. The schema, error
and transition checks run either way (sessions, state_input and stage
transitions are the suite's own session's).

One line per check (PASS, FAIL with the expectation and what the server
did, or SKIP with the reason), then "N passed, M failed". The exit status
is 1 when a check failed.

Without --workflow the first workflow GET /api/workflows lists is tested
(an agentry extension; other servers need --workflow).`,
		Example: `  agentry conformance uaip --url http://127.0.0.1:8080
  agentry conformance uaip --url https://uaip.example.com --workflow store --token "$TOKEN" --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				return usageError("--url is required")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			rep := uaipconformance.Run(ctx, &uaipconformance.Options{BaseURL: url, Workflow: wf, BearerToken: token,
				HTTPClient: &http.Client{Timeout: timeout}, ReadOnly: readOnly})
			if err := writeReport(e.stdout, rep, rep.Results, asJSON); err != nil {
				return err
			}
			if n := rep.Failed(); n > 0 {
				return &exitError{code: 1, err: fmt.Errorf("uaip conformance: %d of %d checks failed against %s", n, len(rep.Results), url)}
			}
			return nil
		},
	}
	fl := uaip.Flags()
	fl.StringVar(&url, "url", "http://127.0.0.1:8080", "base URL of the UAIP server")
	fl.StringVar(&wf, "workflow", "", "workflow to test (default: the first one GET /api/workflows lists)")
	fl.StringVar(&token, "token", "", "bearer token the server requires")
	fl.DurationVar(&timeout, "timeout", 10*time.Second, "timeout of each request")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fl.BoolVar(&readOnly, "read-only", false, "call only the tasks the schema declares read-only (risk_tier read_only): no side effects on the server")
	cmd.AddCommand(uaip, conformanceUAMPCmd(e), conformanceUIAPCmd(e))
	return cmd
}

func conformanceUAMPCmd(e *env) *cobra.Command {
	var cf uampClientFlags
	var url, from, to string
	var timeout time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "uamp --url URL --key FILE",
		Short: "Check a UAMP 1.0 server (ours or anyone's) against the spec",
		Long: `Run the UAMP 1.0 conformance suite against the server at --url
(https://host:port) — messaging/uampconformance, over the network only.

The server must trust --key (the suite signs with it and authenticates
with a TLS client certificate made with it, or --cert/--cert-key) and
serve an echo agent: agentry serve's built-in one. The agent is the DID of
the server's signed hub unless --to names it.

Checks: signed discovery (hub and manifest), TLS 1.3 only (a TLS 1.2
handshake and plain HTTP refused), 415 for another media type, 413 beyond
the body limit, 401 without a client certificate and for unsigned,
tampered and unknown-key envelopes, 403 when from is not the principal
(needs a key with a bare kid), a replayed ask refused, the echo round
trip over SSE and WebSocket with a small window and ACKs, the window
itself, resume with Last-Event-ID, 4.09 for a resume the server cannot
fill, cancel, and that every stream was numbered without gaps.

One line per check (PASS, FAIL with the expectation and what the server
did, or SKIP with the reason), then "N passed, M failed". The exit status
is 1 when a check failed.`,
		Example: `  agentry uamp keygen --out conf.jwk > conf.pub.jwk
  agentry serve --uamp-trust conf.pub.jwk &
  agentry conformance uamp --url https://127.0.0.1:8443 --key conf.jwk --ca agentry-data/tls/cert.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := parseServerURL(url)
			if err != nil {
				return err
			}
			key, err := cf.load()
			if err != nil {
				return err
			}
			conf, err := cf.serverTLS(u)
			if err != nil {
				return err
			}
			opts := uampconformance.Options{BaseURL: url, Key: key, From: from, To: to, RootCAs: conf.RootCAs,
				InsecureSkipVerify: conf.InsecureSkipVerify, Timeout: timeout}
			if cf.cert != "" {
				c, err := cf.clientCertificate(key, "")
				if err != nil {
					return err
				}
				opts.Certificate = &c
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			rep := uampconformance.Run(ctx, &opts)
			if err := writeReport(e.stdout, rep, rep.Results, asJSON); err != nil {
				return err
			}
			if n := rep.Failed(); n > 0 {
				return &exitError{code: 1, err: fmt.Errorf("uamp conformance: %d of %d checks failed against %s", n, len(rep.Results), url)}
			}
			return nil
		},
	}
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&url, "url", "https://127.0.0.1:8443", "base URL of the UAMP server")
	fl.StringVar(&from, "from", "", "the principal the suite speaks as (default: the DID of --key's kid, else did:web:uamp-conformance.invalid)")
	fl.StringVar(&to, "to", "", "the agent's DID (default: the DID of the server's signed hub)")
	fl.DurationVar(&timeout, "timeout", 15*time.Second, "timeout of each check")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// writeReport prints a conformance kit's report: rep as indented JSON, or
// one line per check and then "N passed, M failed (K skipped)".
func writeReport(w io.Writer, rep any, results conformance.Results, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	for _, r := range results {
		fmt.Fprintln(w, r)
	}
	summary := fmt.Sprintf("%d passed, %d failed", results.Passed(), results.Failed())
	if n := results.Skipped(); n > 0 {
		summary += fmt.Sprintf(" (%d skipped)", n)
	}
	_, err := fmt.Fprintln(w, summary)
	return err
}
