package govern

import (
	"context"
	"crypto/rand"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/internal/telemetry"
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

// traceRecord links rec to ctx's span (see above), before it is
// journaled.
func traceRecord(ctx context.Context, rec *Record, data any) {
	span := trace.SpanFromContext(ctx)
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
// process) continues the trace it started in, under a remote parent
// standing for the paused part.
func resumeTrace(ctx context.Context, traceID string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	var sid trace.SpanID
	for sid == (trace.SpanID{}) {
		rand.Read(sid[:])
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
}
