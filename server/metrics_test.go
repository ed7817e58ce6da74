package server_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestMetrics_Domain: the domain counters — runs by outcome, tool calls
// by tier and outcome, approvals pending, UAIP sessions — are on the
// Prometheus page /metrics and are OpenTelemetry metrics of
// Config.MeterProvider.
func TestMetrics_Domain(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	pub, _, _ := ed25519.GenerateKey(nil)
	cfg := supportConfig(t, nil, pub)
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	h := newServer(t, cfg).Handler()

	if code, body := do(t, h, "POST", "/initialize", "", `{"workflow_name":"store"}`); code != http.StatusOK {
		t.Fatalf("/initialize: %d %s", code, body)
	}
	// A refund waits for an approval (lookup_order read_only, then
	// refund_order write_high_risk); a status question delivers.
	if code, body := do(t, h, "POST", "/v1/runs", "", `{"agent":"support","input":"refund o-1001","wait":true}`); code != http.StatusOK || !strings.Contains(body, `"paused"`) {
		t.Fatalf("refund run: %d %s", code, body)
	}
	if code, body := do(t, h, "POST", "/v1/runs", "", `{"agent":"support","input":"status of o-1002?","wait":true}`); code != http.StatusOK || !strings.Contains(body, `"delivered"`) {
		t.Fatalf("status run: %d %s", code, body)
	}

	_, page := do(t, h, "GET", "/metrics", "", "")
	for _, want := range []string{
		`agentry_runs_total{outcome="success"} 1`,
		`agentry_tool_calls_total{tier="read_only",outcome="success"} 2`,
		`agentry_tool_calls_total{tier="write_high_risk",outcome="APPROVAL_REQUIRED"} 1`,
		`agentry_approvals_pending 1`,
		`agentry_uaip_sessions_total{workflow="store"} 1`,
	} {
		if !strings.Contains(page, want+"\n") {
			t.Errorf("/metrics has no line %q:\n%s", want, page)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+" "+attrs(p.Attributes)] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+" "+attrs(p.Attributes)] += p.Value
				}
			}
		}
	}
	want := map[string]int64{
		"agentry.runs outcome=success":                                                 1,
		"agentry.tool_calls outcome=success,uaicp.risk_tier=read_only":                 2,
		"agentry.tool_calls outcome=APPROVAL_REQUIRED,uaicp.risk_tier=write_high_risk": 1,
		"agentry.approvals.pending ":                                                   1,
		"agentry.uaip.sessions uaip.workflow=store":                                    1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OpenTelemetry metrics (-want +got):\n%s", diff)
	}
}

func attrs(s attribute.Set) string {
	var out []string
	for _, kv := range s.ToSlice() {
		out = append(out, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(out, ",")
}
