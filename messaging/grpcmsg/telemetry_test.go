package grpcmsg

import (
	"context"
	"net"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// TestUAMP_GRPC_TraceContext: the Client carries the trace context of
// its call's context in the call's metadata (the OpenTelemetry gRPC
// instrumentation), so that a server with the instrumentation's stats
// handler continues the trace: its call span is a child of the caller's
// span and the envelope's span ("uamp ask") a child of the call's.
func TestUAMP_GRPC_TraceContext(t *testing.T) {
	fixtures()
	otel.SetTextMapPropagator(propagation.TraceContext{}) // as the agentry binary does
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ks, err := envelope.NewKeySet(clientKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	srv := messaging.NewServer(messaging.Echo, &messaging.Options{ID: serverDID, Key: serverKey, Keys: ks, TracerProvider: tp})
	t.Cleanup(func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := NewServer(srv, messaging.TLSConfig(serverCert.TLS, clientCert.Pool()), grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp))))
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	c, err := NewClient("https://"+ln.Addr().String(), clientOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0xf0, 7},
		TraceFlags: trace.FlagsSampled, Remote: true})
	reply, err := c.Ask(trace.ContextWithRemoteSpanContext(context.Background(), caller), ask("x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range reply.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
	}
	gs.GracefulStop() // the call's span ends with the call

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	call, env := byName["uamp.v1.Agent/Exchange"], byName["uamp ask"]
	if call == nil || env == nil {
		t.Fatalf("spans %v: want uamp.v1.Agent/Exchange and uamp ask", keys(byName))
	}
	if call.SpanContext().TraceID() != caller.TraceID() || call.Parent().SpanID() != caller.SpanID() {
		t.Errorf("call span: trace %s parent %s, want the caller's %s %s", call.SpanContext().TraceID(), call.Parent().SpanID(), caller.TraceID(), caller.SpanID())
	}
	if env.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Errorf("uamp ask: parent %s, want the call's span %s", env.Parent().SpanID(), call.SpanContext().SpanID())
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
