package workflow_test

import (
	"context"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/governtest"
)

// The checks of governtest, by the names this package's tests use.
var (
	auditJournal = governtest.AuditJournal
	checkWire    = governtest.CheckWire
)

// newGovernor returns a governor for opts whose journal is audited when
// the test ends. Every test that makes a governor makes it here.
func newGovernor(t testing.TB, opts govern.Options) *govern.Governor {
	t.Helper()
	g, err := govern.New(context.Background(), opts)
	if err != nil {
		t.Fatalf("govern.New: %v", err)
	}
	auditJournal(t, g.Journal())
	return g
}
