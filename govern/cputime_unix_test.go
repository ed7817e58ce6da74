//go:build unix

package govern_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used so far:
// on a machine shared with other work, the CPU a benchmark costs is a
// steadier figure than the wall time it takes.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
