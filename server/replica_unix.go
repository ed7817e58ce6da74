//go:build unix

package server

import (
	"errors"
	"syscall"
)

// processGone reports whether no process pid runs on this host.
func processGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
