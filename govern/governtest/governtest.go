// Package governtest checks, in tests, that what a governor emitted is
// what UAICP 0.3 (github.com/UAICP/uaicp) allows: a journal whose hash chain
// holds and whose records carry schema-valid evidence, reports and
// envelopes, and wire objects that validate against their schemas.
//
//	g, _ := govern.New(ctx, &govern.Options{Journal: j})
//	governtest.AuditJournal(t, j) // checked when the test ends
//	env, _ := run.Deliver(ctx, out)
//	governtest.CheckWire(t, env)
package governtest

import (
	"context"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/uaicpschema"
)

// CheckJournal reads every record of j and returns the first problem: a
// broken hash chain (govern.VerifyChain) or an object a record carries
// that does not validate (uaicpschema.CheckRecords).
func CheckJournal(ctx context.Context, j govern.Journal) error {
	if _, err := govern.VerifyChain(ctx, j); err != nil {
		return err
	}
	var recs []govern.Record
	for r, err := range j.Records(ctx, 1) {
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	return uaicpschema.CheckRecords(recs)
}

// AuditJournal registers a check of j (CheckJournal) that runs when the
// test ends. Call it where the journal or governor is made, so that no
// test can forget it; cleanups run last-registered first, so register it
// before anything that must stop writing to j first.
func AuditJournal(t testing.TB, j govern.Journal) {
	t.Helper()
	t.Cleanup(func() {
		// t.Context is done by now.
		if err := CheckJournal(context.Background(), j); err != nil {
			t.Errorf("governtest: journal: %v", err)
		}
	})
}

// CheckWire fails the test unless v — a govern.Envelope, Evidence or
// Report, a pointer to one — validates against its UAICP
// schema.
func CheckWire(t testing.TB, v any) {
	t.Helper()
	if err := uaicpschema.Validate(v); err != nil {
		t.Errorf("governtest: %T does not validate: %v", v, err)
	}
}
