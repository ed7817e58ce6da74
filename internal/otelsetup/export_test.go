package otelsetup

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// NewProviders is newProviders for the benchmarks: the binary's SDK
// configuration, not installed as the global providers.
func NewProviders(ctx context.Context, opts *Options) (*Telemetry, trace.TracerProvider, metric.MeterProvider, error) {
	t, err := newProviders(ctx, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return t, t.tp, t.mp, nil
}

// SpansExported is the number of spans t's exporters delivered.
func SpansExported(t *Telemetry) int64 { return t.failures.sent.Load() }
