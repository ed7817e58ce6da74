// Package durable holds the file-system steps that make writes survive a
// crash, shared by every store that writes files (checkpoints, journals,
// audit sinks, key directories).
package durable

import (
	"os"
	"runtime"
)

// SyncDir fsyncs the directory dir, making the creations, renames and
// truncations of files in it durable. On Windows, where directories
// cannot be fsynced, it does nothing.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
