package peertest

import (
	"testing"
)

// recorder is a testing.TB that records whether it was skipped or failed.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
}

func TestMissing(t *testing.T) {
	t.Setenv("PEERTEST_REQUIRE", "")
	r := &recorder{TB: t}
	Missing(r, "PEERTEST_REQUIRE", "node is missing")
	if !r.skipped || r.failed {
		t.Errorf("without the variable: skipped %v, failed %v; want a skip", r.skipped, r.failed)
	}
	t.Setenv("PEERTEST_REQUIRE", "1")
	r = &recorder{TB: t}
	Missing(r, "PEERTEST_REQUIRE", "node is missing")
	if !r.failed || r.skipped {
		t.Errorf("with the variable: skipped %v, failed %v; want a failure", r.skipped, r.failed)
	}
}
