package gemini

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/providertest"
)

// testKey is the API key the tests use; it must never appear in an error.
const testKey = "test-key-5ecr3t"

// reply is one scripted HTTP answer of a fakeServer.
type reply struct {
	status int
	header map[string]string
	body   string
}

// recorded is one request a fakeServer received.
type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// fakeServer replays scripted replies in order and records the requests.
// A request beyond the script fails the test.
type fakeServer struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	replies  []reply
	requests []recorded
}

func newFakeServer(t *testing.T, replies ...reply) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, recorded{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL)
		http.Error(w, `{"error":{"code":500,"message":"unexpected request","status":"INTERNAL"}}`, http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.status == 0 {
		rep.status = http.StatusOK
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (f *fakeServer) config() llm.ProviderConfig {
	return llm.ProviderConfig{BaseURL: f.srv.URL, APIKey: llm.StaticKey(testKey)}
}

func (f *fakeServer) request(i int) recorded {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.requests) {
		f.t.Fatalf("request %d was never made (%d made)", i, len(f.requests))
	}
	return f.requests[i]
}

func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonReply(t *testing.T, name string) reply {
	return reply{header: map[string]string{"Content-Type": "application/json"}, body: fixture(t, name)}
}

func sseReply(t *testing.T, name string) reply {
	return reply{header: map[string]string{"Content-Type": "text/event-stream"}, body: fixture(t, name)}
}

func errorReply(t *testing.T, status int, name string) reply {
	return reply{status: status, header: map[string]string{"Content-Type": "application/json"}, body: fixture(t, name)}
}

// checkGolden compares a request body with testdata/golden/<name>.json
// (rewritten with -update).
func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	providertest.CheckJSON(t, filepath.Join("testdata", "golden", name+".json"), json.RawMessage(body))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newLLM(t *testing.T, opts llm.LLMOptions) *llm.LLMInstance {
	t.Helper()
	if opts.Model.Provider == nil {
		opts.Model = Model("gemini-2.5-flash", nil)
	}
	inst, err := llm.LLM(&opts)
	if err != nil {
		t.Fatalf("llm.LLM: %v", err)
	}
	return inst
}

// collect drains a stream, returning its events and its turn.
func collect(s *llm.StreamResult) ([]llm.StreamEvent, *llm.Turn, error) {
	var evs []llm.StreamEvent
	for ev, err := range s.Events() {
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	turn, err := s.Turn()
	return evs, turn, err
}

func errorCode(t *testing.T, err error) *llm.Error {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	e, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return e
}

// cloneJSON returns v's JSON form decoded, a deep copy for comparisons.
func cloneJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
