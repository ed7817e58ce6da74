//go:build !unix

package sqlstore

import "time"

func cpuTime() time.Duration { return 0 }
