package agent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/telemetry"
)

// internalSpan is the options of a run's span, made once (not a slice
// and an option a run).
var internalSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

// startSpan starts the span of one run: "invoke_agent {name}" in the
// OpenTelemetry GenAI semantic conventions (an agent invoked in
// process: an internal span).
func (a *Agent) startSpan(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := a.tracer.Start(ctx, a.spanName, internalSpan...)
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 6)
		attrs = append(attrs,
			telemetry.GenAIOperationName.String(telemetry.OpInvokeAgent),
			telemetry.GenAIProviderName.String(telemetry.ProviderName(a.provider())),
			telemetry.GenAIRequestModel.String(a.opts.Model.ModelID),
			telemetry.GenAIAgentID.String(a.id),
		)
		if a.opts.Name != "" {
			attrs = append(attrs, telemetry.GenAIAgentName.String(a.opts.Name))
		}
		if a.sessionID != "" {
			attrs = append(attrs, telemetry.GenAIConversationID.String(a.sessionID))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// spanNameOf is the name of the invoke_agent span of an agent named name.
func spanNameOf(name string) string {
	if name == "" {
		return telemetry.OpInvokeAgent
	}
	return telemetry.OpInvokeAgent + " " + name
}
