package runs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
	"github.com/google/go-cmp/cmp"
)

// getEvents opens GET /v1/runs/{id}/events with Last-Event-ID lastID
// ("" for none).
func getEvents(t *testing.T, ctx context.Context, base, id, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readSSE reads the stream to its end: each event's data is an Event
// whose Seq is the SSE id and whose type is the SSE event type, and the
// stream ends with "ended" and then "run.end", whose data is the settled
// run.
func readSSE(t *testing.T, resp *http.Response) []*runs.Event {
	t.Helper()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var out []*runs.Event
	dec := sse.NewDecoder(resp.Body)
	for {
		e, err := dec.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "run.end" {
			// The last event: the run, as GET /v1/runs/{id} answers it.
			var run runs.Run
			// It sets no id: the last event ID stays "ended"'s (SSE).
			if err := json.Unmarshal(e.Data, &run); err != nil || len(out) == 0 || e.ID != strconv.FormatUint(out[len(out)-1].Seq, 10) ||
				out[len(out)-1].Type != runs.EventEnded || run.RequestID != out[len(out)-1].RequestID || !run.Settled() {
				t.Fatalf("run.end %s (id %q) after %d events: %v", e.Data, e.ID, len(out), err)
			}
			if _, err := dec.Next(); err != io.EOF {
				t.Fatalf("an event after run.end: %v", err)
			}
			return out
		}
		var ev runs.Event
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			t.Fatalf("event %s: %v", e.Data, err)
		}
		if e.ID != strconv.FormatUint(ev.Seq, 10) || e.Type != string(ev.Type) {
			t.Errorf("SSE id %q event %q for %s", e.ID, e.Type, e.Data)
		}
		out = append(out, &ev)
	}
}

// TestEvents_SSE: GET /v1/runs/{id}/events streams the run's events as
// Server-Sent Events ("id:" their Seq) and ends after "ended"; a client
// reconnecting with Last-Event-ID — here after a restart of the server —
// gets the events after it. A bad Last-Event-ID is a 400, an unknown run
// a 404.
func TestEvents_SSE(t *testing.T) {
	ctx := ctxT(t)
	model, open := gatedModel(t, chargeSteps...)
	b := newBench(t, model, runs.Options{})
	run, err := b.svc.Start(ctx, &runs.StartParams{Agent: "clerk", Input: "charge acct-1"})
	if err != nil {
		t.Fatal(err)
	}
	resp := getEvents(t, ctx, b.srv.URL, run.RequestID, "")
	close(open) // the stream is open (its headers came): the run goes on
	live := readSSE(t, resp)
	direct := collect(t, must(pull(t, b.svc.Events(ctx, run.RequestID, 0))))
	if diff := cmp.Diff(durableOf(direct), durableOf(live)); diff != "" || len(live) == len(durableOf(live)) {
		t.Errorf("SSE durable events (-want +got):\n%s\n(model events: %d)", diff, len(live)-len(durableOf(live)))
	}
	if live[len(live)-1].Type != runs.EventEnded {
		t.Errorf("the stream ended with %s", live[len(live)-1].Type)
	}

	b.restart(t)
	durable := durableOf(live)
	last := strconv.FormatUint(durable[3].Seq, 10) // the tool call
	resumed := readSSE(t, getEvents(t, ctx, b.srv.URL, run.RequestID, last))
	if diff := cmp.Diff(durable[4:], resumed); diff != "" {
		t.Errorf("after Last-Event-ID %s (-want +got):\n%s", last, diff)
	}

	for _, tc := range []struct{ id, last, code string }{
		{run.RequestID, "x1", "BAD_REQUEST"},
		{run.RequestID, "-1", "BAD_REQUEST"},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", "", "UNKNOWN_RUN"},
	} {
		resp := getEvents(t, ctx, b.srv.URL, tc.id, tc.last)
		status, e := readError(t, resp)
		if e.Code != tc.code || status != map[string]int{"BAD_REQUEST": 400, "UNKNOWN_RUN": 404}[tc.code] {
			t.Errorf("GET events of %s with Last-Event-ID %q: %d %+v, want %s", tc.id, tc.last, status, e, tc.code)
		}
	}
}

// TestEvents_SSEHeartbeat: while a run is quiet, its event stream sends
// comment lines, so that proxies keep it open.
func TestEvents_SSEHeartbeat(t *testing.T) {
	ctx := ctxT(t)
	b := newBench(t, scripted.New(call("c1", "hold", map[string]any{})), runs.Options{Heartbeat: 100 * time.Millisecond})
	run, err := b.svc.Start(ctx, &runs.StartParams{Agent: "clerk", Input: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	<-b.held // it holds until cancelled: nothing more happens
	resp := getEvents(t, ctx, b.srv.URL, run.RequestID, "")
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), ":") {
			return
		}
	}
	t.Fatalf("the stream ended without a heartbeat: %v", lines.Err())
}
