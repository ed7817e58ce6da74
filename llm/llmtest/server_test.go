package llmtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/llm/llmtest"
	"github.com/google/go-cmp/cmp"
)

// toyVendor is a minimal wire format: the request is {"prompt","stream"},
// a reply {"text","stream"}, an error {"error"}.
type toyVendor struct{}

func (toyVendor) Observe(r *http.Request, body []byte) (llmtest.Observed, error) {
	var req struct {
		Prompt string `json:"prompt"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return llmtest.Observed{}, fmt.Errorf("body: %v", err)
	}
	return llmtest.Observed{Stream: req.Stream, UserTexts: []string{req.Prompt}}, nil
}

func (toyVendor) WriteReply(w http.ResponseWriter, obs llmtest.Observed, reply llmtest.Reply) {
	json.NewEncoder(w).Encode(map[string]any{"text": reply.Text, "stream": obs.Stream})
}

func (toyVendor) WriteError(w http.ResponseWriter, reply llmtest.Reply) {
	w.WriteHeader(reply.Status)
	json.NewEncoder(w).Encode(map[string]any{"error": reply.ErrorMessage})
}

// errorsTB records the errors a test reports instead of failing.
type errorsTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func (e *errorsTB) reported() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.errs...)
}

func post(t *testing.T, tg llmtest.Target, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, tg.Config.BaseURL+"/v1/toy", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func TestNewServerReplies(t *testing.T) {
	tg := llmtest.NewServer(t, toyVendor{})
	if tg.Script == nil || tg.Requests == nil || tg.Config.BaseURL == "" {
		t.Fatalf("target not wired: %+v", tg)
	}
	tg.Script(llmtest.Reply{Text: "one"}, llmtest.Reply{Text: "two"})
	for _, c := range []struct{ body, want string }{
		{`{"prompt":"a"}`, `{"stream":false,"text":"one"}`},
		{`{"prompt":"b","stream":true}`, `{"stream":true,"text":"two"}`},
	} {
		resp, got := post(t, tg, c.body)
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(got) != c.want {
			t.Errorf("%s: HTTP %d %s, want %s", c.body, resp.StatusCode, got, c.want)
		}
	}
	want := []llmtest.Observed{{UserTexts: []string{"a"}}, {Stream: true, UserTexts: []string{"b"}}}
	if diff := cmp.Diff(want, tg.Requests()); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
}

func TestNewServerErrorReply(t *testing.T) {
	tg := llmtest.NewServer(t, toyVendor{})
	tg.Script(llmtest.Reply{Status: 429, ErrorMessage: "slow down", RetryAfter: 1500 * time.Millisecond})
	resp, body := post(t, tg, `{"prompt":"a"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "slow down") {
		t.Errorf("got HTTP %d, Retry-After %q, body %s; want 429, 2 (seconds, rounded up), the message",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

func TestNewServerHang(t *testing.T) {
	tg := llmtest.NewServer(t, toyVendor{})
	tg.Script(llmtest.Reply{Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.Config.BaseURL, strings.NewReader(`{"prompt":"a"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("hanging reply status %d, want 200", resp.StatusCode)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("the body ended (%v) before the request was cancelled", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	if err := <-read; err == nil {
		t.Error("reading the cancelled body succeeded")
	}
}

// TestNewServerHangReleased checks that a request left hanging does not
// keep the test from ending.
func TestNewServerHangReleased(t *testing.T) {
	done := make(chan struct{})
	t.Run("hang", func(t *testing.T) {
		tg := llmtest.NewServer(t, toyVendor{})
		tg.Script(llmtest.Reply{Hang: true})
		go func() {
			defer close(done)
			resp, err := http.Post(tg.Config.BaseURL, "application/json", strings.NewReader(`{"prompt":"a"}`))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		for len(tg.Requests()) == 0 {
			time.Sleep(time.Millisecond)
		}
	})
	<-done
}

func TestNewServerFailsTheTest(t *testing.T) {
	for _, c := range []struct {
		name, body string
		status     int
		requests   int
		err        string
	}{
		{"empty queue", `{"prompt":"a"}`, http.StatusInternalServerError, 1, "no scripted reply"},
		{"undecodable request", `not json`, http.StatusBadRequest, 0, "body:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &errorsTB{TB: t}
			tg := llmtest.NewServer(tb, toyVendor{})
			resp, _ := post(t, tg, c.body)
			if resp.StatusCode != c.status {
				t.Errorf("HTTP %d, want %d", resp.StatusCode, c.status)
			}
			if got := tb.reported(); len(got) != 1 || !strings.Contains(got[0], c.err) {
				t.Errorf("test errors %q, want one about %q", got, c.err)
			}
			if got := len(tg.Requests()); got != c.requests {
				t.Errorf("%d requests recorded, want %d", got, c.requests)
			}
		})
	}
}
