package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// apis lists both APIs with their fixture directories; most tests run once
// per API.
var apis = []struct {
	api API
	dir string
}{
	{ChatCompletions, "chat"},
	{Responses, "responses"},
}

// forEachAPI runs f as a subtest per API.
func forEachAPI(t *testing.T, f func(t *testing.T, api API, dir string)) {
	for _, a := range apis {
		t.Run(a.dir, func(t *testing.T) { f(t, a.api, a.dir) })
	}
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// reply is one scripted HTTP answer of the fake server.
type reply struct {
	status int
	header map[string]string
	body   []byte
	sse    bool
	hang   bool
}

func jsonReply(body []byte) reply { return reply{status: 200, body: body} }
func sseReply(body []byte) reply  { return reply{status: 200, body: body, sse: true} }
func errorReply(status int, body []byte, header map[string]string) reply {
	return reply{status: status, body: body, header: header}
}

// recorded is one request the fake server received.
type recorded struct {
	method string
	path   string
	header http.Header
	body   map[string]any
}

// fakeServer replays scripted replies and records requests. A request
// with no reply left fails the test.
type fakeServer struct {
	t        testing.TB
	srv      *httptest.Server
	mu       sync.Mutex
	replies  []reply
	requests []recorded
}

func newFake(t testing.TB, replies ...reply) *fakeServer {
	f := &fakeServer{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			f.t.Errorf("request body is not JSON: %v", err)
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
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
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rep.status)
	w.Write(rep.body)
}

func (f *fakeServer) got() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

// config points a model at the fake server with a test key.
func (f *fakeServer) config() llm.ProviderConfig {
	return llm.ProviderConfig{BaseURL: f.srv.URL, APIKey: llm.StaticKey("test-key")}
}

func testModel(api API) llm.ModelReference {
	return Model("gpt-4.1", &Options{API: api})
}

func newInstance(t testing.TB, f *fakeServer, opts llm.LLMOptions) *llm.LLMInstance {
	t.Helper()
	cfg := f.config()
	if opts.Config.RetryStrategy != nil {
		cfg.RetryStrategy, cfg.RetryAfterMax = opts.Config.RetryStrategy, opts.Config.RetryAfterMax
	}
	opts.Config = cfg
	inst, err := llm.LLM(&opts)
	if err != nil {
		t.Fatalf("llm.LLM: %v", err)
	}
	return inst
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkGolden compares a request body with testdata/golden/<name>.json,
// rewriting the file under -update.
func checkGolden(t *testing.T, name string, body map[string]any) {
	t.Helper()
	providertest.CheckJSON(t, filepath.Join("testdata", "golden", name+".json"), body)
}

// llmError asserts err is an *llm.Error and returns it.
func llmError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return e
}

// eventLog records a handler-level stream's events.
type eventLog struct {
	mu  sync.Mutex
	evs []llm.StreamEvent
}

func (l *eventLog) emit(ev llm.StreamEvent) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

// simplified renders events compactly for comparison.
func simplified(evs []llm.StreamEvent) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		s := string(ev.Type)
		switch ev.Type {
		case llm.MessageStart, llm.MessageStop:
		case llm.ContentBlockStart:
			s += fmt.Sprintf(" %d", ev.Index)
			if ev.Delta.ToolCallID != "" {
				s += " " + ev.Delta.ToolCallID + " " + ev.Delta.ToolName
			}
		case llm.ContentBlockStop:
			s += fmt.Sprintf(" %d", ev.Index)
		case llm.ToolCallDelta:
			s += fmt.Sprintf(" %d", ev.Index) + " " + ev.Delta.ToolCallID + " " + ev.Delta.ToolName + " " + ev.Delta.ArgumentsJSON
		default:
			s += fmt.Sprintf(" %d", ev.Index) + " " + ev.Delta.Text
		}
		out = append(out, s)
	}
	return out
}
