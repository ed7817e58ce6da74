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
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/builtin"
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
//   - on: the SDK, every span sampled and batched to an exporter that
//     discards them, metrics aggregated by a reader.

type mode struct {
	name string
	tp   trace.TracerProvider
	mp   metric.MeterProvider
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func modes(b *testing.B) []mode {
	// As the binary does: an incoming traceparent is continued.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	return []mode{
		{name: "baseline", tp: tracenoop.NewTracerProvider(), mp: metricnoop.NewMeterProvider()},
		{name: "off"}, // nil: the global providers, no SDK in this process
		{name: "on", tp: tp, mp: mp},
	}
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
			a, err := agent.New(&agent.Options{Name: "bench", LLMOptions: llm.LLMOptions{Model: scripted.NewFunc(toolThenText(1)).Ref(),
				Tools: []llm.Tool{noop}, TracerProvider: m.tp, MeterProvider: m.mp}})
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
	}
}

// BenchmarkTelemetryUAIPExecute: one UAIP /execute method_call of the
// built-in store through the server's handler (in process, no network):
// a server span per request, the uaip.* attributes and
// http.server.request.duration.
func BenchmarkTelemetryUAIPExecute(b *testing.B) {
	for _, m := range modes(b) {
		b.Run(m.name, func(b *testing.B) {
			s, err := server.New(context.Background(), &server.Config{Workflows: []*workflow.Workflow{builtin.Store()},
				Logger: slog.New(slog.DiscardHandler), TracerProvider: m.tp, MeterProvider: m.mp})
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
	}
}
