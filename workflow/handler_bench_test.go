package workflow_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
)

// BenchmarkHandlerExecute measures one /execute method_call of the
// built-in store, in process (no network): the handler's own cost per
// request, which bench/uaip.sh measures end to end over loopback.
func BenchmarkHandlerExecute(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"view_cart", `{"workflow_name":"store","action":"method_call","task":"view_cart","args":{}}`},
		{"add_to_cart", `{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-005","quantity":1}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := workflow.NewEngine(memstore.New().Sessions(), nil)
			if err := e.Register(builtin.Store()); err != nil {
				b.Fatal(err)
			}
			h := workflow.NewHandler(e, nil)
			call := func(session, body, path string) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if session != "" {
					req.Header.Set("X-Session-Id", session)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", body, rec.Code, rec.Body)
				}
				return rec
			}
			newSession := func() string { // a session in stage cart
				var init struct {
					SessionID string `json:"session_id"`
				}
				if err := json.Unmarshal(call("", `{"workflow_name":"store"}`, "/initialize").Body.Bytes(), &init); err != nil {
					b.Fatal(err)
				}
				call(init.SessionID, `{"workflow_name":"store","action":"stage_transition","stage":"cart"}`, "/execute")
				return init.SessionID
			}
			sid, n := newSession(), 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if n++; n == 100 { // SKU-005 has 100 in stock
					b.StopTimer()
					sid, n = newSession(), 0
					b.StartTimer()
				}
				call(sid, tc.body, "/execute")
			}
		})
	}
}
