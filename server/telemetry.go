package server

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/telemetry"
)

// startSpan starts the server span of a request (OpenTelemetry HTTP
// semantic conventions), continuing the W3C trace context the request
// carries. route is the pattern the request was mounted under; the
// handler's own ServeMux may refine it (endSpan).
func (s *core) startSpan(r *http.Request, route string) (context.Context, trace.Span) {
	ctx := telemetry.Extract(r.Context(), r.Header)
	ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, telemetry.HTTPRequestMethod.String(r.Method), telemetry.URLPath.String(r.URL.Path),
			telemetry.URLScheme.String(scheme(r)))
		if host, port, err := net.SplitHostPort(r.Host); err == nil {
			attrs = append(attrs, telemetry.ServerAddress.String(host))
			if p, err := strconv.Atoi(port); err == nil {
				attrs = append(attrs, telemetry.ServerPort.Int(p))
			}
		} else if r.Host != "" {
			attrs = append(attrs, telemetry.ServerAddress.String(r.Host))
		}
		if ua := r.UserAgent(); ua != "" {
			attrs = append(attrs, telemetry.UserAgentOriginal.String(ua))
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			attrs = append(attrs, telemetry.ClientAddress.String(host))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// endKey is what the end of a request's span and its duration's
// attributes depend on.
type endKey struct {
	method, route string
	code          int
	https         bool
}

// endAttrs are computed once per endKey: the span's name and final
// attributes, and the duration's record options (the attribute set
// sorted and hashed once).
type endAttrs struct {
	name   string
	span   []attribute.KeyValue
	record []metric.RecordOption
}

func newEndAttrs(k endKey) *endAttrs {
	scheme := "http"
	if k.https {
		scheme = "https"
	}
	e := &endAttrs{name: k.method + " " + k.route,
		span: []attribute.KeyValue{telemetry.HTTPRoute.String(k.route), telemetry.HTTPResponseStatusCode.Int(k.code)}}
	attrs := []attribute.KeyValue{telemetry.HTTPRequestMethod.String(k.method), telemetry.HTTPRoute.String(k.route),
		telemetry.HTTPResponseStatusCode.Int(k.code), telemetry.URLScheme.String(scheme)}
	if k.code >= 500 {
		typ := telemetry.ErrorType.String(strconv.Itoa(k.code))
		e.span = append(e.span, typ)
		attrs = append(attrs, typ)
	}
	e.record = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	return e
}

// endSpan ends the request's span with its route and status, and
// records http.server.request.duration.
func (s *core) endSpan(ctx context.Context, span trace.Span, r *http.Request, route string, code int, d time.Duration) {
	// The handler's ServeMux (runs, UAIP, approvals) sets the pattern it
	// matched on the request it was given.
	if r.Pattern != "" {
		route = r.Pattern
	}
	recording, measured := span.IsRecording(), s.duration.Enabled(ctx)
	if !recording && !measured {
		span.End()
		return
	}
	e := s.ends.Get(endKey{r.Method, routeOf(route), code, r.TLS != nil}, newEndAttrs)
	if recording {
		span.SetName(e.name)
		span.SetAttributes(e.span...)
		if code >= 500 {
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
	if measured {
		s.duration.Record(ctx, d.Seconds(), e.record...)
	}
}

// routeOf is http.route of a ServeMux pattern: the path without the
// method and host ("GET /v1/runs/{id}" → "/v1/runs/{id}").
func routeOf(pattern string) string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimLeft(p, " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:]
	}
	return pattern
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}
