package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
)

// TestCommandSpanPropagates: with OpenTelemetry on, a command that talks
// to a server is a span, and its requests carry that span's traceparent
// (so the server's spans join the command's trace); the span is exported.
func TestCommandSpanPropagates(t *testing.T) {
	var (
		mu      sync.Mutex
		parents []string
		exports int
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		if r.URL.Path == "/v1/traces" {
			exports++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"approvals":[]}`)
	}))
	defer api.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	if code, _, errs := runCLI(t, "", "approvals", "--server", api.URL); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	traceparent := regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)
	if len(parents) != 1 || !traceparent.MatchString(parents[0]) {
		t.Errorf("the request's traceparent: %q, want one, sampled", parents)
	}
	if exports == 0 {
		t.Error("the command's span was not exported")
	}
}
