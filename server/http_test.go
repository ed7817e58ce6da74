package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func start(t *testing.T, s *core) (string, context.CancelFunc, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln) }()
	t.Cleanup(cancel)
	return "http://" + ln.Addr().String(), cancel, done
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestHealthMetricsAndRoutes(t *testing.T) {
	s := newCore(coreOptions{Logger: slog.New(slog.DiscardHandler)})
	s.handle("/hello", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hi")) }))
	healthy := true
	s.addHealthCheck("store", func(context.Context) error {
		if healthy {
			return nil
		}
		return errors.New("down")
	})
	url, _, _ := start(t, s)
	if code, body, _ := get(t, url+"/hello"); code != 200 || body != "hi" {
		t.Errorf("route: %d %q", code, body)
	}
	if code, body, _ := get(t, url+"/healthz"); code != 200 || !strings.Contains(body, `"store":"ok"`) {
		t.Errorf("healthz: %d %s", code, body)
	}
	healthy = false
	if code, body, _ := get(t, url+"/healthz"); code != 503 || !strings.Contains(body, "failing") {
		t.Errorf("failing healthz: %d %s", code, body)
	}
	code, body, h := get(t, url+"/metrics")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain; version=0.0.4") ||
		!strings.Contains(body, `agentry_http_requests_total{route="/hello",method="GET",code="200"} 1`) ||
		!strings.Contains(body, `agentry_http_request_duration_seconds_count{route="/hello"} 1`) {
		t.Errorf("metrics: %d\n%s", code, body)
	}
}

// With MetricsBearerToken, /metrics needs the token; /healthz stays open.
func TestMetricsBearerToken(t *testing.T) {
	url, _, _ := start(t, newCore(coreOptions{Logger: slog.New(slog.DiscardHandler), MetricsBearerToken: "s3cret"}))
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "Bearer wrong", http.StatusUnauthorized},
		{"/metrics", "Bearer s3cret", http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, url+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s (%q): %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusUnauthorized && (resp.Header.Get("WWW-Authenticate") == "" || strings.Contains(string(body), "agentry_http")) {
			t.Errorf("GET %s (%q): a 401 without WWW-Authenticate, or with the metrics", tc.path, tc.auth)
		}
	}
}

func TestInFlightLimit(t *testing.T) {
	s := newCore(coreOptions{MaxInFlight: 1, Logger: slog.New(slog.DiscardHandler)})
	release := make(chan struct{})
	entered := make(chan struct{})
	s.handle("/slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}))
	url, _, _ := start(t, s)
	go http.Get(url + "/slow")
	<-entered
	code, body, h := get(t, url+"/slow")
	close(release)
	if code != 503 || h.Get("Retry-After") != "1" || !strings.Contains(body, "detail") {
		t.Errorf("over the limit: %d %v %s", code, h, body)
	}
}

func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	s := newCore(coreOptions{Logger: slog.New(slog.DiscardHandler)})
	entered := make(chan struct{})
	s.handle("/work", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(100 * time.Millisecond)
		w.Write([]byte("finished"))
	}))
	url, cancel, done := start(t, s)
	var wg sync.WaitGroup
	var body string
	wg.Go(func() { _, body, _ = get(t, url+"/work") })
	<-entered
	cancel()
	wg.Wait()
	if body != "finished" {
		t.Errorf("in-flight request cut off: %q", body)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := http.Get(url + "/work"); err == nil {
		t.Error("still accepting after shutdown")
	}
}

// A long-lived request that only ends when told (an event stream) does
// not hold the shutdown until ShutdownTimeout: OnShutdown ends it.
func TestOnShutdownEndsLongLivedRequests(t *testing.T) {
	s := newCore(coreOptions{Logger: slog.New(slog.DiscardHandler), ShutdownTimeout: time.Hour})
	entered, stop := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.onShutdownFunc(func() { once.Do(func() { close(stop) }) })
	s.handle("/stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-stop
		w.Write([]byte("ended"))
	}))
	url, cancel, done := start(t, s)
	var wg sync.WaitGroup
	var body string
	wg.Go(func() { _, body, _ = get(t, url+"/stream") })
	<-entered
	cancel()
	wg.Wait()
	if body != "ended" {
		t.Errorf("stream body %q", body)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
