package messaging

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/envelope"
)

// TestUAMP_Telemetry_EnvelopeSpans: on both bindings, an envelope
// received is a span "uamp {intent}" that continues the trace context of
// its ext["x-trace"] (W3C or B3 form), and the handler of the stream an
// ask opens runs in that span's trace.
func TestUAMP_Telemetry_EnvelopeSpans(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	inHandler := make(chan trace.SpanContext, 1)
	h := HandlerFunc(func(ctx context.Context, req *envelope.Envelope, st *Stream) error {
		inHandler <- trace.SpanContextFromContext(ctx)
		return Echo.ServeUAMP(ctx, req, st)
	})
	env := newTestEnv(t, h, &Options{TracerProvider: tp})
	for _, bc := range bindings() {
		for _, xt := range []string{"w3c:00-" + tid + "-" + sid + "-01", "b3:" + tid + "-" + sid + "-1"} {
			t.Run(bc.name+" "+xt[:3], func(t *testing.T) {
				rec.Reset()
				e := ask("x")
				e.Ext = map[string]any{"x-trace": xt}
				reply, err := env.client(t, bc.b, nil).Ask(context.Background(), e)
				if err != nil {
					t.Fatal(err)
				}
				for _, err := range reply.Deltas() {
					if err != nil {
						t.Fatal(err)
					}
				}
				if got := <-inHandler; got.TraceID().String() != tid {
					t.Errorf("handler in trace %s, want %s", got.TraceID(), tid)
				}
				var span sdktrace.ReadOnlySpan
				for _, s := range rec.Ended() {
					if s.Name() == "uamp ask" {
						span = s
					}
				}
				if span == nil {
					t.Fatalf("no span uamp ask among %d", len(rec.Ended()))
				}
				if span.SpanContext().TraceID().String() != tid || span.Parent().SpanID().String() != sid || !span.Parent().IsRemote() {
					t.Errorf("uamp ask: trace %s parent %s, want trace %s under the remote %s",
						span.SpanContext().TraceID(), span.Parent().SpanID(), tid, sid)
				}
			})
		}
	}
}

// TestUAMP_Telemetry_XTrace: the forms of ext["x-trace"] read, and what
// is ignored.
func TestUAMP_Telemetry_XTrace(t *testing.T) {
	for _, tc := range []struct {
		in, trace, span string
		sampled         bool
	}{
		{"w3c:00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", false},
		{"b3:80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90", "80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1", true},
		{"b3:a3ce929d0e0e4736-00f067aa0ba902b7", "0000000000000000a3ce929d0e0e4736", "00f067aa0ba902b7", false},
		{"b3:a3ce929d0e0e4736-00f067aa0ba902b7-d", "0000000000000000a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"b3:0", "", "", false},
		{"b3:A3CE929D0E0E4736-00f067aa0ba902b7", "", "", false},
		{"b3:a3ce929d0e0e4736-00f067aa0ba902b7-x", "", "", false},
		{"b3:00000000000000000000000000000000-00f067aa0ba902b7", "", "", false},
		{"w3c:00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "", false},
		{"uber:whatever", "", "", false},
		{"", "", "", false},
	} {
		sc, ok := xTrace(map[string]any{"x-trace": tc.in})
		if ok != (tc.trace != "") {
			t.Errorf("%q: ok %v", tc.in, ok)
			continue
		}
		if ok && (sc.TraceID().String() != tc.trace || sc.SpanID().String() != tc.span || sc.IsSampled() != tc.sampled || !sc.IsRemote()) {
			t.Errorf("%q: %s %s sampled %v remote %v", tc.in, sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote())
		}
	}
	if _, ok := xTrace(map[string]any{"x-trace": 12.0}); ok {
		t.Error("a number was read as a trace context")
	}
}

// FuzzXTrace: xTrace never panics, and what it accepts is valid and
// remote.
func FuzzXTrace(f *testing.F) {
	for _, s := range []string{"w3c:00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"b3:a3ce929d0e0e4736-00f067aa0ba902b7-1-05e3ac9a4f6e3b90", "b3:-", "b3:", "w3c:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if sc, ok := xTrace(map[string]any{"x-trace": s}); ok && (!sc.IsValid() || !sc.IsRemote()) {
			t.Fatalf("%q: accepted %v", s, sc)
		}
	})
}
