package cli

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestApplyGCPercent: --gc-percent sets the collector's target, and an
// explicit GOGC in the environment wins over it.
func TestApplyGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "150")
	if applyGCPercent(300) {
		t.Error("applied --gc-percent although GOGC is set")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent = %d with GOGC set, want it untouched (100)", got)
	}

	os.Unsetenv("GOGC") // t.Setenv restores it afterwards
	if !applyGCPercent(300) {
		t.Error("did not apply --gc-percent without GOGC")
	}
	if got := debug.SetGCPercent(100); got != 300 {
		t.Errorf("GC percent = %d, want 300", got)
	}
}
