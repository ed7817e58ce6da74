package e2e

import (
	"context"
	"os"
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
