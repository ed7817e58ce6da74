package e2e

import (
	"context"
	"testing"

	"github.com/agentry-dev/agentry/workflow/uaipconformance"
)

// The binary passes the UAIP-0.1 conformance suite on both stores: no
// check fails (tasks whose arguments need a pattern are skipped).
func TestUAIP_ConformanceKitPasses(t *testing.T) {
	for _, tc := range []struct{ name, store string }{{"sqlite", ""}, {"memory", "memory:"}} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--data", t.TempDir()}
			if tc.store != "" {
				args = append(args, "--store", tc.store)
			}
			srv := startServer(t, args...)
			rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, HTTPClient: httpClient(4)})
			for _, r := range rep.Results {
				if !r.Passed {
					t.Log(r)
				}
			}
			t.Logf("workflow %q: %d passed, %d failed, %d skipped", rep.Workflow, rep.Passed(), rep.Failed(), rep.Skipped())
			if rep.Failed() != 0 || rep.Passed() < 36 || rep.Workflow != "store" {
				t.Errorf("want every check to pass (36 or more), got %d passed, %d failed", rep.Passed(), rep.Failed())
			}
			srv.stop(t)
		})
	}
}
