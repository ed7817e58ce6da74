package otelsetup

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestExporters: a signal is exported only when asked — by its
// OTEL_<SIGNAL>_EXPORTER or, unset, by an OTLP endpoint (general or the
// signal's own); unknown names are errors.
func TestExporters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		traces  []string
		metrics []string
		err     bool
	}{
		{name: "nothing set"},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, traces: []string{"otlp"}, metrics: []string{"otlp"}},
		{name: "traces endpoint only", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, traces: []string{"otlp"}},
		{name: "console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, traces: []string{"console"}},
		{name: "list", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console", "OTEL_METRICS_EXPORTER": "none"}, traces: []string{"otlp", "console"}},
		{name: "none beats the endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, metrics: []string{"otlp"}},
		{name: "unknown", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			traces, err1 := exporters(envOf(tc.env), "TRACES")
			metrics, err2 := exporters(envOf(tc.env), "METRICS")
			if (err1 != nil || err2 != nil) != tc.err {
				t.Fatalf("errors %v, %v; want error %v", err1, err2, tc.err)
			}
			if diff := cmp.Diff(tc.traces, traces); diff != "" && !tc.err {
				t.Errorf("traces (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.metrics, metrics); diff != "" && !tc.err {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProtocol(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
		err  bool
	}{
		{want: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: "grpc"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	} {
		got, err := protocol(envOf(tc.env), "TRACES")
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("protocol(%v) = %q, %v; want %q, error %v", tc.env, got, err, tc.want, tc.err)
		}
	}
}

// TestSetup_Disabled: OTEL_SDK_DISABLED=true installs no SDK, whatever
// else the environment asks for.
func TestSetup_Disabled(t *testing.T) {
	tel, err := Setup(context.Background(), &Options{Logger: slog.New(slog.DiscardHandler), Getenv: envOf(map[string]string{
		"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "console"})})
	if err != nil || tel.Enabled() {
		t.Fatalf("Setup = %+v, %v; want nothing enabled", tel, err)
	}
	if _, err := Setup(context.Background(), &Options{Getenv: envOf(map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"})}); err == nil {
		t.Error("an unknown exporter was accepted")
	}
}

func TestEnvResource(t *testing.T) {
	got := envResource(envOf(map[string]string{
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod, team=a%20b,bad,service.name=x",
		"OTEL_SERVICE_NAME":        "support-agents",
	}))
	want := []attribute.KeyValue{attribute.String("deployment.environment", "prod"), attribute.String("team", "a b"),
		attribute.String("service.name", "x"), attribute.String("service.name", "support-agents")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b attribute.KeyValue) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
