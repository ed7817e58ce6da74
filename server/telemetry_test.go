package server

import "testing"

// TestRouteOf: http.route is the pattern's path, without the method or
// host (OpenTelemetry HTTP semantic conventions).
func TestRouteOf(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"GET /v1/runs/{id}", "/v1/runs/{id}"},
		{"POST /execute", "/execute"},
		{"/v1/runs/", "/v1/runs/"},
		{"GET example.com/x/{y}", "/x/{y}"},
		{"example.com/", "/"},
	} {
		if got := routeOf(tc.pattern); got != tc.want {
			t.Errorf("routeOf(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}
