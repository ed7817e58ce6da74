package otelsetup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/otelsetup"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/workflow"
)

// The overhead of telemetry, each figure against a baseline measured in
// the same run (docs/benchmarks.md):
//
//   - baseline: explicit no-op providers (go.opentelemetry.io/otel/trace/noop,
//     metric/noop): the instrumentation calls happen and do nothing;
//   - off: the global providers with no SDK installed — what a library
//     user who installs nothing gets;
//   - on: the binary's own SDK configuration (newProviders, as Setup
//     builds it from the environment): every span sampled, batched in
//     the background and exported over OTLP/HTTP (protobuf) to a
//     receiver that discards the bytes; metrics aggregated for the
//     periodic OTLP reader. Each run reports spans_exported/op, so that
//     spans dropped by a full queue cannot flatter the figure;
//   - sdk-only: the same SDK, batching to an exporter that drops the
//     spans without encoding them: "on" minus the OTLP encoding and
//     transfer, to tell the SDK's bookkeeping from the export.

type mode struct {
	name string
	tp   trace.TracerProvider
	mp   metric.MeterProvider
	on   *otelsetup.Telemetry
}

// receiver is an OTLP/HTTP endpoint that reads and discards what it is
// sent.
func receiver(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty Export*ServiceResponse
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

func modes(b *testing.B) []mode {
	// As the binary does: an incoming traceparent is continued.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver(b))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	return []mode{
		{name: "baseline", tp: tracenoop.NewTracerProvider(), mp: metricnoop.NewMeterProvider()},
		{name: "off"}, // nil: the global providers, no SDK in this process
		{name: "on"},  // built by run, per run
		{name: "sdk-only", tp: tp, mp: mp},
	}
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// run runs bench in mode m: for "on", with providers of its own, flushed
// after the loop to count the spans exported.
func (m mode) run(b *testing.B, bench func(b *testing.B, tp trace.TracerProvider, mp metric.MeterProvider)) {
	if m.name != "on" {
		bench(b, m.tp, m.mp)
		return
	}
	t, tp, mp, err := otelsetup.NewProviders(context.Background(), &otelsetup.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil || tp == nil || mp == nil {
		b.Fatalf("providers: %v (traces %v, metrics %v)", err, t.Traces, t.Metrics)
	}
	bench(b, tp, mp)
	b.StopTimer()
	if err := t.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(otelsetup.SpansExported(t))/float64(b.N), "spans_exported/op")
}

// toolThenText replies with a tool call until the conversation holds n
// tool results, then with text.
func toolThenText(n int) scripted.Func {
	return func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		results := 0
		for _, m := range req.Messages {
			if m.Type() == llm.TypeToolResult {
				results++
			}
		}
		usage := llm.TokenUsage{InputTokens: 10, OutputTokens: 5}
		if results >= n {
			return scripted.Step{Text: "done", Usage: usage}, nil
		}
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: fmt.Sprint("c", results), ToolName: "noop", Arguments: map[string]any{"x": 1.0}}},
			Usage: usage}, nil
	}
}

// BenchmarkTelemetryAgentStep: one agent run of one step — a model call
// asking for a tool, the tool, the model's final answer — on the
// scripted model: an invoke_agent span, two chat spans, one
// execute_tool span and the GenAI metrics per op.
func BenchmarkTelemetryAgentStep(b *testing.B) {
	noop := llm.Tool{Name: "noop", Run: func(context.Context, map[string]any) (any, error) { return "ok", nil }}
	for _, m := range modes(b) {
		b.Run(m.name, func(b *testing.B) {
			m.run(b, func(b *testing.B, tp trace.TracerProvider, mp metric.MeterProvider) {
				a, err := agent.New(&agent.Options{Name: "bench", LLMOptions: llm.LLMOptions{Model: scripted.NewFunc(toolThenText(1)).Ref(),
					Tools: []llm.Tool{noop}, TracerProvider: tp, MeterProvider: mp}})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkTelemetryUAIPExecute: one UAIP /execute method_call of the
// built-in store through the server's handler (in process, no network):
// a server span per request, the uaip.* attributes and
// http.server.request.duration.
func BenchmarkTelemetryUAIPExecute(b *testing.B) {
	for _, m := range modes(b) {
		b.Run(m.name, func(b *testing.B) {
			m.run(b, func(b *testing.B, tp trace.TracerProvider, mp metric.MeterProvider) {
				s, err := server.New(context.Background(), &server.Config{Workflows: []*workflow.Workflow{builtin.Store()},
					Logger: slog.New(slog.DiscardHandler), TracerProvider: tp, MeterProvider: mp})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Shutdown(context.Background()) })
				h := s.Handler()
				call := func(session, body, path string) *httptest.ResponseRecorder {
					req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					// A caller in a trace, as an agent calling a workflow is.
					req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
					if session != "" {
						req.Header.Set("X-Session-Id", session)
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("%s: %d %s", body, rec.Code, rec.Body)
					}
					return rec
				}
				newSession := func() string {
					var init struct {
						SessionID string `json:"session_id"`
					}
					if err := json.Unmarshal(call("", `{"workflow_name":"store"}`, "/initialize").Body.Bytes(), &init); err != nil {
						b.Fatal(err)
					}
					call(init.SessionID, `{"workflow_name":"store","action":"stage_transition","stage":"cart"}`, "/execute")
					return init.SessionID
				}
				sid := newSession()
				const body = `{"workflow_name":"store","action":"method_call","task":"view_cart","args":{}}`
				b.ReportAllocs()
				for b.Loop() {
					io.Discard.Write(call(sid, body, "/execute").Body.Bytes())
				}
			})
		})
	}
}

// BenchmarkTelemetrySDKFloor: the OpenTelemetry SDK's own cost for what
// one agent step records — four spans (an invoke_agent parent, two chat
// and one execute_tool children, with as many attributes as agentry
// sets) and two chat measurements — with no agentry code in between:
// the floor under BenchmarkTelemetryAgentStep's "on" figure.
func BenchmarkTelemetrySDKFloor(b *testing.B) {
	attrs := func(n int) []attribute.KeyValue {
		kv := make([]attribute.KeyValue, n)
		for i := range kv {
			kv[i] = attribute.String(fmt.Sprint("gen_ai.attr", i), "value")
		}
		return kv
	}
	agentAttrs, chatAttrs, chatEnd, toolAttrs := attrs(5), attrs(3), attrs(5), attrs(4)
	for _, m := range modes(b) {
		b.Run(m.name, func(b *testing.B) {
			m.run(b, func(b *testing.B, tp trace.TracerProvider, mp metric.MeterProvider) {
				tracer := telemetry.Tracer(tp)
				metrics := telemetry.GenAIMetricsOf(mp)
				chat := func(ctx context.Context) {
					_, span := tracer.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient))
					span.SetAttributes(chatAttrs...)
					span.SetAttributes(chatEnd...)
					span.End()
					metrics.RecordChat(ctx, telemetry.ChatMeasurement{Provider: "scripted", RequestModel: "m", InputTokens: 10, OutputTokens: 5})
				}
				b.ReportAllocs()
				for b.Loop() {
					ctx, span := tracer.Start(context.Background(), "invoke_agent bench")
					span.SetAttributes(agentAttrs...)
					chat(ctx)
					_, tool := tracer.Start(ctx, "execute_tool noop")
					tool.SetAttributes(toolAttrs...)
					tool.End()
					chat(ctx)
					span.End()
				}
			})
		})
	}
}
