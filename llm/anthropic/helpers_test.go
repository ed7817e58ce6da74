package anthropic

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/providertest"
)

// reply is one scripted HTTP answer of the fake server.
type reply struct {
	status  int
	headers map[string]string
	body    string
	sse     bool
	// hang accepts the request and sends nothing until it is cancelled.
	hang bool
	// partial writes body, flushes, then hangs (an idle stream).
	partial bool
}

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonReply(t testing.TB, name string) reply {
	return reply{status: http.StatusOK, body: readFixture(t, name)}
}

func sseReply(t testing.TB, name string) reply {
	return reply{status: http.StatusOK, body: readFixture(t, name), sse: true}
}

func errorReply(t testing.TB, status int, name string) reply {
	return reply{status: status, body: readFixture(t, filepath.Join("errors", name+".json"))}
}

// recorded is one request the fake server received.
type recorded struct {
	method string
	path   string
	header http.Header
	raw    []byte
	body   map[string]any
}

// fake is an httptest server replaying scripted replies in order; a
// request beyond the script fails the test.
type fake struct {
	t        testing.TB
	srv      *httptest.Server
	mu       sync.Mutex
	replies  []reply
	requests []*recorded
}

func newFake(t testing.TB, replies ...reply) *fake {
	f := &fake{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rec := &recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), raw: raw}
	_ = json.Unmarshal(raw, &rec.body)
	f.mu.Lock()
	f.requests = append(f.requests, rec)
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("unexpected request %d to %s", len(f.requests), r.URL.Path)
		http.Error(w, "no scripted reply", http.StatusTeapot)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()

	if rep.hang {
		<-r.Context().Done()
		return
	}
	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	if rep.sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
	if rep.partial {
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

func (f *fake) reqs() []*recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*recorded(nil), f.requests...)
}

// newLLM binds an LLM instance to the fake server with a static key;
// Params default to {"max_tokens": 1024}.
func newLLM(t testing.TB, f *fake, o llm.LLMOptions, opts *Options) *llm.LLMInstance {
	t.Helper()
	o.Model = Model("claude-sonnet-4-5", opts)
	if o.Config.BaseURL == "" {
		o.Config.BaseURL = f.srv.URL
	}
	if o.Config.APIKey == nil {
		o.Config.APIKey = llm.StaticKey("test-key")
	}
	if o.Params == nil {
		o.Params = map[string]any{"max_tokens": 1024}
	}
	inst, err := llm.LLM(&o)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// checkGolden compares a request body with testdata/golden/<name>.json,
// rewriting the file under -update.
func checkGolden(t testing.TB, name string, body []byte) {
	t.Helper()
	providertest.CheckJSON(t, filepath.Join("testdata", "golden", name+".json"), json.RawMessage(body))
}

// collect gathers a stream's events, failing the test on error.
func collect(t testing.TB, s *llm.StreamResult) []llm.StreamEvent {
	t.Helper()
	var evs []llm.StreamEvent
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// providerEvents drops the core's tool execution events (their timestamps
// vary), leaving what the provider emitted.
func providerEvents(evs []llm.StreamEvent) []llm.StreamEvent {
	var out []llm.StreamEvent
	for _, ev := range evs {
		if ev.Type != llm.ToolExecutionStart && ev.Type != llm.ToolExecutionEnd {
			out = append(out, ev)
		}
	}
	return out
}

func asError(t testing.TB, err error) *llm.Error {
	t.Helper()
	if err == nil {
		t.Fatal("got no error")
	}
	e, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error is %T, not *llm.Error: %v", err, err)
	}
	return e
}
