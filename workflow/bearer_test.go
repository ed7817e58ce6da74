package workflow_test

import (
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentry-dev/agentry/workflow"
)

// TestUAIP_BearerRefusalWire pins the 401 byte for byte: the challenge's
// realm and a UAIP error body; a CORS preflight passes without the token.
func TestUAIP_BearerRefusalWire(t *testing.T) {
	h := workflow.NewHandler(workflow.NewEngine(newMapStore(), nil), &workflow.HandlerOptions{BearerToken: "s3cret", CORSOrigins: []string{"https://app.example"}})
	for _, tc := range []struct {
		method string
		want   map[string]string
	}{
		{"POST", map[string]string{
			"status":           "401",
			"WWW-Authenticate": `Bearer realm="uaip"`,
			"Content-Type":     "application/json",
			"Content-Length":   "26",
			"body":             `{"detail":"Unauthorized"}` + "\n",
		}},
		{"OPTIONS", map[string]string{
			"status":           "405",
			"WWW-Authenticate": "",
			"Content-Type":     "application/json",
			"Content-Length":   "32",
			"body":             `{"detail":"Method Not Allowed"}` + "\n",
		}},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, "/initialize", nil))
		got := map[string]string{"status": strconv.Itoa(w.Code), "body": w.Body.String()}
		for k := range tc.want {
			if k != "status" && k != "body" {
				got[k] = w.Header().Get(k)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s refusal (-want +got):\n%s", tc.method, diff)
		}
	}
}
