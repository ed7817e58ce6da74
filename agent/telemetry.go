package agent

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/telemetry"
)

// startSpan starts the span of one run: "invoke_agent {name}" in the
// OpenTelemetry GenAI semantic conventions (an agent invoked in
// process: an internal span).
func (a *Agent) startSpan(ctx context.Context) (context.Context, trace.Span) {
	name := "invoke_agent"
	if a.opts.Name != "" {
		name += " " + a.opts.Name
	}
	ctx, span := a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			telemetry.GenAIOperationName.String(telemetry.OpInvokeAgent),
			telemetry.GenAIProviderName.String(telemetry.ProviderName(a.provider())),
			telemetry.GenAIRequestModel.String(a.opts.Model.ModelID),
			telemetry.GenAIAgentID.String(a.id),
		)
		if a.opts.Name != "" {
			span.SetAttributes(telemetry.GenAIAgentName.String(a.opts.Name))
		}
		if a.sessionID != "" {
			span.SetAttributes(telemetry.GenAIConversationID.String(a.sessionID))
		}
	}
	return ctx, span
}
