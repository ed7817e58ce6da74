package messaging

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentry-dev/agentry/internal/domainmetrics"
)

// TestUAMP_Metrics_RefusedByCode: every error envelope a Server answers
// is counted by its UAMP code, as the OpenTelemetry counter
// agentry.uamp.envelopes.refused of Options.MeterProvider and on the
// Prometheus page of the same provider's domain metrics.
func TestUAMP_Metrics_RefusedByCode(t *testing.T) {
	ck, _ := testKeys(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	srv := NewServer(Echo, &Options{ID: serverDID, MeterProvider: mp})
	defer srv.Close()
	hs := httptest.NewServer(srv) // plain HTTP: 4.03
	defer hs.Close()
	for range 2 {
		resp, err := http.Post(hs.URL+pathMessages, mediaType, bytes.NewReader(signed(t, ask("x"), ck)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("HTTP %d, want 403", resp.StatusCode)
		}
	}

	var page strings.Builder
	domainmetrics.Of(mp).WriteTo(&page)
	if want := `agentry_uamp_envelopes_refused_total{code="4.03"} 2` + "\n"; !strings.Contains(page.String(), want) {
		t.Errorf("Prometheus page has no line %q:\n%s", want, page.String())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var got int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == domainmetrics.UAMPRefused {
				for _, p := range s.DataPoints {
					if v, ok := p.Attributes.Value(domainmetrics.UAMPCode); ok && v.AsString() == "4.03" {
						got += p.Value
					}
				}
			}
		}
	}
	if got != 2 {
		t.Errorf("%s{uamp.code=4.03} = %d, want 2", domainmetrics.UAMPRefused, got)
	}
}
