package uicontrol_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/uicontrol"
)

// TestUIAP_Telemetry_MessageSpans: the app makes a span per message it
// handles, "uiap {type}", under the span of the connection's context; a
// handler's context carries its request's span, and a request answered
// with an error has error.type = its UIAP code.
func TestUIAP_Telemetry_MessageSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	app := uicontrol.NewApp(&uicontrol.AppOptions{Logger: discard, TracerProvider: tp})
	t.Cleanup(func() { _ = app.Close() })
	inHandler := make(chan trace.SpanContext, 1)
	app.Handle("x.test.echo", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
		inHandler <- trace.SpanContextFromContext(ctx)
		return &uicontrol.Reply{Type: "x.test.echoed", Payload: req.Payload}, nil
	})
	connCtx, conn := tp.Tracer("test").Start(context.Background(), "GET /uiap/ws")
	appEnd, agentEnd := uicontrol.Pair()
	go func() { _ = app.Serve(connCtx, appEnd) }()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	a, err := uicontrol.Connect(ctx, agentEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if _, err := a.Call(ctx, &uicontrol.Request{Type: "x.test.echo", Payload: map[string]any{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Call(ctx, &uicontrol.Request{Type: "x.test.unknown"}); err == nil {
		t.Fatal("an unknown type was answered")
	}
	handlerSC := <-inHandler
	a.Close()
	if err := app.Close(); err != nil { // waits for the connection's goroutines: every span ended
		t.Fatal(err)
	}

	type span struct{ Name, ErrorType string }
	var got []span
	var echo sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() != conn.SpanContext().SpanID() {
			t.Errorf("span %s: parent %s, want the connection's span", s.Name(), s.Parent().SpanID())
		}
		x := span{Name: s.Name()}
		for _, kv := range s.Attributes() {
			if kv.Key == "error.type" {
				x.ErrorType = kv.Value.AsString()
			}
		}
		got = append(got, x)
		if s.Name() == "uiap x.test.echo" {
			echo = s
		}
	}
	want := []span{{Name: "uiap session.initialize"}, {Name: "uiap x.test.echo"}, {Name: "uiap x.test.unknown", ErrorType: "unknown_message_type"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("spans (-want +got):\n%s", diff)
	}
	if handlerSC.SpanID() != echo.SpanContext().SpanID() {
		t.Errorf("the handler's context carries span %s, want its request's %s", handlerSC.SpanID(), echo.SpanContext().SpanID())
	}
}
