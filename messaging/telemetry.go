package messaging

import (
	"context"
	"encoding/hex"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// A Server makes one span per envelope it receives, on every binding:
// "uamp {intent}" (a server span) with uamp.intent, uamp.envelope.id,
// uamp.from and uamp.stream_id, and error.type (the UAMP code) when the
// envelope is refused. Its parent is the trace context the envelope
// carries in ext["x-trace"], when it carries one this package reads
// (docs/spec-notes/uamp.md), else the request's (the HTTP server span,
// the WebSocket upgrade's). The stream an ask opens runs its handler in
// that span's trace.

const (
	uampIntent     = attribute.Key("uamp.intent")
	uampEnvelopeID = attribute.Key("uamp.envelope.id")
	uampFrom       = attribute.Key("uamp.from")
	uampStreamID   = attribute.Key("uamp.stream_id")
)

// startEnvelope starts the span of e, received within ctx.
func (s *Server) startEnvelope(ctx context.Context, e *envelope.Envelope) (context.Context, trace.Span) {
	if sc, ok := xTrace(e.Ext); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	name := "uamp"
	switch e.Intent {
	case envelope.IntentAsk, envelope.IntentSubscribe, envelope.IntentProgress, envelope.IntentCancel:
		name = "uamp " + string(e.Intent) // constant strings: no allocation
	}
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 4)
		attrs = append(attrs, uampIntent.String(string(e.Intent)), uampEnvelopeID.String(e.ID), uampFrom.String(e.From))
		if e.StreamID != "" {
			attrs = append(attrs, uampStreamID.String(e.StreamID))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// endEnvelope ends the span of an envelope after err (nil: accepted).
func endEnvelope(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		telemetry.SetError(span, string(envelope.AsError(err).Code), nil)
	}
	span.End()
}

// xTrace reads the trace context of ext["x-trace"]: "w3c:" followed by a
// W3C traceparent (or a bare traceparent), or "b3:" followed by a B3
// single header (trace id, span id, optional sampling state). Anything
// else is ignored.
func xTrace(ext map[string]any) (trace.SpanContext, bool) {
	v, _ := ext["x-trace"].(string)
	if v == "" || len(v) > 256 {
		return trace.SpanContext{}, false
	}
	var sc trace.SpanContext
	switch {
	case strings.HasPrefix(v, "b3:"):
		sc = b3(v[3:])
	default:
		v = strings.TrimPrefix(v, "w3c:")
		ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": v})
		sc = trace.SpanContextFromContext(ctx)
	}
	return sc, sc.IsValid()
}

// b3 parses a B3 single header, {TraceId}-{SpanId}[-{SamplingState}[-{ParentSpanId}]]
// (openzipkin/b3-propagation); the trace id has 16 or 32 hex digits.
func b3(v string) trace.SpanContext {
	parts := strings.Split(v, "-")
	if len(parts) < 2 || len(parts) > 4 {
		return trace.SpanContext{}
	}
	tid := parts[0]
	if len(tid) == 16 {
		tid = "0000000000000000" + tid
	}
	var cfg trace.SpanContextConfig
	if len(tid) != 32 || len(parts[1]) != 16 || !lowerHex(tid) || !lowerHex(parts[1]) {
		return trace.SpanContext{}
	}
	hex.Decode(cfg.TraceID[:], []byte(tid))
	hex.Decode(cfg.SpanID[:], []byte(parts[1]))
	if len(parts) > 2 {
		switch parts[2] {
		case "1", "d":
			cfg.TraceFlags = trace.FlagsSampled
		case "0":
		default:
			return trace.SpanContext{}
		}
	}
	cfg.Remote = true
	return trace.NewSpanContext(cfg)
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
