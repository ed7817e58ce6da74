// Package cputime reads the CPU time the process has used, for
// benchmarks that report CPU per operation: on a machine shared with
// other work it is a steadier figure than wall time.
package cputime

import "time"

// Process returns the CPU time (user and system) the process has used so
// far, and false where the platform does not tell it.
func Process() (time.Duration, bool) { return process() }
