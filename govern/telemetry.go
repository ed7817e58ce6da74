package govern

import (
	"context"
	"crypto/rand"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/llm"
)

// A governed run joins the OpenTelemetry trace it runs in: a run started
// inside a span takes the span's trace id as its UAICP trace_id (the W3C
// trace-id both name), each journal record written inside a recording
// span of that trace carries the span's id (Record.SpanID: the
// execute_tool span of a tool call, the invoke_agent span of a run), and
// the record is also an event "uaicp.<kind>" on that span. A tool call's
// span gets the uaicp.* attributes of its gate: risk tier, decision,
// approval id.

// eventKind reports whether records of kind are span events: the phase
// transitions, pauses and resumptions, and rollbacks of a run. The other
// records (intents, commits, evidence, approvals) show as the uaicp.*
// attributes of the execute_tool span they belong to.
func eventKind(kind RecordKind) bool {
	switch kind {
	case recordkind.Transition, recordkind.Paused, recordkind.Resumed,
		recordkind.RollbackStarted, recordkind.RollbackDone, recordkind.RollbackFailed:
		return true
	}
	return false
}

// eventName is the name of the span event of a record of kind.
func eventName(kind RecordKind) string {
	switch kind {
	case recordkind.Transition:
		return "uaicp." + recordkind.Transition
	case recordkind.Paused:
		return "uaicp." + recordkind.Paused
	case recordkind.Resumed:
		return "uaicp." + recordkind.Resumed
	case recordkind.RollbackStarted:
		return "uaicp." + recordkind.RollbackStarted
	case recordkind.RollbackDone:
		return "uaicp." + recordkind.RollbackDone
	case recordkind.RollbackFailed:
		return "uaicp." + recordkind.RollbackFailed
	}
	return "uaicp." + string(kind)
}

// sameTrace reports whether id, in hex, is hexID (a record's trace_id),
// without formatting id.
func sameTrace(id trace.TraceID, hexID string) bool {
	const digits = "0123456789abcdef"
	if len(hexID) != 2*len(id) {
		return false
	}
	for i, b := range id {
		if hexID[2*i] != digits[b>>4] || hexID[2*i+1] != digits[b&0xf] {
			return false
		}
	}
	return true
}

// spanTraceID is the trace id of ctx's span, when it has a valid one.
func spanTraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// traceCall puts the call's risk tier on its span.
func traceCall(ctx context.Context, requestID string, tier Tier) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.UAICPRequestID.String(requestID), telemetry.UAICPRiskTier.String(tier.String()),
		telemetry.UAICPPhase.String(string(Execute)))
	if tier == ReadOnly {
		span.SetAttributes(telemetry.UAICPDecision.String(string(Allow)))
	}
}

// runSpan is the span the run's phase events go to: its invoke_agent
// span (the span it was started, or resumed, in), or nil.
func (r *Run) runSpan() trace.Span {
	s, _ := r.span.Load().(trace.Span)
	return s
}

// traceRecord links rec to ctx's span (see above), before it is
// journaled. A phase transition goes to the run's own span (runSpan)
// while it records, also when a tool call's span is ctx's.
func traceRecord(ctx context.Context, rec *Record, data any, runSpan trace.Span) {
	span := trace.SpanFromContext(ctx)
	if rec.Kind == recordkind.Transition && runSpan != nil && runSpan.IsRecording() {
		span = runSpan
	}
	if !span.IsRecording() {
		return
	}
	sc := span.SpanContext()
	if sameTrace(sc.TraceID(), rec.TraceID) {
		rec.SpanID = sc.SpanID().String()
	}
	if eventKind(rec.Kind) {
		attrs := make([]attribute.KeyValue, 0, 6)
		attrs = append(attrs, attribute.String("uaicp.outcome", string(rec.Outcome)))
		if rec.From != "" || rec.To != "" {
			attrs = append(attrs, attribute.String("uaicp.from", string(rec.From)), attribute.String("uaicp.to", string(rec.To)))
		}
		if rec.Tool != "" {
			attrs = append(attrs, telemetry.GenAIToolName.String(rec.Tool), telemetry.GenAIToolCallID.String(rec.CallID))
		}
		if len(rec.Reasons) > 0 {
			rs := make([]string, len(rec.Reasons))
			for i, r := range rec.Reasons {
				rs[i] = string(r)
			}
			attrs = append(attrs, attribute.StringSlice("uaicp.reasons", rs))
		}
		span.AddEvent(eventName(rec.Kind), trace.WithAttributes(attrs...))
	}

	switch rec.Kind {
	case recordkind.Intent:
		if in, ok := data.(CallIntent); ok {
			decision := string(Allow)
			if in.Policy != nil {
				decision = string(in.Policy.Effect)
			}
			span.SetAttributes(telemetry.UAICPDecision.String(decision))
			if in.ApprovalID != "" {
				span.SetAttributes(telemetry.UAICPApprovalID.String(in.ApprovalID), attribute.String("uaicp.approver", in.Approver))
			}
		}
	case recordkind.Blocked:
		d := "blocked"
		if in, ok := data.(CallIntent); ok && in.ApprovalID != "" {
			span.SetAttributes(telemetry.UAICPApprovalID.String(in.ApprovalID))
		}
		span.SetAttributes(telemetry.UAICPDecision.String(d))
	case recordkind.ApprovalRequested:
		span.SetAttributes(telemetry.UAICPDecision.String("approval_required"))
		if req, ok := data.(*ApprovalRequest); ok {
			span.SetAttributes(telemetry.UAICPApprovalID.String(req.ID))
		}
	case recordkind.Transition:
		span.SetAttributes(telemetry.UAICPPhase.String(string(rec.To)))
	case recordkind.Paused:
		span.SetAttributes(telemetry.UAICPPhase.String("paused"))
	}
}

// callOutcome is the outcome of a tool call on agentry.tool_calls:
// "success", or the UAICP reason code of its refusal or failure.
func callOutcome(err error) string {
	if err == nil {
		return string(Success)
	}
	return telemetry.ErrorTypeOf(err)
}

// The error.type of a governance error on OpenTelemetry spans is its
// first reason code.
func init() {
	telemetry.RegisterErrorType(func(err error) string {
		if rs := ReasonsOf(err); len(rs) > 0 {
			return string(rs[0])
		}
		return ""
	})
}

// resumeTrace returns ctx in the run's trace when it is in no trace: a
// run resumed after its approvals (by the decision, or in another
// process) continues the trace it started in, under the span its start
// was journaled in (its first invoke_agent span), or, when that is not
// known, under a remote parent standing for the paused part.
func resumeTrace(ctx context.Context, traceID, spanID string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	sid, err := trace.SpanIDFromHex(spanID)
	for err != nil || sid == (trace.SpanID{}) {
		_, err = rand.Read(sid[:])
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
}

// startResume starts the span of a paused run's resume — its
// run_resumed event and the approved calls redone — under resumeTrace.
func (r *Run) startResume(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := r.g.tracer.Start(resumeTrace(ctx, r.traceID, r.startSpan), "uaicp.resume", trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(telemetry.UAICPRequestID.String(r.requestID))
	}
	return ctx, span
}

// startRedo starts the execute_tool span of an approved call redone at a
// resume.
func (r *Run) startRedo(ctx context.Context, t llm.Tool, callID string) (context.Context, trace.Span) {
	ctx, span := r.g.tracer.Start(ctx, "execute_tool "+t.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(telemetry.GenAIOperationName.String(telemetry.OpExecuteTool), telemetry.GenAIToolName.String(t.Name),
			telemetry.GenAIToolCallID.String(callID), telemetry.GenAIToolType.String("function"))
		if t.Description != "" {
			span.SetAttributes(telemetry.GenAIToolDescription.String(t.Description))
		}
	}
	return ctx, span
}
