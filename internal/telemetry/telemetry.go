// Package telemetry holds the OpenTelemetry instrumentation the module's
// libraries share: the attribute names of the OpenTelemetry semantic
// conventions they use (GenAI, HTTP, error.type) and agentry's own
// (uaicp.*, uaip.*), the tracer and meter of a provider given in options
// (nil: the global one), the GenAI client metrics, and the propagation
// of the W3C trace context on outgoing HTTP requests.
//
// It imports only the OpenTelemetry API (go.opentelemetry.io/otel,
// /trace, /metric, /propagation, /attribute, /codes): a program that
// installs no SDK pays for a span no more than a non-recording span. Only
// the agentry binary installs the SDK and the exporters
// (docs/observability.md).
//
// The GenAI conventions are OpenTelemetry's "Semantic Conventions for
// generative AI systems" (status Development), at
// https://opentelemetry.io/docs/specs/semconv/gen-ai/: spans
// "invoke_agent {gen_ai.agent.name}", "chat {gen_ai.request.model}",
// "execute_tool {gen_ai.tool.name}", and the metrics
// gen_ai.client.token.usage and gen_ai.client.operation.duration.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Scope is the instrumentation scope of every tracer and meter of the
// module.
const Scope = "github.com/agentry-dev/agentry"

// GenAI semantic conventions: attribute names.
const (
	GenAIOperationName         = attribute.Key("gen_ai.operation.name")
	GenAIProviderName          = attribute.Key("gen_ai.provider.name")
	GenAIRequestModel          = attribute.Key("gen_ai.request.model")
	GenAIRequestMaxTokens      = attribute.Key("gen_ai.request.max_tokens")
	GenAIRequestTemperature    = attribute.Key("gen_ai.request.temperature")
	GenAIRequestTopP           = attribute.Key("gen_ai.request.top_p")
	GenAIRequestTopK           = attribute.Key("gen_ai.request.top_k")
	GenAIRequestSeed           = attribute.Key("gen_ai.request.seed")
	GenAIRequestFrequencyPen   = attribute.Key("gen_ai.request.frequency_penalty")
	GenAIRequestPresencePen    = attribute.Key("gen_ai.request.presence_penalty")
	GenAIRequestStopSequences  = attribute.Key("gen_ai.request.stop_sequences")
	GenAIResponseModel         = attribute.Key("gen_ai.response.model")
	GenAIResponseID            = attribute.Key("gen_ai.response.id")
	GenAIResponseFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	GenAIUsageInputTokens      = attribute.Key("gen_ai.usage.input_tokens")
	GenAIUsageOutputTokens     = attribute.Key("gen_ai.usage.output_tokens")
	GenAIAgentName             = attribute.Key("gen_ai.agent.name")
	GenAIAgentID               = attribute.Key("gen_ai.agent.id")
	GenAIConversationID        = attribute.Key("gen_ai.conversation.id")
	GenAIToolName              = attribute.Key("gen_ai.tool.name")
	GenAIToolCallID            = attribute.Key("gen_ai.tool.call.id")
	GenAIToolType              = attribute.Key("gen_ai.tool.type")
	GenAIToolDescription       = attribute.Key("gen_ai.tool.description")
	GenAIToolCallArguments     = attribute.Key("gen_ai.tool.call.arguments")
	GenAIToolCallResult        = attribute.Key("gen_ai.tool.call.result")
	GenAIInputMessages         = attribute.Key("gen_ai.input.messages")
	GenAIOutputMessages        = attribute.Key("gen_ai.output.messages")
	GenAISystemInstructions    = attribute.Key("gen_ai.system_instructions")
	GenAITokenType             = attribute.Key("gen_ai.token.type")
	// ErrorType is the semantic conventions' error.type: the class of a
	// failure (an error code, an HTTP status, or "_OTHER").
	ErrorType = attribute.Key("error.type")
)

// GenAI operation names (gen_ai.operation.name).
const (
	OpChat        = "chat"
	OpInvokeAgent = "invoke_agent"
	OpExecuteTool = "execute_tool"
)

// HTTP semantic conventions: attribute names.
const (
	HTTPRequestMethod      = attribute.Key("http.request.method")
	HTTPRoute              = attribute.Key("http.route")
	HTTPResponseStatusCode = attribute.Key("http.response.status_code")
	URLPath                = attribute.Key("url.path")
	URLScheme              = attribute.Key("url.scheme")
	ServerAddress          = attribute.Key("server.address")
	ServerPort             = attribute.Key("server.port")
	ClientAddress          = attribute.Key("client.address")
	UserAgentOriginal      = attribute.Key("user_agent.original")
)

// agentry's own attributes: governance (UAICP) on execute_tool spans and
// workflows (UAIP) on the spans of their requests.
const (
	UAICPRequestID  = attribute.Key("uaicp.request_id")
	UAICPRiskTier   = attribute.Key("uaicp.risk_tier")
	UAICPDecision   = attribute.Key("uaicp.decision")
	UAICPPhase      = attribute.Key("uaicp.phase")
	UAICPApprovalID = attribute.Key("uaicp.approval_id")
	UAIPWorkflow    = attribute.Key("uaip.workflow")
	UAIPStage       = attribute.Key("uaip.stage")
	UAIPTask        = attribute.Key("uaip.task")
	UAIPSession     = attribute.Key("uaip.session_id")
)

// Tracer returns the module's tracer of tp; nil is the global provider
// (otel.GetTracerProvider), which forwards to whatever SDK the program
// installs later.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return &globalTracer{}
	}
	return tp.Tracer(Scope)
}

// globalTracer is the module's tracer of the global provider, resolved
// at each span. While no SDK is installed (the global provider is still
// OpenTelemetry's default), a span under a non-recording parent is that
// parent itself: the default provider would make a non-recording span
// carrying the parent's span context — the same trace context for
// propagation — but allocate it and a context for it, the cost a library
// user who installs no SDK should not pay (docs/benchmarks.md,
// "OpenTelemetry overhead"). Under a recording parent (a provider passed
// elsewhere in options) it defers to the default provider.
type globalTracer struct {
	embedded.Tracer
	cached atomic.Pointer[resolvedTracer]
}

type resolvedTracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

// defaultProvider is OpenTelemetry's default global tracer provider (the
// one that delegates to an SDK installed later), or nil when something
// installed a provider before this package's initialisation.
var defaultProvider = func() trace.TracerProvider {
	tp := otel.GetTracerProvider()
	if t := reflect.TypeOf(tp); t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" {
		return tp
	}
	return nil
}()

// Start implements trace.Tracer.
func (g *globalTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	tp := otel.GetTracerProvider()
	if tp == defaultProvider {
		if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
			return ctx, parent
		}
	}
	r := g.cached.Load()
	if r == nil || r.tp != tp {
		r = &resolvedTracer{tp: tp, t: tp.Tracer(Scope)}
		g.cached.Store(r)
	}
	return r.t.Start(ctx, name, opts...)
}

// Meter returns the module's meter of mp; nil is the global provider.
func Meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(Scope)
}

// CaptureContentEnv is the variable that turns on the recording of
// message content, tool arguments and results on GenAI spans ("true").
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// CaptureContent reports whether GenAI spans record message content
// (CaptureContentEnv is "true"); by default they do not.
func CaptureContent() bool {
	return strings.EqualFold(os.Getenv(CaptureContentEnv), "true")
}

// ProviderName is the gen_ai.provider.name of an agentry provider name:
// the conventions' well-known value where there is one.
func ProviderName(provider string) string {
	switch provider {
	case "gemini":
		return "gcp.gemini"
	}
	return provider
}

// The attributes of an exception event (OpenTelemetry semantic
// conventions, exceptions).
const (
	exceptionType    = attribute.Key("exception.type")
	exceptionMessage = attribute.Key("exception.message")
)

// Paused is the error.type of a governed run or call that waits for an
// approval (UAICP's APPROVAL_REQUIRED): not a failure, so EndError marks
// no error for it.
const Paused = "APPROVAL_REQUIRED"

// EndError ends span after err (nil: success): a failure is marked with
// SetError and the error.type of ErrorTypeOf; a pause for an approval
// (Paused) only adds the uaicp.phase "paused".
func EndError(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		if typ := ErrorTypeOf(err); typ == Paused {
			span.SetAttributes(UAICPPhase.String("paused"))
		} else {
			SetError(span, typ, err)
		}
	}
	span.End()
}

// SetError marks span failed by err: status Error, error.type typ (or
// "_OTHER" when typ is empty), and err recorded as an exception event
// whose exception.type is typ too — not the Go type of err, which means
// nothing to a tracing backend.
func SetError(span trace.Span, typ string, err error) {
	if !span.IsRecording() {
		return
	}
	if typ == "" {
		typ = "_OTHER"
	}
	span.SetAttributes(ErrorType.String(typ))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.AddEvent("exception", trace.WithAttributes(exceptionType.String(typ), exceptionMessage.String(err.Error())))
	} else {
		span.SetStatus(codes.Error, typ)
	}
}

// errorTypes name the errors of packages this one cannot import (they
// import it): RegisterErrorType.
var errorTypes []func(error) string

// RegisterErrorType adds f to the namers ErrorTypeOf asks first (f
// returns "" for an error it does not know); call it from an init.
func RegisterErrorType(f func(error) string) { errorTypes = append(errorTypes, f) }

// ErrorTypeOf is the error.type of err: "timeout" for a deadline,
// "cancelled" for a cancellation, the name a RegisterErrorType namer
// gives, the code of an error that has one (a method Code() returning a
// string or a fmt.Stringer), else "_OTHER".
func ErrorTypeOf(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	for _, f := range errorTypes {
		if t := f(err); t != "" {
			return t
		}
	}
	var s interface{ Code() string }
	if errors.As(err, &s) && s.Code() != "" {
		return s.Code()
	}
	var st interface{ Code() fmt.Stringer }
	if errors.As(err, &st) {
		if c := st.Code().String(); c != "" {
			return c
		}
	}
	return "_OTHER"
}

// GenAIMetrics are the GenAI client instruments of one meter provider.
type GenAIMetrics struct {
	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
	opts     Memo[chatKey, *chatOpts]
}

// chatKey is what the attributes of a model call's measurements depend on.
type chatKey struct{ provider, requestModel, responseModel, errorType string }

// chatOpts are the record options of one chatKey: the attribute sets,
// sorted and hashed once.
type chatOpts struct{ duration, input, output []metric.RecordOption }

func newChatOpts(k chatKey) *chatOpts {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, GenAIOperationName.String(OpChat), GenAIProviderName.String(ProviderName(k.provider)),
		GenAIRequestModel.String(k.requestModel))
	if k.responseModel != "" {
		attrs = append(attrs, GenAIResponseModel.String(k.responseModel))
	}
	if k.errorType != "" {
		attrs = append(attrs, ErrorType.String(k.errorType))
	}
	set := func(extra ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(attrs[:len(attrs):len(attrs)], extra...)...))}
	}
	return &chatOpts{duration: set(), input: set(GenAITokenType.String("input")), output: set(GenAITokenType.String("output"))}
}

var genaiMetrics sync.Map // metric.MeterProvider (nil: the global one) → *GenAIMetrics

// GenAIMetricsOf returns the GenAI instruments of mp (nil: the global
// provider), created once per provider.
func GenAIMetricsOf(mp metric.MeterProvider) *GenAIMetrics {
	var key any = mp
	if mp == nil {
		key = globalKey{}
	}
	if m, ok := genaiMetrics.Load(key); ok {
		return m.(*GenAIMetrics)
	}
	meter := Meter(mp)
	m := &GenAIMetrics{}
	// Errors only name a broken SDK; the instruments returned are no-ops then.
	m.tokens, _ = meter.Int64Histogram("gen_ai.client.token.usage",
		metric.WithDescription("Number of input and output tokens used."), metric.WithUnit("{token}"),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	m.duration, _ = meter.Float64Histogram("gen_ai.client.operation.duration",
		metric.WithDescription("GenAI operation duration."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
	got, _ := genaiMetrics.LoadOrStore(key, m)
	return got.(*GenAIMetrics)
}

type globalKey struct{}

// ChatMeasurement is what one model call reports to the GenAI metrics.
type ChatMeasurement struct {
	Provider, RequestModel, ResponseModel string
	Duration                              time.Duration
	InputTokens, OutputTokens             int
	// ErrorType is set when the call failed (no token usage is recorded then).
	ErrorType string
}

// RecordChat records one model call: its duration and, when it
// succeeded, its input and output tokens.
func (g *GenAIMetrics) RecordChat(ctx context.Context, m ChatMeasurement) {
	if !g.duration.Enabled(ctx) && !g.tokens.Enabled(ctx) {
		return
	}
	o := g.opts.Get(chatKey{m.Provider, m.RequestModel, m.ResponseModel, m.ErrorType}, newChatOpts)
	g.duration.Record(ctx, m.Duration.Seconds(), o.duration...)
	if m.ErrorType != "" {
		return
	}
	g.tokens.Record(ctx, int64(m.InputTokens), o.input...)
	g.tokens.Record(ctx, int64(m.OutputTokens), o.output...)
}

// Inject writes the trace context of ctx (W3C traceparent and
// tracestate, with the global propagator) into h.
func Inject(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the remote trace context h carries (with the
// global propagator).
func Extract(ctx context.Context, h http.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
}

// Transport returns an http.RoundTripper (base, or http.DefaultTransport
// when nil) that adds the trace context of each request's context to its
// headers: a request made within a span carries its traceparent.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := base.(propagating); ok {
		return base
	}
	return propagating{base}
}

type propagating struct{ base http.RoundTripper }

func (t propagating) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not modify the request it is given.
	r := req.Clone(req.Context())
	Inject(r.Context(), r.Header)
	return t.base.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the base
// transport, when it has them.
func (t propagating) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Memo memoises what is derived from a comparable key — attribute sets,
// metric options, span names — so that the hot path computes them once
// per distinct key instead of once per operation. Reads take no lock (the
// map is copied on write); it keeps at most memoMax keys (keys can come
// from peers: a response model, an HTTP method), beyond which values are
// computed every time. The zero value is ready.
type Memo[K comparable, V any] struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[K]V]
}

const memoMax = 1024

// Get returns the value of k, computing it with build on a miss.
func (c *Memo[K, V]) Get(k K, build func(K) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	v := build(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if p := c.m.Load(); p != nil {
		old = *p
	}
	if w, ok := old[k]; ok {
		return w
	}
	if len(old) >= memoMax {
		return v
	}
	m := make(map[K]V, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[k] = v
	c.m.Store(&m)
	return v
}
