package metrics

import (
	"strings"
	"sync"
	"testing"
)

func TestExposition(t *testing.T) {
	var r Registry
	c := r.NewCounterVec("http_requests_total", "Requests.", "route", "code")
	h := r.NewHistogramVec("http_request_seconds", "Latency.", []float64{0.1, 1}, "route")
	r.NewGaugeFunc("sessions_active", "Active sessions.", func() float64 { return 3 })
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { c.Inc("/execute", "200") })
	}
	wg.Wait()
	c.Add(2, `/a"b`, "500")
	h.Observe(0.05, "/execute")
	h.Observe(0.5, "/execute")
	h.Observe(3, "/execute")
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP http_request_seconds Latency.
# TYPE http_request_seconds histogram
http_request_seconds_bucket{route="/execute",le="0.1"} 1
http_request_seconds_bucket{route="/execute",le="1"} 2
http_request_seconds_bucket{route="/execute",le="+Inf"} 3
http_request_seconds_sum{route="/execute"} 3.55
http_request_seconds_count{route="/execute"} 3
# HELP http_requests_total Requests.
# TYPE http_requests_total counter
http_requests_total{route="/a\"b",code="500"} 2
http_requests_total{route="/execute",code="200"} 100
# HELP sessions_active Active sessions.
# TYPE sessions_active gauge
sessions_active 3
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWrongLabelCountPanics(t *testing.T) {
	var r Registry
	c := r.NewCounterVec("x", "x", "a")
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	c.Inc()
}
