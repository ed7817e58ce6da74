package runs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/unavailable"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
)

// While the journal cannot be reached, POST /v1/runs answers 503 with
// Retry-After and no run ID — a run whose start was not journaled would
// be 404 ever after — and so do the reads; once it is back, a run starts
// and its ID is found.
func TestStartWithTheJournalDown(t *testing.T) {
	ctx := context.Background()
	j := &journalfixture.Outage{Journal: govern.NewMemoryJournal()}
	var svc *runs.Service
	g, err := govern.New(ctx, &govern.Options{Journal: j, OnDecision: func(req govern.ApprovalRequest) { svc.OnDecision(req) }})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) { return scripted.Step{Text: "pong"}, nil })
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()},
		Middleware: []agent.Middleware{g.Middleware(&govern.AgentOptions{Name: "echo"})}})
	if err != nil {
		t.Fatal(err)
	}
	if svc, err = runs.New(ctx, &runs.Options{Governor: g, Agents: map[string]*agent.Agent{"echo": a}}); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()

	j.Down.Store(true)
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/runs", `{"agent":"echo","input":"ping"}`},
		{"GET", "/v1/runs", ""},
	} {
		r, _ := http.NewRequest(req.method, srv.URL+req.path, strings.NewReader(req.body))
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the journal down: %d, Retry-After %q", req.method, req.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if _, err := svc.Start(ctx, &runs.StartParams{Agent: "echo", Input: "ping"}); !unavailable.Is(err) {
		t.Errorf("Start with the journal down: %v, want an unavailable error", err)
	}

	j.Down.Store(false)
	run, err := svc.Start(ctx, &runs.StartParams{Agent: "echo", Input: "ping"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := svc.Wait(ctx, run.RequestID); err != nil || got.RequestID != run.RequestID {
		t.Errorf("the run started once the journal is back: %+v %v", got, err)
	}
}

// A run whose start cannot be journaled while the journal still answers
// reads (the window in which the run still executes here) is refused
// too: Start never answers an ID the journal does not hold.
func TestStartWithTheJournalNotWriting(t *testing.T) {
	ctx := context.Background()
	j := &journalfixture.Outage{Journal: govern.NewMemoryJournal()}
	g, err := govern.New(ctx, &govern.Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.NewFunc(func(context.Context, *llm.Request) (scripted.Step, error) { return scripted.Step{Text: "pong"}, nil })
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()},
		Middleware: []agent.Middleware{g.Middleware(&govern.AgentOptions{Name: "echo"})}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := runs.New(ctx, &runs.Options{Governor: g, Agents: map[string]*agent.Agent{"echo": a}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	j.WritesDown.Store(true)
	for range 20 {
		run, err := svc.Start(ctx, &runs.StartParams{Agent: "echo", Input: "ping"})
		if err == nil {
			t.Fatalf("Start answered run %s, whose start was never journaled", run.RequestID)
		}
		if !unavailable.Is(err) {
			t.Errorf("Start: %v, want the journal's unavailability", err)
		}
	}
}
