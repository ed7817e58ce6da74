package approverkey_test

import (
	"github.com/agentry-dev/agentry/govern/governtest"
)

// The checks of governtest, by the names this package's tests use.
var (
	auditJournal = governtest.AuditJournal
	checkWire    = governtest.CheckWire
)
