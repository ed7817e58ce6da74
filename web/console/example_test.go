package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/web/console"
)

// Serving the console on a mux of your own; in agentry serve, package
// server mounts it behind its token and login.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("/console/", console.Handler(&console.Options{TraceURL: "http://localhost:16686/trace/{trace_id}"}))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/console/config.json", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 {"token":false,"trace_url":"http://localhost:16686/trace/{trace_id}"}
}
