//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package journal

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking flock(2) on f. flock locks
// belong to the open file description, so a second Open of the same file
// fails in this process too; the lock goes with the descriptor when it is
// closed, or when the process dies.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		}
		return err
	}
}

// unlockFile has nothing to do: closing f releases its lock.
func unlockFile(*os.File) {}
