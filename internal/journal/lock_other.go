//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package journal

import (
	"os"
	"path/filepath"
	"sync"
)

// Without flock(2) the journal is locked against this process only.
var locked sync.Map // absolute path → struct{}

func lockFile(f *os.File) error {
	p, err := filepath.Abs(f.Name())
	if err != nil {
		return err
	}
	if _, dup := locked.LoadOrStore(p, struct{}{}); dup {
		return ErrLocked
	}
	return nil
}

func unlockFile(f *os.File) {
	if p, err := filepath.Abs(f.Name()); err == nil {
		locked.Delete(p)
	}
}
