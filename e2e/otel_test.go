package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP (http/protobuf) collector: it keeps the
// spans and metrics it is sent.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests int
	spans    []*tracepb.Span
	service  string // service.name of the last resource
	metrics  map[string][]*metricspb.Metric
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{metrics: map[string][]*metricspb.Metric{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want an application/x-protobuf body", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.requests++
		var resp proto.Message
		switch r.URL.Path {
		case "/v1/traces":
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(b, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rs := range req.ResourceSpans {
				rc.service = attrString(rs.GetResource().GetAttributes(), "service.name")
				for _, ss := range rs.ScopeSpans {
					rc.spans = append(rc.spans, ss.Spans...)
				}
			}
			resp = &coltracepb.ExportTraceServiceResponse{}
		case "/v1/metrics":
			var req colmetricspb.ExportMetricsServiceRequest
			if err := proto.Unmarshal(b, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						rc.metrics[m.Name] = append(rc.metrics[m.Name], m)
					}
				}
			}
			resp = &colmetricspb.ExportMetricsServiceResponse{}
		default:
			http.NotFound(w, r)
			return
		}
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// snapshot copies what the receiver received so far: spans and metrics
// may still arrive (the receiver writes them while the test reads).
func (rc *otlpReceiver) snapshot() (spans []*tracepb.Span, metrics map[string][]*metricspb.Metric, requests int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	metrics = make(map[string][]*metricspb.Metric, len(rc.metrics))
	for k, v := range rc.metrics {
		metrics[k] = slices.Clone(v)
	}
	return slices.Clone(rc.spans), metrics, rc.requests
}

// serviceName is the service.name of the last resource received.
func (rc *otlpReceiver) serviceName() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.service
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// attrs is a span's attributes as Go values (strings, int64, []string).
func attrs(s *tracepb.Span) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = v.IntValue
		case *commonpb.AnyValue_ArrayValue:
			var ss []string
			for _, x := range v.ArrayValue.Values {
				ss = append(ss, x.GetStringValue())
			}
			out[kv.Key] = ss
		default:
			out[kv.Key] = kv.Value.String()
		}
	}
	return out
}

// subset is the entries of got named in want, for cmp against want.
func subset(got, want map[string]any) map[string]any {
	out := map[string]any{}
	for k := range want {
		if v, ok := got[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestOTel_GovernedRunTrace: a governed run started with a W3C
// traceparent, on `agentry serve` exporting over OTLP/HTTP to a receiver
// in the test, continues the caller's trace: the server span (child of
// the caller's), invoke_agent under it, chat and execute_tool under that,
// with the GenAI and governance attributes; the model server received the
// traceparent of a chat span; the journal's records carry the trace id
// and the tool call's span id; the token and duration metrics arrive.
func TestOTel_GovernedRunTrace(t *testing.T) {
	rc := newOTLPReceiver(t)
	model := newFakeChat(t)
	var (
		tpMu         sync.Mutex
		traceparents []string
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tpMu.Lock()
		traceparents = append(traceparents, r.Header.Get("Traceparent"))
		tpMu.Unlock()
		model.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	t.Setenv("SUPPORT_MODEL", "compat:fake")
	t.Setenv("COMPAT_BASE_URL", proxy.URL+"/v1")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "agentry-e2e")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--agents", "../examples/agents")

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/runs", strings.NewReader(`{"agent":"support","input":"refund o-1001","wait":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	req.Header.Set("Tracestate", "vendor=x")
	resp, err := httpClient(2).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	run := decodeRun(t, body)
	if resp.StatusCode != http.StatusOK || run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("refund run: %d %s", resp.StatusCode, body)
	}
	srv.stop(t) // flushes the spans and metrics

	spans, metrics, _ := rc.snapshot()
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	var server, invoke *tracepb.Span
	var chats, tools []*tracepb.Span
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) != traceID {
			continue
		}
		switch {
		case s.Name == "POST /v1/runs":
			server = s
		case s.Name == "invoke_agent support":
			invoke = s
		case strings.HasPrefix(s.Name, "chat "):
			chats = append(chats, s)
		case strings.HasPrefix(s.Name, "execute_tool "):
			tools = append(tools, s)
		}
	}
	if server == nil || invoke == nil || len(chats) != 2 || len(tools) != 2 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name+" "+hex.EncodeToString(s.TraceId))
		}
		t.Fatalf("spans of trace %s: server %v, invoke_agent %v, %d chat, %d execute_tool; all:\n%s", traceID, server != nil, invoke != nil, len(chats), len(tools), strings.Join(names, "\n"))
	}
	if got := rc.serviceName(); got != "agentry-e2e" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", got)
	}

	// The tree: caller → server → invoke_agent → chat, execute_tool.
	parent := func(s *tracepb.Span) string { return hex.EncodeToString(s.ParentSpanId) }
	id := func(s *tracepb.Span) string { return hex.EncodeToString(s.SpanId) }
	if parent(server) != callerSpan || server.Kind != tracepb.Span_SPAN_KIND_SERVER || server.TraceState != "vendor=x" {
		t.Errorf("server span: parent %s kind %v tracestate %q, want parent %s, server, vendor=x", parent(server), server.Kind, server.TraceState, callerSpan)
	}
	if diff := cmp.Diff(map[string]any{"http.request.method": "POST", "http.route": "/v1/runs", "http.response.status_code": int64(200), "url.path": "/v1/runs", "server.address": "127.0.0.1"},
		subset(attrs(server), map[string]any{"http.request.method": 0, "http.route": 0, "http.response.status_code": 0, "url.path": 0, "server.address": 0})); diff != "" {
		t.Errorf("server span attributes (-want +got):\n%s", diff)
	}
	if parent(invoke) != id(server) {
		t.Errorf("invoke_agent's parent is %s, want the server span %s", parent(invoke), id(server))
	}
	wantInvoke := map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "gen_ai.provider.name": "compat", "gen_ai.request.model": "fake", "uaicp.phase": "paused"}
	if diff := cmp.Diff(wantInvoke, subset(attrs(invoke), wantInvoke)); diff != "" {
		t.Errorf("invoke_agent attributes (-want +got):\n%s", diff)
	}
	for _, c := range chats {
		if parent(c) != id(invoke) || c.Kind != tracepb.Span_SPAN_KIND_CLIENT || c.Name != "chat fake" {
			t.Errorf("chat span %q: parent %s kind %v, want parent invoke_agent %s, client", c.Name, parent(c), c.Kind, id(invoke))
		}
		want := map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "compat", "gen_ai.request.model": "fake",
			"gen_ai.response.model": "fake", "gen_ai.usage.input_tokens": int64(20), "gen_ai.usage.output_tokens": int64(5),
			"gen_ai.response.finish_reasons": []string{"tool_calls"}}
		if diff := cmp.Diff(want, subset(attrs(c), want)); diff != "" {
			t.Errorf("chat span attributes (-want +got):\n%s", diff)
		}
		if _, ok := attrs(c)["gen_ai.input.messages"]; ok {
			t.Errorf("chat span records message content without %s", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
		}
	}
	toolAttrs := map[string]map[string]any{}
	for _, s := range tools {
		if parent(s) != id(invoke) || s.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
			t.Errorf("%s: parent %s kind %v, want invoke_agent %s, internal", s.Name, parent(s), s.Kind, id(invoke))
		}
		toolAttrs[s.Name] = attrs(s)
	}
	wantLookup := map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call_lookup_order",
		"gen_ai.tool.type": "function", "uaicp.risk_tier": "read_only", "uaicp.decision": "allow", "uaicp.phase": "execute", "uaicp.request_id": run.RequestID}
	if diff := cmp.Diff(wantLookup, subset(toolAttrs["execute_tool lookup_order"], wantLookup)); diff != "" {
		t.Errorf("execute_tool lookup_order attributes (-want +got):\n%s", diff)
	}
	wantRefund := map[string]any{"gen_ai.tool.name": "refund_order", "gen_ai.tool.call.id": "call_refund_order",
		"uaicp.risk_tier": "write_high_risk", "uaicp.decision": "approval_required", "uaicp.approval_id": run.PendingApprovals[0]}
	if diff := cmp.Diff(wantRefund, subset(toolAttrs["execute_tool refund_order"], wantRefund)); diff != "" {
		t.Errorf("execute_tool refund_order attributes (-want +got):\n%s", diff)
	}
	var events []string
	for _, s := range append([]*tracepb.Span{invoke}, tools...) {
		for _, ev := range s.Events {
			events = append(events, ev.Name)
		}
	}
	// Events only for what changes the run's course (the approval request
	// is the refund span's uaicp.approval_id and decision above).
	for _, want := range []string{"uaicp.transition", "uaicp.run_paused"} {
		if !strings.Contains(strings.Join(events, " "), want) {
			t.Errorf("no span event %s among %v", want, events)
		}
	}

	// The model server was called within the chat spans.
	chatIDs := map[string]bool{}
	for _, c := range chats {
		chatIDs["00-"+traceID+"-"+id(c)+"-01"] = true
	}
	tpMu.Lock()
	got := append([]string(nil), traceparents...)
	tpMu.Unlock()
	if len(got) != 2 || !chatIDs[got[0]] || !chatIDs[got[1]] || got[0] == got[1] {
		t.Errorf("the model server received traceparents %q, want one of each chat span %v", got, chatIDs)
	}

	// The journal joins the trace.
	code, out, errs := runCLI(t, "audit", "show", "--data", data, "--run", run.RequestID, "--format", "jsonl")
	if code != 0 {
		t.Fatalf("audit show: exit %d: %s", code, errs)
	}
	var n int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec struct {
			Kind    string `json:"kind"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
			Tool    string `json:"tool"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit record %q: %v", line, err)
		}
		n++
		if rec.TraceID != traceID {
			t.Errorf("record %s has trace_id %s, want %s", rec.Kind, rec.TraceID, traceID)
		}
		if rec.Tool != "" && rec.SpanID != "" && byID[rec.SpanID].GetName() != "execute_tool "+rec.Tool {
			t.Errorf("record %s of %s names span %s (%q), not its execute_tool span", rec.Kind, rec.Tool, rec.SpanID, byID[rec.SpanID].GetName())
		}
		if rec.Kind == "approval_requested" && rec.SpanID == "" {
			t.Errorf("approval_requested record carries no span_id")
		}
	}
	if n == 0 {
		t.Fatal("no journal records")
	}

	// The metrics.
	for _, name := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "http.server.request.duration"} {
		if len(metrics[name]) == 0 {
			t.Errorf("metric %s did not arrive (got %d metrics)", name, len(metrics))
		}
	}
	tokens := map[string]uint64{}
	for _, m := range metrics["gen_ai.client.token.usage"] {
		if m.Unit != "{token}" || m.GetHistogram() == nil {
			t.Errorf("gen_ai.client.token.usage: unit %q, histogram %v", m.Unit, m.GetHistogram() != nil)
			continue
		}
		for _, dp := range m.GetHistogram().DataPoints {
			tokens[attrString(dp.Attributes, "gen_ai.token.type")] = uint64(dp.GetSum())
		}
	}
	if diff := cmp.Diff(map[string]uint64{"input": 40, "output": 10}, tokens); diff != "" {
		t.Errorf("token usage sums by gen_ai.token.type (-want +got):\n%s", diff)
	}
	for _, m := range metrics["gen_ai.client.operation.duration"] {
		if m.Unit != "s" {
			t.Errorf("gen_ai.client.operation.duration unit %q, want s", m.Unit)
		}
	}
}

// TestOTel_OffUnlessAsked: with no OTEL variables, or with
// OTEL_SDK_DISABLED=true (an endpoint set all the same), agentry
// starts no exporter and sends nothing; with the endpoint on a closed
// port, requests are served normally and the server still stops
// gracefully.
func TestOTel_OffUnlessAsked(t *testing.T) {
	rc := newOTLPReceiver(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name     string
		env      map[string]string
		exported bool
	}{
		{name: "no OTEL variables"},
		{name: "OTEL_SDK_DISABLED", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": rc.srv.URL, "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.srv.URL, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}},
		{name: "collector unreachable", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": closed, "OTEL_BSP_SCHEDULE_DELAY": "50"}, exported: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			srv := startServer(t, "--data", t.TempDir(), "--agents", "../examples/agents")
			for range 3 {
				code, body := postJSON(t, srv.URL+"/v1/runs", `{"agent":"echo","input":"hello","wait":true}`)
				if run := decodeRun(t, body); code != http.StatusOK || run.Status != "delivered" {
					t.Fatalf("run: %d %s", code, body)
				}
			}
			srv.stop(t)
			on := strings.Contains(srv.output.String(), "OpenTelemetry export on")
			if on != tc.exported {
				t.Errorf("exporters started: %v, want %v:\n%s", on, tc.exported, srv.output.String())
			}
			if _, _, n := rc.snapshot(); n != 0 {
				t.Errorf("the receiver got %d requests, want none", n)
			}
		})
	}
}
