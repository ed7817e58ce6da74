package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/spf13/cobra"
)

// runConformance runs "agentry conformance ARGS" the way run does, with
// conformanceCmd mounted on a root of its own.
func runConformance(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	root := &cobra.Command{Use: "agentry", SilenceUsage: true, SilenceErrors: true}
	root.SetArgs(append([]string{"conformance"}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	root.AddCommand(conformanceCmd(e))
	err := root.ExecuteContext(context.Background())
	if err != nil {
		errb.WriteString("agentry: " + err.Error() + "\n")
	}
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
	case isCobraUsage(err):
		code = 2
	default:
		code = 1
	}
	return code, out.String(), errb.String()
}

func uaipServer(t *testing.T, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	e := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := e.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	h := workflow.NewHandler(e, &workflow.HandlerOptions{BearerToken: "tok"})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestConformanceUAIPPasses(t *testing.T) {
	srv := uaipServer(t, nil)
	code, out, errs := runConformance(t, "uaip", "--url", srv.URL, "--token", "tok")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if last != "36 passed, 0 failed (3 skipped)" {
		t.Errorf("summary %q", last)
	}
	if len(lines) != 40 || !strings.HasPrefix(lines[0], "PASS  schema/get  [GET /api/workflows/{name}: Response]") {
		t.Errorf("want one line per check:\n%s", out)
	}
}

func TestConformanceUAIPFailuresExit1(t *testing.T) {
	// A server that answers the invalid-action case with 200 "Error: …".
	srv := uaipServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code == http.StatusUnprocessableEntity && strings.Contains(rec.Body.String(), "action type") {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`"Error: Invalid action"`))
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	})
	code, out, errs := runConformance(t, "uaip", "--url", srv.URL, "--token", "tok", "--workflow", "store")
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	if !strings.Contains(out, "FAIL  execute/422-invalid-action  [Errors: 422 Invalid action type]  want: HTTP 422") ||
		!strings.Contains(out, `Error: Invalid action`) || !strings.Contains(out, "35 passed, 1 failed") {
		t.Errorf("stdout:\n%s", out)
	}
	if !strings.Contains(errs, "1 of 39 checks failed") {
		t.Errorf("stderr %q", errs)
	}
}

func TestConformanceUAIPJSON(t *testing.T) {
	srv := uaipServer(t, nil)
	code, out, _ := runConformance(t, "uaip", "--url", srv.URL, "--token", "tok", "--json")
	var rep struct {
		Workflow string `json:"workflow"`
		Results  []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		} `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Workflow != "store" || len(rep.Results) != 39 {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestConformanceUsage(t *testing.T) {
	if code, _, _ := runConformance(t, "uaip", "--url", ""); code != 2 {
		t.Errorf("empty --url: exit %d", code)
	}
	if code, _, _ := runConformance(t, "uaip", "extra"); code != 2 {
		t.Errorf("an argument: exit %d", code)
	}
}

// conformance uaip warns that it calls the server's tasks, and with
// --read-only it sends no method_call for a task that may write.
func TestConformanceUAIPReadOnly(t *testing.T) {
	var mu sync.Mutex
	var tasks []string
	srv := uaipServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/execute" {
				body, _ := io.ReadAll(r.Body)
				var req struct{ Action, Task string }
				if json.Unmarshal(body, &req) == nil && req.Action == "method_call" {
					mu.Lock()
					tasks = append(tasks, req.Task)
					mu.Unlock()
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			h.ServeHTTP(w, r)
		})
	})
	code, out, errs := runConformance(t, "uaip", "--url", srv.URL, "--token", "tok", "--read-only", "--json")
	var rep struct {
		ReadOnly bool `json:"read_only"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.ReadOnly {
		t.Fatalf("exit %d: %s\n%s", code, out, errs)
	}
	mu.Lock()
	called := strings.Join(tasks, " ")
	mu.Unlock()
	for _, write := range []string{"add_to_cart", "remove_from_cart", "place_order", "cancel_order"} {
		if strings.Contains(called, write) {
			t.Errorf("--read-only sent a method_call for %s (write tier): %s", write, called)
		}
	}
	if !strings.Contains(called, "search_products") || !strings.Contains(called, "view_cart") {
		t.Errorf("--read-only did not call the read-only tasks: %s", called)
	}
	_, help, _ := runConformance(t, "uaip", "--help")
	for _, want := range []string{"WARNING", "real side", "--read-only"} {
		if !strings.Contains(help, want) {
			t.Errorf("conformance uaip --help does not say %q", want)
		}
	}
}
