package journaltest_test

import (
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/journaltest"
)

func TestMemoryJournal(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) govern.Journal {
		j := govern.NewMemoryJournal()
		t.Cleanup(func() { j.Close() })
		return j
	})
}
