package runs

import (
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
)

// TestNextReap: the reaper passes again at its interval, or just after
// the next lease held elsewhere expires when that comes sooner — never
// in a tight loop, never later than the interval.
func TestNextReap(t *testing.T) {
	const interval = 10 * time.Second
	for _, tc := range []struct {
		name string
		rep  *govern.RecoveryReport
		want time.Duration
	}{
		{"recover failed", nil, interval},
		{"no lease held elsewhere", &govern.RecoveryReport{NextExpiry: -1}, interval},
		{"one expires in 4 s", &govern.RecoveryReport{NextExpiry: 4 * time.Second}, 4*time.Second + interval/30},
		{"one expired already", &govern.RecoveryReport{NextExpiry: 0}, interval / 10},
		{"the next is later than the interval", &govern.RecoveryReport{NextExpiry: time.Minute}, interval},
	} {
		if got := nextReap(tc.rep, interval); got != tc.want {
			t.Errorf("%s: nextReap = %v, want %v", tc.name, got, tc.want)
		}
	}
}
