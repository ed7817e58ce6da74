package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/internal/providertest"
)

// recorded is one request the fake server received.
type recorded struct {
	Path   string
	Header http.Header
	Body   map[string]any
}

// reply is one scripted HTTP answer.
type reply struct {
	Status  int
	Header  map[string]string
	Body    string // sent as is
	Fixture string // file in testdata, sent as is
}

// fakeServer is an Ollama stand-in replaying scripted replies in order. It
// fails the test on a request beyond the script.
type fakeServer struct {
	t       *testing.T
	URL     string
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

func newServer(t *testing.T, replies ...reply) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		f.t.Errorf("request body is not a JSON object: %v", err)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("unexpected request %d to %s", len(f.reqs), r.URL.Path)
		http.Error(w, `{"error":"unexpected request"}`, http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()

	payload := []byte(rep.Body)
	if rep.Fixture != "" {
		payload = fixture(f.t, rep.Fixture)
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	if rep.Status != 0 {
		w.WriteHeader(rep.Status)
	}
	w.Write(payload)
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ndjson(name string) reply {
	return reply{Fixture: name, Header: map[string]string{"Content-Type": "application/x-ndjson"}}
}

// config points at the fake server with a static key.
func config(url string) llm.ProviderConfig {
	return llm.ProviderConfig{BaseURL: url, APIKey: llm.StaticKey("test-key")}
}

func newLLM(t *testing.T, opts llm.LLMOptions) *llm.LLMInstance {
	t.Helper()
	if opts.Model.Provider == nil {
		opts.Model = Model("llama3.2", nil)
	}
	m, err := llm.LLM(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkGolden compares got, as JSON, with testdata/name; -update rewrites
// the file.
func checkGolden(t *testing.T, name string, got any) {
	t.Helper()
	providertest.CheckJSON(t, filepath.Join("testdata", name), got)
}

// asError returns err as an *llm.Error or fails the test.
func asError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return e
}

// seqIDs makes ids.New deterministic for a test: id-1, id-2, …
type seqIDs struct{ n atomic.Int64 }

func (s *seqIDs) NewID() string { return fmt.Sprintf("id-%d", s.n.Add(1)) }
func (s *seqIDs) Now() time.Time {
	return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
}

func deterministicIDs(t *testing.T) {
	restore := ids.Set(&seqIDs{})
	t.Cleanup(restore)
}

// collect streams and returns the events and the turn.
func collect(t *testing.T, s *llm.StreamResult) ([]llm.StreamEvent, *llm.Turn, error) {
	t.Helper()
	var events []llm.StreamEvent
	for ev, err := range s.Events() {
		if err != nil {
			return events, nil, err
		}
		events = append(events, ev)
	}
	turn, err := s.Turn()
	return events, turn, err
}

// compactJSON is a helper for building expected argument strings.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
