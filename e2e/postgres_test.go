package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Two `agentry serve` processes on one PostgreSQL behave as one server: a
// session created through one is continued through the other, the calls
// alternating, and both see the final state.
func TestUAIP_TwoServersOnePostgres(t *testing.T) {
	url := os.Getenv("AGENTRY_TEST_POSTGRES")
	if url == "" {
		t.Skip("AGENTRY_TEST_POSTGRES is not set; set it to a PostgreSQL URL to run this test")
	}
	a := startServer(t, "--store", url, "--data", t.TempDir())
	b := startServer(t, "--store", url, "--data", t.TempDir())
	hc := httpClient(4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 5 {
		flow := newStoreFlow(i)
		servers := []*server{a, b}
		if i%2 == 1 {
			servers = []*server{b, a}
		}
		for step := 0; step < flowSteps; step++ {
			srv := servers[step%2]
			if err := flow.next(ctx, srv.client(hc)); err != nil {
				t.Fatalf("flow %d via %s: %v", i, srv.URL, err)
			}
		}
		for _, srv := range servers {
			s, err := srv.client(hc).Session(ctx, flow.id)
			if err != nil || s.Stage != "complete" || s.Version != 8 { // create + 7 changes; the read-only search writes nothing
				t.Errorf("flow %d via %s: %+v, %v", i, srv.URL, s, err)
			}
		}
	}
	a.stop(t)
	b.stop(t)
}

// Two `agentry serve` replicas on one PostgreSQL answer GET /v1/runs/{id}
// alike: a refund started on a pauses; b reports it paused; once it is
// approved through a and delivered, b reports it delivered too (b keeps
// no stale copy of a run it only read).
func TestRuns_TwoServersOneAnswer(t *testing.T) {
	base, u := postgresURL(t)
	store := freshSchema(t, base, u.Host)
	keys := filepath.Join(t.TempDir(), "keys")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: %s", errs)
	}
	a := startServer(t, "--store", store, "--data", t.TempDir(), "--approvers", filepath.Join(keys, "approvers.json"), "--node", "a", "--tls-addr", "")
	b := startServer(t, "--store", store, "--data", t.TempDir(), "--approvers", filepath.Join(keys, "approvers.json"), "--node", "b", "--tls-addr", "")
	code, body := postJSON(t, a.URL+"/v1/runs", `{"agent":"support","input":"refund o-1001","wait":true}`)
	run := decodeRun(t, body)
	if code != http.StatusOK || run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("refund on a: %d %s", code, body)
	}
	if got := getRun(t, b.URL, run.RequestID); got.Status != "paused" {
		t.Fatalf("b reports %+v, want paused", got)
	}
	if code, out, errs := runCLI(t, "approve", run.PendingApprovals[0], "--as", "alice", "--dir", keys, "--server", a.URL); code != 0 {
		t.Fatalf("agentry approve: exit %d\n%s%s", code, out, errs)
	}
	done := waitRun(t, a.URL, run.RequestID)
	if done.Status != "delivered" {
		t.Fatalf("a reports %+v after the approval", done)
	}
	if got := getRun(t, b.URL, run.RequestID); got.Status != "delivered" || got.Output != done.Output {
		t.Errorf("b reports %+v, a %+v", got, done)
	}
}
