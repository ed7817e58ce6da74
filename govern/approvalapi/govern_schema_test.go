package approvalapi_test

import (
	"errors"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/governtest"
)

// The checks of governtest, by the names this package's tests use.
var (
	auditJournal = governtest.AuditJournal
	checkWire    = governtest.CheckWire
)

// checkInvoke checks on the wire what Run.Invoke returned: the envelope
// and evidence of an invocation, or the envelope a *govern.Error carries.
func checkInvoke(t testing.TB, inv *govern.Invocation, err error) {
	t.Helper()
	if inv != nil {
		checkWire(t, inv.Envelope)
		for _, e := range inv.Evidence {
			checkWire(t, e)
		}
	}
	if ge := (*govern.Error)(nil); errors.As(err, &ge) && ge.Envelope != nil {
		checkWire(t, ge.Envelope)
	}
}
