package telemetry

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTracer_Global: the tracer of the global provider costs nothing
// while no SDK is installed — a span under a non-recording parent is the
// parent, so the trace context still propagates — and records once one
// is installed, even for a tracer obtained before. (One test: installing
// the global provider cannot be undone.)
func TestTracer_Global(t *testing.T) {
	tracer := Tracer(nil)
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	for _, parent := range []context.Context{context.Background(), trace.ContextWithRemoteSpanContext(context.Background(), remote)} {
		ctx, span := tracer.Start(parent, "op")
		if ctx != parent || span.IsRecording() {
			t.Errorf("no SDK: Start returned a new context or a recording span")
		}
		if got, want := trace.SpanContextFromContext(ctx), trace.SpanContextFromContext(parent); !got.Equal(want) {
			t.Errorf("no SDK: span context %v, want the parent's %v", got, want)
		}
		if n := testing.AllocsPerRun(100, func() { _, s := tracer.Start(parent, "op"); s.End() }); n != 0 {
			t.Errorf("no SDK: %v allocations per span, want 0", n)
		}
	}

	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	ctx, span := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "op")
	span.End()
	if len(rec.Ended()) != 1 {
		t.Fatalf("SDK installed: %d spans recorded, want 1", len(rec.Ended()))
	}
	if got := trace.SpanContextFromContext(ctx); got.TraceID() != remote.TraceID() || got.SpanID() == remote.SpanID() {
		t.Errorf("SDK installed: span context %v, want a child in trace %v", got, remote.TraceID())
	}
}

// TestMemo: a value is built once per key, up to memoMax keys; beyond,
// each Get builds it (and returns the right value).
func TestMemo(t *testing.T) {
	var m Memo[int, string]
	builds := 0
	build := func(k int) string { builds++; return fmt.Sprint(k) }
	for range 2 {
		for k := range memoMax + 10 {
			if got := m.Get(k, build); got != fmt.Sprint(k) {
				t.Fatalf("Get(%d) = %q", k, got)
			}
		}
	}
	if want := memoMax + 2*10; builds != want {
		t.Errorf("%d builds, want %d", builds, want)
	}
}
