package govern_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentry-dev/agentry/govern"
)

// TestTelemetry_SpanEvents: a governed run inside a recording span takes
// its trace id, every journal record carries the span's id, and the span
// gets events only for phase transitions, pauses, resumptions and
// rollbacks — not one per journal record (intents, commits are the
// execute_tool span's attributes).
func TestTelemetry_SpanEvents(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(context.Background(), "invoke_agent")
	j := govern.NewMemoryJournal()
	opts := baseOpts(t, nil)
	opts.Journal = j
	g := newGov(t, opts)
	r, err := g.Start(ctx, &govern.RunOptions{Identity: testIdentity()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Invoke(ctx, withRollback(lowRisk("put")), govern.Call{ID: "w1"}, (&tool{}).fn); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fail(ctx, "stop"); err != nil {
		t.Fatal(err)
	}
	span.End()

	if got, want := r.TraceID(), span.SpanContext().TraceID().String(); got != want {
		t.Errorf("run trace_id %s, want the span's %s", got, want)
	}
	kinds := map[govern.RecordKind]bool{}
	for _, x := range records(t, j) {
		kinds[x.Kind] = true
		if x.SpanID != span.SpanContext().SpanID().String() {
			t.Errorf("%s record: span_id %q, want %s", x.Kind, x.SpanID, span.SpanContext().SpanID())
		}
	}
	if !kinds["invocation_intent"] || !kinds["invocation_commit"] {
		t.Fatalf("journal kinds %v: the run made no call", kinds)
	}
	var events []string
	for _, ev := range rec.Ended()[0].Events() {
		events = append(events, ev.Name)
	}
	want := []string{"uaicp.transition", "uaicp.transition", "uaicp.rollback_started", "uaicp.rollback_done", "uaicp.transition"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("span events (-want +got):\n%s", diff)
	}
}
