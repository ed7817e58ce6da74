package cputime

import (
	"runtime"
	"testing"
)

// TestProcess: on Unix the CPU time is read and grows with work.
func TestProcess(t *testing.T) {
	before, ok := Process()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		if ok {
			t.Fatal("CPU time reported where it is not measured")
		}
		return
	}
	if !ok {
		t.Fatal("no CPU time on a Unix system")
	}
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		if after, _ := Process(); after > before {
			break
		}
	}
	_ = x
}
