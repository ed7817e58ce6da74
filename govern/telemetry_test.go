package govern_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
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

// TestTelemetry_ResumeIsOneTree: a run resumed after its approval (here
// after a restart, with no span in the caller's context) continues its
// trace under the span it started in — one tree — with a uaicp.resume
// span holding the run_resumed event and the approved call's
// execute_tool span (its approval id and approver); the call held for
// the approval is not marked as an error, and exception events name the
// error.type, not a Go type.
func TestTelemetry_ResumeIsOneTree(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newAgentFixture(t, func(o *govern.Options) { o.TracerProvider = tp })
	var n, looks atomic.Int32
	m := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "lookup", map[string]any{"q": "o-9"}), call("c2", "refund", map[string]any{"order": "o-9"})}},
		scripted.Step{Text: "refunded o-9"})
	newAgent := func() *agent.Agent {
		a, err := agent.New(&agent.Options{Name: "support", LLMOptions: llm.LLMOptions{Model: m.Ref(), TracerProvider: tp,
			Tools: []llm.Tool{lookupTool("lookup", &looks), refundTool(f.ledger, &n)}},
			Middleware: []agent.Middleware{f.g.Middleware(&govern.AgentOptions{Name: "support"})}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	_, err := newAgent().Generate(context.Background(), llm.Text("refund o-9"), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || ge.ApprovalID == "" {
		t.Fatalf("want a pause, got %v", err)
	}
	f.restart(t)
	f.approve(t, ge.ApprovalID)
	if _, err := govern.ResumeAgent(context.Background(), f.g, newAgent(), ge.Envelope.RequestID); err != nil {
		t.Fatal(err)
	}

	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = append(spans[s.Name()], s)
	}
	agents, resumes, refunds := spans["invoke_agent support"], spans["uaicp.resume"], spans["execute_tool refund"]
	if len(agents) != 2 || len(resumes) != 1 || len(refunds) != 2 {
		t.Fatalf("spans %v: want two invoke_agent, one uaicp.resume, two execute_tool refund", slices.Collect(maps.Keys(spans)))
	}
	first := agents[0]
	tid := first.SpanContext().TraceID()
	for name, ss := range spans {
		for _, s := range ss {
			if s.SpanContext().TraceID() != tid {
				t.Errorf("span %s is in trace %s, not the run's %s", name, s.SpanContext().TraceID(), tid)
			}
		}
	}
	for _, s := range []sdktrace.ReadOnlySpan{resumes[0], agents[1]} {
		if s.Parent().SpanID() != first.SpanContext().SpanID() {
			t.Errorf("%s: parent %s, want the run's first invoke_agent span %s", s.Name(), s.Parent().SpanID(), first.SpanContext().SpanID())
		}
	}
	var resumed bool
	for _, ev := range resumes[0].Events() {
		resumed = resumed || ev.Name == "uaicp.run_resumed"
	}
	if !resumed {
		t.Error("the uaicp.resume span has no uaicp.run_resumed event")
	}
	held, redone := refunds[0], refunds[1]
	if held.Status().Code == codes.Error || len(held.Events()) != 0 {
		t.Errorf("the call held for its approval: status %v, events %v; want no error", held.Status(), held.Events())
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range redone.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if redone.Parent().SpanID() != resumes[0].SpanContext().SpanID() || attrs["uaicp.approval_id"].AsString() != ge.ApprovalID ||
		attrs["uaicp.approver"].AsString() != "alice" || attrs["gen_ai.tool.call.id"].AsString() != "c2" {
		t.Errorf("the redone refund: parent %s (want the resume's %s), attributes %v", redone.Parent().SpanID(), resumes[0].SpanContext().SpanID(), attrs)
	}
	if n.Load() != 1 {
		t.Errorf("refund ran %d times", n.Load())
	}
}

// TestTelemetry_ExceptionType: a failed span's exception event names the
// error.type, not the error's Go type.
func TestTelemetry_ExceptionType(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	m := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "fail", map[string]any{})}}, scripted.Step{Text: "done"})
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref(), TracerProvider: tp,
		Tools: []llm.Tool{{Name: "fail", Parameters: llm.Schema{"type": "object"}, Run: func(context.Context, map[string]any) (any, error) {
			return nil, errors.New("boom")
		}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Generate(context.Background(), llm.Text("go"), nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range rec.Ended() {
		if s.Name() != "execute_tool fail" {
			continue
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if kv.Key == "exception.type" && kv.Value.AsString() != "tool_error" {
					t.Errorf("exception.type %q, want the error.type tool_error", kv.Value.AsString())
				}
			}
		}
		if len(s.Events()) != 1 {
			t.Errorf("events %v, want one exception", s.Events())
		}
		return
	}
	t.Fatal("no execute_tool span")
}
