package uicontrol

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/telemetry"
)

// The app side makes one span per message it handles, "uiap {type}",
// under the span of the connection (for the WebSocket binding, the HTTP
// server span of its upgrade request): uiap.message.type, .kind and .id,
// uiap.session_id, and error.type (the UIAP error code) when the
// message is answered with an error. A request that runs a handler ends
// its span with the handler's reply, and the handler's context carries
// it.

const (
	uiapMessageType = attribute.Key("uiap.message.type")
	uiapMessageKind = attribute.Key("uiap.message.kind")
	uiapMessageID   = attribute.Key("uiap.message.id")
	uiapSessionID   = attribute.Key("uiap.session_id")
)

// messageNames memoises span names by message type.
var messageNames telemetry.Memo[string, string]

func newMessageName(typ string) string { return "uiap " + typ }

// startMessage starts the span of env, received on c.
func (c *appConn) startMessage(env *Envelope, s *AppSession) trace.Span {
	name := "uiap"
	if env.Type != "" && len(env.Type) <= 64 {
		name = messageNames.Get(env.Type, newMessageName)
	}
	_, span := c.app.tracer.Start(c.ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 4)
		attrs = append(attrs, uiapMessageType.String(env.Type), uiapMessageKind.String(string(env.Kind)), uiapMessageID.String(env.ID))
		if s != nil {
			attrs = append(attrs, uiapSessionID.String(s.id))
		} else if env.SessionID != "" {
			attrs = append(attrs, uiapSessionID.String(env.SessionID))
		}
		span.SetAttributes(attrs...)
	}
	return span
}

// endMessage ends the span of the message handled, unless a handler's
// job took it.
func (c *appConn) endMessage() {
	if c.span != nil {
		c.span.End()
		c.span = nil
	}
}
