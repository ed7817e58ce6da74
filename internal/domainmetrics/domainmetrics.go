// Package domainmetrics counts what agentry's operators ask about — runs
// by outcome, tool calls by risk tier and outcome, UAIP sessions, UAMP
// envelopes refused by code — once, for two readers: OpenTelemetry (the
// counters of the meter provider a library is given in its options, nil
// the global one) and the Prometheus page /metrics (WriteTo).
//
// The metrics of one meter provider are one process-wide set (Of), so
// that the libraries the server composes (govern, workflow, messaging)
// and the server's /metrics page meet without passing anything but the
// provider they already share.
package domainmetrics

import (
	"context"
	"io"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentry-dev/agentry/internal/metrics"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// The OpenTelemetry instrument names and their Prometheus families.
const (
	Runs         = "agentry.runs"                   // agentry_runs_total{outcome}
	ToolCalls    = "agentry.tool_calls"             // agentry_tool_calls_total{tier,outcome}
	UAIPSessions = "agentry.uaip.sessions"          // agentry_uaip_sessions_total{workflow}
	UAMPRefused  = "agentry.uamp.envelopes.refused" // agentry_uamp_envelopes_refused_total{code}
	// ApprovalsPending is the gauge the server reports from its
	// governor (agentry_approvals_pending).
	ApprovalsPending = "agentry.approvals.pending"
)

// Attribute names of the domain metrics.
const (
	Outcome  = attribute.Key("outcome")
	UAMPCode = attribute.Key("uamp.code")
)

// Metrics are the domain counters of one meter provider. A nil
// *Metrics counts nothing.
type Metrics struct {
	reg                                metrics.Registry
	runs, tools, sessions, refused     *metrics.CounterVec
	oRuns, oTools, oSessions, oRefused metric.Int64Counter
}

var byProvider sync.Map // metric.MeterProvider (nil: globalKey) → *Metrics

type globalKey struct{}

// Of returns the domain metrics of mp (nil: the global provider),
// created once per provider.
func Of(mp metric.MeterProvider) *Metrics {
	var key any = mp
	if mp == nil {
		key = globalKey{}
	}
	if m, ok := byProvider.Load(key); ok {
		return m.(*Metrics)
	}
	m := &Metrics{}
	m.runs = m.reg.NewCounterVec("agentry_runs_total", "Governed runs ended, by outcome (success: delivered, failure: fail-safe).", "outcome")
	m.tools = m.reg.NewCounterVec("agentry_tool_calls_total", "Governed tool calls by effective risk tier and outcome (success, or the UAICP reason code of the refusal or failure).", "tier", "outcome")
	m.sessions = m.reg.NewCounterVec("agentry_uaip_sessions_total", "UAIP sessions initialised, by workflow.", "workflow")
	m.refused = m.reg.NewCounterVec("agentry_uamp_envelopes_refused_total", "UAMP envelopes refused, by UAMP error code.", "code")
	meter := telemetry.Meter(mp)
	// Errors only name a broken SDK; the instruments returned are no-ops then.
	m.oRuns, _ = meter.Int64Counter(Runs, metric.WithDescription("Governed runs ended, by outcome."), metric.WithUnit("{run}"))
	m.oTools, _ = meter.Int64Counter(ToolCalls, metric.WithDescription("Governed tool calls by risk tier and outcome."), metric.WithUnit("{call}"))
	m.oSessions, _ = meter.Int64Counter(UAIPSessions, metric.WithDescription("UAIP sessions initialised."), metric.WithUnit("{session}"))
	m.oRefused, _ = meter.Int64Counter(UAMPRefused, metric.WithDescription("UAMP envelopes refused, by error code."), metric.WithUnit("{envelope}"))
	got, _ := byProvider.LoadOrStore(key, m)
	return got.(*Metrics)
}

// Run counts a governed run that ended with outcome ("success",
// "failure").
func (m *Metrics) Run(ctx context.Context, outcome string) {
	if m == nil {
		return
	}
	m.runs.Inc(outcome)
	if m.oRuns.Enabled(ctx) { // no attribute set built for a no-op meter
		m.oRuns.Add(ctx, 1, metric.WithAttributes(Outcome.String(outcome)))
	}
}

// ToolCall counts a governed tool call of an effective tier with its
// outcome.
func (m *Metrics) ToolCall(ctx context.Context, tier, outcome string) {
	if m == nil {
		return
	}
	m.tools.Inc(tier, outcome)
	if m.oTools.Enabled(ctx) { // no attribute set built for a no-op meter
		m.oTools.Add(ctx, 1, metric.WithAttributes(telemetry.UAICPRiskTier.String(tier), Outcome.String(outcome)))
	}
}

// UAIPSession counts a UAIP session initialised on workflow.
func (m *Metrics) UAIPSession(ctx context.Context, workflow string) {
	if m == nil {
		return
	}
	m.sessions.Inc(workflow)
	if m.oSessions.Enabled(ctx) { // no attribute set built for a no-op meter
		m.oSessions.Add(ctx, 1, metric.WithAttributes(telemetry.UAIPWorkflow.String(workflow)))
	}
}

// UAMPRefused counts an envelope refused with a UAMP error code.
func (m *Metrics) UAMPRefused(ctx context.Context, code string) {
	if m == nil {
		return
	}
	m.refused.Inc(code)
	if m.oRefused.Enabled(ctx) { // no attribute set built for a no-op meter
		m.oRefused.Add(ctx, 1, metric.WithAttributes(UAMPCode.String(code)))
	}
}

// WriteTo writes the counters in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) { return m.reg.WriteTo(w) }
