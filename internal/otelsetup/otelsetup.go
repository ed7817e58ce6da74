// Package otelsetup installs the OpenTelemetry SDK in the agentry binary,
// configured by the standard environment only (the OpenTelemetry
// "Environment Variable Specification",
// https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):
//
//   - OTEL_SDK_DISABLED=true turns everything off (the Go SDK does not read
//     it; Setup does).
//   - OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER: otlp, console or
//     none (a comma-separated list). Unset, a signal is exported over
//     OTLP when OTEL_EXPORTER_OTLP_ENDPOINT or the signal's
//     OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT is set, else not at
//     all: telemetry is off unless asked for.
//   - OTEL_EXPORTER_OTLP_PROTOCOL (and the per-signal variants):
//     http/protobuf (the default) or grpc.
//   - The exporters read the endpoint, OTEL_EXPORTER_OTLP_HEADERS,
//     timeouts and TLS settings themselves; the SDK reads
//     OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_* and OTEL_METRIC_EXPORT_*; the
//     resource takes OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
//     (service.name defaults to "agentry").
//
// Spans are batched in a bounded queue (OTEL_BSP_MAX_QUEUE_SIZE, 2048)
// and dropped when it is full, never blocking a request; metrics are
// pushed by a periodic reader. Export failures are logged as warnings
// with a running count. Shutdown flushes both, within its context.
//
// Only the binary imports this package: the libraries use the
// OpenTelemetry API alone (internal/repotest checks it).
package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Options configures Setup; the zero value works.
type Options struct {
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
	// Logger receives export failures and the configuration chosen; nil
	// is slog.Default().
	Logger *slog.Logger
	// Console is where the console exporters write; nil is os.Stderr
	// (stdout belongs to the commands' output).
	Console io.Writer
	// ServiceVersion is service.version of the resource.
	ServiceVersion string
}

// Telemetry is what Setup installed.
type Telemetry struct {
	// Traces and Metrics name the exporters in use ("otlp http/protobuf",
	// "console"), empty when the signal is off.
	Traces, Metrics []string
	shutdown        []func(context.Context) error
	tp              *sdktrace.TracerProvider // nil when traces are off
	mp              *sdkmetric.MeterProvider // nil when metrics are off
	failures        *failureLog
	logger          *slog.Logger
}

// Enabled reports whether anything is exported.
func (t *Telemetry) Enabled() bool { return len(t.Traces) > 0 || len(t.Metrics) > 0 }

// Shutdown flushes what is buffered and stops the exporters, within ctx.
// It may be called on a nil or disabled Telemetry.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	t.shutdown = nil
	return errors.Join(errs...)
}

// Setup reads the environment and, when it asks for telemetry, installs
// the SDK's tracer and meter providers as the global ones (the libraries
// default to them). It always installs the W3C propagators (traceparent,
// tracestate, baggage), so that a trace context passes through agentry
// even when it exports nothing. A configuration error (an unknown
// exporter or protocol) installs nothing and is returned.
func Setup(ctx context.Context, opts *Options) (*Telemetry, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t, err := newProviders(ctx, opts)
	if err != nil || !t.Enabled() {
		return t, err
	}
	otel.SetErrorHandler(t.failures)
	if t.tp != nil {
		otel.SetTracerProvider(t.tp)
	}
	if t.mp != nil {
		otel.SetMeterProvider(t.mp)
	}
	t.logger.Info("OpenTelemetry export on", "traces", strings.Join(t.Traces, ","), "metrics", strings.Join(t.Metrics, ","))
	return t, nil
}

// newProviders builds what Setup installs, without installing it.
func newProviders(ctx context.Context, opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Console == nil {
		o.Console = os.Stderr
	}
	t := &Telemetry{logger: o.Logger}
	if strings.EqualFold(strings.TrimSpace(o.Getenv("OTEL_SDK_DISABLED")), "true") {
		return t, nil
	}
	traces, err := exporters(o.Getenv, "TRACES")
	if err != nil {
		return nil, err
	}
	metrics, err := exporters(o.Getenv, "METRICS")
	if err != nil {
		return nil, err
	}
	if len(traces) == 0 && len(metrics) == 0 {
		return t, nil
	}
	res, err := newResource(ctx, o)
	if err != nil {
		return nil, err
	}
	t.failures = &failureLog{log: o.Logger}
	var tpOpts []sdktrace.TracerProviderOption
	for _, name := range traces {
		exp, label, err := traceExporter(ctx, o, name)
		if err != nil {
			return nil, err
		}
		t.Traces = append(t.Traces, label)
		tpOpts = append(tpOpts, sdktrace.WithBatcher(countingExporter{exp, t.failures}))
	}
	var mpOpts []sdkmetric.Option
	for _, name := range metrics {
		exp, label, err := metricExporter(ctx, o, name)
		if err != nil {
			return nil, err
		}
		t.Metrics = append(t.Metrics, label)
		mpOpts = append(mpOpts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if len(tpOpts) > 0 {
		t.tp = sdktrace.NewTracerProvider(append(tpOpts, sdktrace.WithResource(res))...)
		t.shutdown = append(t.shutdown, t.tp.Shutdown)
	}
	if len(mpOpts) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(mpOpts, sdkmetric.WithResource(res))...)
		t.shutdown = append(t.shutdown, t.mp.Shutdown)
	}
	return t, nil
}

// exporters returns the exporters OTEL_<SIGNAL>_EXPORTER names; unset,
// "otlp" when an OTLP endpoint is set, else none.
func exporters(getenv func(string) string, signal string) ([]string, error) {
	v := strings.TrimSpace(getenv("OTEL_" + signal + "_EXPORTER"))
	if v == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "" {
			return []string{"otlp"}, nil
		}
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(v, ",") {
		switch name = strings.ToLower(strings.TrimSpace(name)); name {
		case "none":
			return nil, nil
		case "otlp", "console":
			out = append(out, name)
		default:
			return nil, fmt.Errorf("OTEL_%s_EXPORTER: unknown exporter %q (otlp, console or none)", signal, name)
		}
	}
	return out, nil
}

// protocol is the OTLP protocol of a signal: http/protobuf or grpc.
func protocol(getenv func(string) string, signal string) (string, error) {
	p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"))
	if p == "" {
		p = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	}
	return "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported (http/protobuf or grpc)", p)
}

func traceExporter(ctx context.Context, o Options, name string) (sdktrace.SpanExporter, string, error) {
	if name == "console" {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(o.Console))
		return exp, "console", err
	}
	p, err := protocol(o.Getenv, "TRACES")
	if err != nil {
		return nil, "", err
	}
	var exp sdktrace.SpanExporter
	if p == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	return exp, "otlp " + p, err
}

func metricExporter(ctx context.Context, o Options, name string) (sdkmetric.Exporter, string, error) {
	if name == "console" {
		exp, err := stdoutmetric.New(stdoutmetric.WithWriter(o.Console))
		return exp, "console", err
	}
	p, err := protocol(o.Getenv, "METRICS")
	if err != nil {
		return nil, "", err
	}
	var exp sdkmetric.Exporter
	if p == "grpc" {
		exp, err = otlpmetricgrpc.New(ctx)
	} else {
		exp, err = otlpmetrichttp.New(ctx)
	}
	return exp, "otlp " + p, err
}

// newResource is the process's resource: service.name "agentry" (unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise),
// service.version, the SDK's attributes.
func newResource(ctx context.Context, o Options) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", "agentry")}
	if o.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", o.ServiceVersion))
	}
	base := resource.NewSchemaless(attrs...)
	// The Go resource detectors read the process environment; Getenv is
	// applied here so that a test's environment is the one read.
	env, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(envResource(o.Getenv)...))
	if err != nil {
		return nil, err
	}
	return resource.Merge(base, env)
}

// envResource is OTEL_RESOURCE_ATTRIBUTES (key=value pairs, values
// percent-decoded) and OTEL_SERVICE_NAME, which wins.
func envResource(getenv func(string) string) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, pair := range strings.Split(getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if d, err := unescape(strings.TrimSpace(v)); err == nil {
			out = append(out, attribute.String(k, d))
		}
	}
	if s := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); s != "" {
		out = append(out, attribute.String("service.name", s))
	}
	return out
}

// unescape percent-decodes s (W3C Baggage value encoding).
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("bad escape")
		}
		var v byte
		for _, c := range []byte(s[i+1 : i+3]) {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= c - '0'
			case c >= 'a' && c <= 'f':
				v |= c - 'a' + 10
			case c >= 'A' && c <= 'F':
				v |= c - 'A' + 10
			default:
				return "", errors.New("bad escape")
			}
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

// failureLog logs export failures as warnings: the first, then one in
// every 100, each with the running count (an unreachable collector must
// not flood the log).
type failureLog struct {
	log   *slog.Logger
	count atomic.Int64
	spans atomic.Int64
	sent  atomic.Int64 // spans exported
}

// Handle implements otel.ErrorHandler.
func (f *failureLog) Handle(err error) {
	if n := f.count.Add(1); n == 1 || n%100 == 0 {
		f.log.Warn("OpenTelemetry export failed; telemetry is being dropped", "error", err, "failures", n, "spans_dropped", f.spans.Load())
	}
}

// countingExporter counts the spans an export failed to deliver.
type countingExporter struct {
	sdktrace.SpanExporter
	f *failureLog
}

func (c countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.f.spans.Add(int64(len(spans)))
	} else {
		c.f.sent.Add(int64(len(spans)))
	}
	return err
}
