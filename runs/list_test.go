package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/runs"
)

// TestList: List returns the runs newest first, from the journal: their
// agent, status and, by status, pending approvals or reasons; it filters
// by status and agent and pages with a limit and a cursor — the same
// after a restart. GET /v1/runs answers it with the next page's cursor;
// bad parameters are a 400. GET /v1/agents names the agents.
func TestList(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t)
	var ids []string
	var approval string
	for _, in := range []string{"status of o-1002?", "please refund o-1001", "status of o-1003?", "please refund o-1001"} {
		run, err := f.svc.Start(ctx, &runs.StartParams{Agent: "support", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		settled, err := f.svc.Wait(ctx, run.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 1 {
			approval = settled.PendingApprovals[0]
		}
		ids = append(ids, run.RequestID)
	}
	if err := f.svc.Cancel(ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	a, b, c, d := // oldest first
		&runs.Run{RequestID: ids[0], Agent: "support", Status: runs.Delivered},
		&runs.Run{RequestID: ids[1], Agent: "support", Status: runs.Paused, PendingApprovals: []string{approval}},
		&runs.Run{RequestID: ids[2], Agent: "support", Status: runs.Delivered},
		&runs.Run{RequestID: ids[3], Agent: "support", Status: runs.FailSafe, Reasons: []govern.Reason{govern.Cancelled}}
	tests := []struct {
		name string
		p    *runs.ListParams
		want []*runs.Run
	}{
		{"all", nil, []*runs.Run{d, c, b, a}},
		{"paused", &runs.ListParams{Status: runs.Paused}, []*runs.Run{b}},
		{"delivered", &runs.ListParams{Status: runs.Delivered}, []*runs.Run{c, a}},
		{"agent", &runs.ListParams{Agent: "support", Status: runs.FailSafe}, []*runs.Run{d}},
		{"other agent", &runs.ListParams{Agent: "nobody"}, nil},
		{"first page", &runs.ListParams{Limit: 2}, []*runs.Run{d, c}},
		{"second page", &runs.ListParams{Limit: 2, After: ids[2]}, []*runs.Run{b, a}},
		{"last page", &runs.ListParams{Limit: 2, After: ids[0]}, nil},
		{"filtered page", &runs.ListParams{Limit: 1, Status: runs.Delivered, After: ids[2]}, []*runs.Run{a}},
	}
	for _, when := range []string{"now", "after a restart"} {
		if when == "after a restart" {
			f.srv.Close()
			f.start(t)
		}
		for _, tc := range tests {
			got, err := f.svc.List(ctx, tc.p)
			if err != nil {
				t.Fatalf("%s: %s: %v", when, tc.name, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(runs.Run{}, "StartedAt", "EndedAt")); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", when, tc.name, diff)
			}
			for _, r := range got {
				ended := r.Status == runs.Delivered || r.Status == runs.FailSafe
				if r.StartedAt == nil || (r.EndedAt != nil) != ended || (ended && r.EndedAt.Before(*r.StartedAt)) {
					t.Errorf("%s: %s: run %s (%s) started %v, ended %v", when, tc.name, r.RequestID, r.Status, r.StartedAt, r.EndedAt)
				}
			}
		}
	}
	for _, p := range []*runs.ListParams{{Status: "done"}, {Limit: -1}, {Limit: runs.MaxListLimit + 1}, {After: "f47ac10b-58cc-4372-a567-0e02b2c3d479"}} {
		if _, err := f.svc.List(ctx, p); !errors.Is(err, runs.InvalidParams) {
			t.Errorf("List(%+v): %v, want InvalidParams", p, err)
		}
	}

	var page struct {
		Runs []*runs.Run
		Next string
	}
	getJSON(t, f.srv.URL+"/v1/runs?limit=2", &page)
	if diff := cmp.Diff([]*runs.Run{d, c}, page.Runs, cmpopts.IgnoreFields(runs.Run{}, "StartedAt", "EndedAt")); diff != "" || page.Next != ids[2] {
		t.Errorf("GET /v1/runs?limit=2: next %q (-want +got):\n%s", page.Next, diff)
	}
	page.Runs, page.Next = nil, ""
	getJSON(t, f.srv.URL+"/v1/runs?limit=2&after="+ids[2], &page)
	if diff := cmp.Diff([]*runs.Run{b, a}, page.Runs, cmpopts.IgnoreFields(runs.Run{}, "StartedAt", "EndedAt")); diff != "" || page.Next != "" {
		t.Errorf("second page: next %q (-want +got):\n%s", page.Next, diff)
	}
	for _, q := range []string{"status=done", "limit=0", "limit=x", "limit=-1", "limit=1001", "after=nobody"} {
		resp, err := http.Get(f.srv.URL + "/v1/runs?" + q)
		if err != nil {
			t.Fatal(err)
		}
		if code, e := readError(t, resp); code != 400 || e.Code != "BAD_REQUEST" {
			t.Errorf("GET /v1/runs?%s: %d %+v", q, code, e)
		}
	}
	// GET /v1/agents and /v1/agents/{name}: each agent with its model
	// and its tools' tiers; an unknown name is a 404.
	type tool struct{ Name, Risk string }
	type agentView struct {
		Name, Description, Model string
		Tools                    []tool
	}
	var agents struct{ Agents []agentView }
	getJSON(t, f.srv.URL+"/v1/agents", &agents)
	want := agentView{Name: "support", Model: "scripted:support",
		Tools: []tool{{"lookup_order", "read_only"}, {"refund_order", "write_high_risk"}}}
	if diff := cmp.Diff([]agentView{want}, agents.Agents); diff != "" {
		t.Errorf("GET /v1/agents (-want +got):\n%s", diff)
	}
	var one agentView
	getJSON(t, f.srv.URL+"/v1/agents/support", &one)
	if diff := cmp.Diff(want, one); diff != "" {
		t.Errorf("GET /v1/agents/support (-want +got):\n%s", diff)
	}
	resp, err := http.Get(f.srv.URL + "/v1/agents/nobody")
	if err != nil {
		t.Fatal(err)
	}
	if code, e := readError(t, resp); code != 404 || e.Code != "UNKNOWN_AGENT" {
		t.Errorf("GET /v1/agents/nobody: %d %+v", code, e)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// journalRuns appends n delivered runs of agent "support" to j, oldest
// first, and returns their request IDs.
func journalRuns(t testing.TB, j govern.Journal, n int) []string {
	t.Helper()
	ids := make([]string, n)
	start, _ := json.Marshal(govern.RunStart{Resumer: "support", Identity: govern.Identity{AgentID: "agent:support"}})
	recs := make([]*govern.Record, 0, 2*n)
	for i := range ids {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		actor := govern.Actor{ID: "agent:support", Kind: govern.ActorAgent}
		at := govern.Time{Time: time.Now().UTC()}
		recs = append(recs,
			&govern.Record{Timestamp: at, Kind: recordkind.RunStarted, RequestID: ids[i], TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Actor: actor, Outcome: govern.Pending, To: govern.Intake, Data: start},
			&govern.Record{Timestamp: at, Kind: recordkind.Transition, RequestID: ids[i], TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Actor: actor, Outcome: govern.Success, From: govern.Verify, To: govern.Deliver})
	}
	if err := j.Append(context.Background(), true, recs...); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestList_TenThousandRuns: 10,000 runs page through GET /v1/runs —
// every run once, newest first, pages of the size asked — as the
// console pages them.
func TestList_TenThousandRuns(t *testing.T) {
	j := govern.NewMemoryJournal()
	ids := journalRuns(t, j, 10_000)
	f := newFixtureWith(t, j, llm.ModelReference{})
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
		var page struct {
			Runs []*runs.Run
			Next string
		}
		getJSON(t, f.srv.URL+"/v1/runs?limit=1000&after="+after, &page)
		if len(page.Runs) != 1000 {
			t.Fatalf("page %d has %d runs", pages, len(page.Runs))
		}
		for _, r := range page.Runs {
			if r.Status != runs.Delivered || r.StartedAt == nil || r.EndedAt == nil {
				t.Fatalf("run %s: %+v", r.RequestID, r)
			}
			got = append(got, r.RequestID)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	slices.Reverse(ids)
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("the runs paged (-want +got):\n%s", diff)
	}
}

// BenchmarkList: one page of 50 runs (the console's) of a journal of
// 10,000, from the middle, once the index is read.
func BenchmarkList(b *testing.B) {
	j := govern.NewMemoryJournal()
	ids := journalRuns(b, j, 10_000)
	f := newFixtureWith(b, j, llm.ModelReference{})
	ctx := context.Background()
	if _, err := f.svc.List(ctx, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		page, err := f.svc.List(ctx, &runs.ListParams{After: ids[5000]})
		if err != nil || len(page) != 50 {
			b.Fatal(len(page), err)
		}
	}
}
