// Package conformance is a black-box conformance suite for servers of
// UAIP-0.1 (github.com/concierge-hq/uaip), ours or anyone else's: Run talks to a
// server over HTTP only, derives its checks from the spec's text and from
// the workflow schema the server publishes (GET /api/workflows/{name}),
// and returns a Report with one Result per check, each named after the
// spec clause it tests.
//
// What it checks: the shapes of POST /initialize (session_id as a UUID,
// workflow, initial_stage, stages, the X-Session-Id header) and of GET
// /api/workflows/{name}; every row of the spec's error table (400, 404,
// 422, each a JSON object with a string "detail"); each /execute action
// (method_call with arguments generated from the task's parameters
// schema, stage_transition along the graph, state_input); that a
// transition moves the session; that sessions are independent of each
// other; and that every response is application/json.
//
// Tasks whose parameters cannot be satisfied generically (a pattern, an
// unknown format, $ref, combinators…) are reported as skipped, not failed.
//
// Run calls the server's tasks with generated arguments: against a real
// server, that has real effects (orders placed, messages sent). With
// Options.ReadOnly it calls only the tasks the published schema declares
// read-only (risk_tier "read_only").
package uaipconformance

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/conformance"
)

// Options configures Run. BaseURL is required.
type Options struct {
	// BaseURL is the server's root, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// Workflow names the workflow to test. When empty, Run takes the first
	// workflow GET /api/workflows lists (an agentry extension); against a
	// server without that endpoint it must be set.
	Workflow string
	// HTTPClient sends the requests; nil uses a client with a 10 s timeout.
	HTTPClient *http.Client
	// BearerToken, when set, is sent as "Authorization: Bearer …".
	BearerToken string
	// ReadOnly calls only the tasks the workflow schema declares
	// read-only (risk_tier "read_only"); the others, and those that
	// declare nothing, are skipped. Without it, Run calls every task it
	// can reach with generated arguments — on a real server, real side
	// effects. Session-local actions (state_input, stage_transition) and
	// the error checks run either way.
	ReadOnly bool
}

// result is the outcome of one check: conformance.Result, the type the
// three conformance kits share.
type result = conformance.Result

// Report is the outcome of Run.
type Report struct {
	BaseURL  string `json:"base_url"`
	Workflow string `json:"workflow"`
	// ReadOnly reports that only read-only tasks were called.
	ReadOnly bool `json:"read_only,omitempty"`
	// Results lists the checks (Passed, Failed, Skipped, Find).
	conformance.Results `json:"results"`
}

// The spec clauses the checks are named after.
const (
	clauseTransport      = "Transport: Content-Type application/json"
	clauseInitResponse   = "POST /initialize: Response"
	clauseInitHeader     = "POST /initialize: Headers (response includes X-Session-Id)"
	clauseSchema         = "GET /api/workflows/{name}: Response"
	clauseErrorShape     = "Errors: a JSON object with a detail field"
	clause400Body        = "Errors: 400 Missing or invalid request body"
	clause400Header      = "Errors: 400 Missing X-Session-Id header on /execute"
	clause404Workflow    = "Errors: 404 Workflow not found"
	clause404Session     = "Errors: 404 Session not found"
	clause422Action      = "Errors: 422 Invalid action type"
	clause422Task        = "Errors: 422 Task not in current stage"
	clause422Transition  = "Errors: 422 Invalid stage transition"
	clauseMethodCall     = "POST /execute: Action method_call"
	clauseTransition     = "POST /execute: Action stage_transition"
	clauseStateInput     = "POST /execute: Action state_input"
	clauseSessionIsolate = "Types: Session (a stateful interaction context bound to a workflow instance)"
)

// Run runs the suite against the server at opts.BaseURL. It never
// returns nil; a server that cannot be reached yields failed checks.
func Run(ctx context.Context, options *Options) *Report {
	var opts Options
	if options != nil {
		opts = *options
	}
	r := &runner{opts: opts, base: strings.TrimRight(opts.BaseURL, "/"), hc: opts.HTTPClient}
	if r.hc == nil {
		r.hc = &http.Client{Timeout: 10 * time.Second}
	}
	r.report = &Report{BaseURL: r.base, Workflow: opts.Workflow, ReadOnly: opts.ReadOnly}
	r.run(ctx)
	return r.report
}
