package httpx

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBearer(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	deny := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }
	for _, tc := range []struct {
		name, token, auth string
		want              int
	}{
		{"no token required", "", "", http.StatusNoContent},
		{"the token", "s3cret", "Bearer s3cret", http.StatusNoContent},
		{"none", "s3cret", "", http.StatusUnauthorized},
		{"another", "s3cret", "Bearer s3cre", http.StatusUnauthorized},
		{"another scheme", "s3cret", "Basic s3cret", http.StatusUnauthorized},
		{"a longer one", "s3cret", "Bearer s3cret ", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			Bearer(tc.token, "test", deny, ok).ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d", rec.Code, tc.want)
			}
			if got := rec.Header().Get("WWW-Authenticate"); (tc.want == http.StatusUnauthorized) != (got == `Bearer realm="test"`) {
				t.Errorf("WWW-Authenticate %q", got)
			}
		})
	}
}

func TestWriteJSON(t *testing.T) {
	for _, tc := range []struct {
		name       string
		v          any
		wantStatus int
		wantBody   string
	}{
		{"a value", map[string]int{"a": 1}, http.StatusCreated, "{\"a\":1}\n"},
		{"unencodable", math.Inf(1), http.StatusInternalServerError, "{\"error\":\"internal\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteJSON(rec, http.StatusCreated, tc.v, `{"error":"internal"}`)
			got := map[string]string{"Content-Type": rec.Header().Get("Content-Type"), "Content-Length": rec.Header().Get("Content-Length"),
				"X-Content-Type-Options": rec.Header().Get("X-Content-Type-Options"), "Cache-Control": rec.Header().Get("Cache-Control")}
			want := map[string]string{"Content-Type": "application/json", "Content-Length": strconv.Itoa(len(tc.wantBody)),
				"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
			if rec.Code != tc.wantStatus || rec.Body.String() != tc.wantBody {
				t.Errorf("%d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantStatus, tc.wantBody)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}
