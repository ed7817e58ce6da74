package sqlstore

import (
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/envelope/replaytest"
)

func TestUAMP_6_ReplayStore(t *testing.T) {
	for name, newURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			replaytest.Run(t, func(t *testing.T) (envelope.ReplayStore, func() envelope.ReplayStore) {
				u := newURL(t)
				return openT(t, u).ReplayStore(), func() envelope.ReplayStore { return openT(t, u).ReplayStore() }
			})
		})
	}
}
