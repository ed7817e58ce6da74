package runs_test

import (
	"encoding/json"
	"testing"

	"github.com/agentry-dev/agentry/govern/governtest"
	"github.com/agentry-dev/agentry/internal/uaicpschema"
)

// The checks of governtest, by the names this package's tests use.
var (
	auditJournal = governtest.AuditJournal
)

// checkRunWire fails the test unless the envelope in a run's JSON body, if
// it has one, validates against message-envelope.schema.json as sent.
func checkRunWire(t testing.TB, body []byte) {
	t.Helper()
	var r struct {
		Envelope json.RawMessage `json:"envelope"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Envelope) == 0 {
		return // not a run, or no envelope yet: the caller checks what it wanted
	}
	if err := uaicpschema.ValidateEnvelope(r.Envelope); err != nil {
		t.Errorf("wire: run envelope %s: %v", r.Envelope, err)
	}
}
