package approvalapi_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/govern/approvalapi"
)

// TestBearerRefusalWire pins the 401 byte for byte: the challenge's
// realm, the headers and the body in this API's error shape.
func TestBearerRefusalWire(t *testing.T) {
	h := approvalapi.NewHandler(nil, &approvalapi.Options{BearerToken: "s3cret"})
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/v1/approvals", nil)
	r.Header.Set("Authorization", "Bearer wrong")
	h.ServeHTTP(w, r)
	want := map[string]string{
		"status":                 "401",
		"WWW-Authenticate":       `Bearer realm="agentry-approvals"`,
		"Content-Type":           "application/json",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
		"body":                   `{"error":{"code":"UNAUTHORIZED","message":"a valid bearer token is required"}}` + "\n",
	}
	got := map[string]string{"status": strconv.Itoa(w.Code), "body": w.Body.String()}
	for k := range want {
		if k != "status" && k != "body" {
			got[k] = w.Header().Get(k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusal (-want +got):\n%s", diff)
	}
}

// TestNewHandlerNilOptions: nil options are the defaults: no bearer
// check, so an unknown path gets this API's 404.
func TestNewHandlerNilOptions(t *testing.T) {
	w := httptest.NewRecorder()
	approvalapi.NewHandler(nil, nil).ServeHTTP(w, httptest.NewRequest("GET", "/nowhere", nil))
	if w.Code != 404 || !strings.Contains(w.Body.String(), `"NOT_FOUND"`) {
		t.Errorf("NewHandler(nil, nil): %d %s", w.Code, w.Body)
	}
}
