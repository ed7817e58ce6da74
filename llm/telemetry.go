package llm

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/telemetry"
)

// The spans of an LLMInstance follow the OpenTelemetry GenAI semantic
// conventions: "chat {model}" (a client span) for each provider call and
// "execute_tool {tool}" (internal) for each tool call, with
// gen_ai.client.token.usage and gen_ai.client.operation.duration recorded
// for each provider call. Message content, tool arguments and results are
// recorded only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
// is "true".

// chatNames and toolNames memoise the names of chat and execute_tool
// spans, by model and by tool.
var chatNames, toolNames telemetry.Memo[string, string]

func chatName(model string) string    { return chatNames.Get(model, newChatName) }
func newChatName(model string) string { return "chat " + model }
func toolName(tool string) string     { return toolNames.Get(tool, newToolName) }
func newToolName(tool string) string  { return "execute_tool " + tool }

// startChat starts the span of one provider call.
func (l *LLMInstance) startChat(ctx context.Context, req *Request) (context.Context, trace.Span) {
	ctx, span := l.tracer.Start(ctx, chatName(req.ModelID), trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs,
		telemetry.GenAIOperationName.String(telemetry.OpChat),
		telemetry.GenAIProviderName.String(telemetry.ProviderName(l.provider)),
		telemetry.GenAIRequestModel.String(req.ModelID),
	)
	attrs = appendParams(attrs, req.Params)
	if telemetry.CaptureContent() {
		if req.System != "" {
			attrs = append(attrs, telemetry.GenAISystemInstructions.String(contentJSON([]map[string]any{{"type": "text", "content": req.System}})))
		}
		attrs = append(attrs, telemetry.GenAIInputMessages.String(contentJSON(messageParts(req.Messages))))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endChat ends the span of one provider call and records its metrics.
func (l *LLMInstance) endChat(ctx context.Context, span trace.Span, start time.Time, req *Request, resp *Response, err error) {
	m := telemetry.ChatMeasurement{Provider: l.provider, RequestModel: req.ModelID, Duration: time.Since(start)}
	var id string
	if err == nil && resp != nil && resp.Message != nil {
		if meta := resp.Message.Metadata.Provider(l.provider); meta != nil {
			m.ResponseModel, _ = meta["model"].(string)
			id, _ = meta["id"].(string)
		}
		m.InputTokens, m.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	} else if err != nil {
		m.ErrorType = errorType(err)
	} else {
		m.ErrorType = string(InvalidResponse)
	}
	l.metrics.RecordChat(ctx, m)
	if span.IsRecording() {
		if m.ErrorType != "" {
			telemetry.SetError(span, m.ErrorType, err)
		} else {
			attrs := []attribute.KeyValue{
				telemetry.GenAIUsageInputTokens.Int(resp.Usage.InputTokens),
				telemetry.GenAIUsageOutputTokens.Int(resp.Usage.OutputTokens),
			}
			if m.ResponseModel != "" {
				attrs = append(attrs, telemetry.GenAIResponseModel.String(m.ResponseModel))
			}
			if id != "" {
				attrs = append(attrs, telemetry.GenAIResponseID.String(id))
			}
			if resp.StopReason != "" {
				attrs = append(attrs, telemetry.GenAIResponseFinishReasons.StringSlice([]string{resp.StopReason}))
			}
			span.SetAttributes(attrs...)
			if telemetry.CaptureContent() {
				out := messageParts([]Message{resp.Message})
				for _, o := range out {
					if resp.StopReason != "" {
						o["finish_reason"] = resp.StopReason
					}
				}
				span.SetAttributes(telemetry.GenAIOutputMessages.String(contentJSON(out)))
			}
		}
	}
	span.End()
}

// startTool starts the span of one tool call.
func (l *LLMInstance) startTool(ctx context.Context, tool *Tool, call *ToolCall) (context.Context, trace.Span) {
	ctx, span := l.tracer.Start(ctx, toolName(tool.Name), toolSpanKind)
	if span.IsRecording() {
		setToolAttributes(span, tool, call)
	}
	return ctx, span
}

var toolSpanKind = trace.WithSpanKind(trace.SpanKindInternal)

// setToolAttributes sets the attributes of a recording execute_tool span
// (apart, so that a tool goroutine without tracing runs on a small
// stack frame).
//
//go:noinline
func setToolAttributes(span trace.Span, tool *Tool, call *ToolCall) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		telemetry.GenAIOperationName.String(telemetry.OpExecuteTool),
		telemetry.GenAIToolName.String(tool.Name),
		telemetry.GenAIToolCallID.String(call.ToolCallID),
		telemetry.GenAIToolType.String("function"),
	)
	if tool.Description != "" {
		attrs = append(attrs, telemetry.GenAIToolDescription.String(tool.Description))
	}
	if telemetry.CaptureContent() {
		args := call.RawArguments
		if args == "" {
			args = contentJSON(call.Arguments)
		}
		attrs = append(attrs, telemetry.GenAIToolCallArguments.String(args))
	}
	span.SetAttributes(attrs...)
}

// endTool ends the span of one tool call with its outcome.
func endTool(span trace.Span, x *ToolExecution) {
	if span.IsRecording() {
		if telemetry.CaptureContent() {
			span.SetAttributes(telemetry.GenAIToolCallResult.String(ResultText(x.Result)))
		}
		if x.IsError {
			typ := "tool_error"
			var pe *PanicError
			var ae *ArgumentsError
			switch {
			case x.Approved != nil && !*x.Approved:
				typ = "denied"
			case errors.As(x.Err, &pe):
				typ = "panic"
			case errors.As(x.Err, &ae):
				typ = "invalid_arguments"
			case x.Err != nil:
				if t := telemetry.ErrorTypeOf(x.Err); t != "_OTHER" {
					typ = t
				}
			}
			if typ == telemetry.Paused {
				// Held for an approval: not a failure (see EndError).
				span.SetAttributes(telemetry.UAICPPhase.String("paused"))
			} else {
				telemetry.SetError(span, typ, x.Err)
			}
		}
	}
	span.End()
}

// errorType is the error.type of a failed provider call: its UPP code.
func errorType(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return string(e.Code)
	}
	return telemetry.ErrorTypeOf(err)
}

// appendParams adds the request parameters the conventions name, when
// Params carries them under their usual vendor names.
func appendParams(attrs []attribute.KeyValue, p map[string]any) []attribute.KeyValue {
	if len(p) == 0 {
		return attrs
	}
	num := func(key attribute.Key, names ...string) {
		for _, n := range names {
			switch v := p[n].(type) {
			case float64:
				attrs = append(attrs, key.Float64(v))
				return
			case int:
				attrs = append(attrs, key.Int(v))
				return
			case int64:
				attrs = append(attrs, key.Int64(v))
				return
			case json.Number:
				if f, err := v.Float64(); err == nil {
					attrs = append(attrs, key.Float64(f))
				}
				return
			}
		}
	}
	num(telemetry.GenAIRequestMaxTokens, "max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")
	num(telemetry.GenAIRequestTemperature, "temperature")
	num(telemetry.GenAIRequestTopP, "top_p")
	num(telemetry.GenAIRequestTopK, "top_k")
	num(telemetry.GenAIRequestSeed, "seed")
	num(telemetry.GenAIRequestFrequencyPen, "frequency_penalty")
	num(telemetry.GenAIRequestPresencePen, "presence_penalty")
	switch v := p["stop"].(type) {
	case string:
		attrs = append(attrs, telemetry.GenAIRequestStopSequences.StringSlice([]string{v}))
	case []string:
		attrs = append(attrs, telemetry.GenAIRequestStopSequences.StringSlice(v))
	case []any:
		var s []string
		for _, x := range v {
			if t, ok := x.(string); ok {
				s = append(s, t)
			}
		}
		attrs = append(attrs, telemetry.GenAIRequestStopSequences.StringSlice(s))
	}
	return attrs
}

// messageParts is msgs in the conventions' message form: role and parts
// (text, tool_call, tool_call_response; other blocks by type only).
func messageParts(msgs []Message) []map[string]any {
	out := make([]map[string]any, 0, len(msgs))
	blocks := func(cs []ContentBlock) []map[string]any {
		parts := make([]map[string]any, 0, len(cs))
		for _, c := range cs {
			switch b := c.(type) {
			case TextBlock:
				parts = append(parts, map[string]any{"type": "text", "content": b.Text})
			case ReasoningBlock:
				parts = append(parts, map[string]any{"type": "reasoning"})
			default:
				parts = append(parts, map[string]any{"type": string(c.BlockType())})
			}
		}
		return parts
	}
	for _, m := range msgs {
		switch x := m.(type) {
		case *UserMessage:
			out = append(out, map[string]any{"role": "user", "parts": blocks(x.Content)})
		case *AssistantMessage:
			parts := blocks(x.Content)
			for _, c := range x.ToolCalls {
				parts = append(parts, map[string]any{"type": "tool_call", "id": c.ToolCallID, "name": c.ToolName, "arguments": c.Arguments})
			}
			out = append(out, map[string]any{"role": "assistant", "parts": parts})
		case *ToolResultMessage:
			parts := make([]map[string]any, 0, len(x.Results))
			for _, r := range x.Results {
				parts = append(parts, map[string]any{"type": "tool_call_response", "id": r.ToolCallID, "response": ResultText(r.Result)})
			}
			out = append(out, map[string]any{"role": "tool", "parts": parts})
		}
	}
	return out
}

func contentJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
