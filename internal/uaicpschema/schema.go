// Package uaicpschema validates UAICP 0.3 contract objects against the
// specification's normative JSON schemas (github.com/UAICP/uaicp §6):
// message-envelope.schema.json, evidence-object.schema.json and
// verification-report.schema.json, embedded verbatim (SOURCES.txt names
// their origin; the upstream baseline fixtures are in testdata/fixtures).
//
// The schemas are compiled once, with format assertion on (uuid,
// date-time), and never fetched: their $id host serves older (v0.2)
// copies, so the embedded documents are registered under their $id and
// every other reference is refused.
//
// Validation follows RFC 3339 and RFC 4122 as implemented by
// github.com/santhosh-tekuri/jsonschema/v6. The upstream runner uses Ajv
// with ajv-formats, which is laxer in two places: its uuid also accepts a
// "urn:uuid:" prefix and its date-time also accepts a space instead of
// "T". Both forms fail here.
//
// The validators are for conformance checks and tests. Bytes from a peer
// go through govern.DecodeEnvelope, DecodeEvidence and DecodeReport,
// which accept only what these schemas accept, plus a few stricter rules,
// and bound their input: the validator itself checks "integer" with
// math/big, so a number of a million digits costs it seconds.
package uaicpschema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/internal/schemas"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/schemafail"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The file names of the three schemas.
const (
	envelopeFile = "message-envelope.schema.json"
	evidenceFile = "evidence-object.schema.json"
	reportFile   = "verification-report.schema.json"
)

var (
	//go:embed message-envelope.schema.json
	envelopeJSON []byte
	//go:embed evidence-object.schema.json
	evidenceJSON []byte
	//go:embed verification-report.schema.json
	reportJSON []byte
)

// compiled holds the three compiled schemas.
type compiled struct {
	envelope, evidence, report *jsonschema.Schema
}

var embeddedSchemas = sync.OnceValue(func() compiled {
	c := schemas.NewCompiler()
	compile := func(file string, doc []byte) *jsonschema.Schema { return schemas.Embedded(c, "schema/"+file, doc) }
	return compiled{
		envelope: compile(envelopeFile, envelopeJSON),
		evidence: compile(evidenceFile, evidenceJSON),
		report:   compile(reportFile, reportJSON),
	}
})

// ValidationError says why a document does not match its schema.
type ValidationError struct {
	// Schema is the file name of the schema, such as EnvelopeFile.
	Schema string
	// Failures lists every failing keyword, sorted by instance path.
	Failures []failure
}

// failure is one failing schema keyword.
type failure = schemafail.Failure

// Error returns "uaicp: does not match SCHEMA" followed by each
// failure's instance path and message.
func (e *ValidationError) Error() string {
	return "uaicp: " + schemafail.Describe(e.Schema, e.Failures)
}

// ValidateEnvelope validates the JSON text b against
// message-envelope.schema.json. A mismatch is a *ValidationError; text
// that is not one JSON value is another error.
func ValidateEnvelope(b []byte) error { return validate(embeddedSchemas().envelope, envelopeFile, b) }

// ValidateEvidence validates the JSON text b against
// evidence-object.schema.json, like ValidateEnvelope.
func ValidateEvidence(b []byte) error { return validate(embeddedSchemas().evidence, evidenceFile, b) }

// ValidateReport validates the JSON text b against
// verification-report.schema.json, like ValidateEnvelope.
func ValidateReport(b []byte) error { return validate(embeddedSchemas().report, reportFile, b) }

// Validate encodes v, a govern.Envelope, govern.Evidence or govern.Report
// (or a non-nil pointer to one), with encoding/json and validates the
// result against its schema. Any other type is an error.
func Validate(v any) error {
	var sch *jsonschema.Schema
	var file string
	switch x := v.(type) {
	case govern.Envelope:
		sch, file = embeddedSchemas().envelope, envelopeFile
	case *govern.Envelope:
		if x == nil {
			return errors.New("uaicp: schema.Validate: nil *govern.Envelope")
		}
		sch, file = embeddedSchemas().envelope, envelopeFile
	case govern.Evidence:
		sch, file = embeddedSchemas().evidence, evidenceFile
	case *govern.Evidence:
		if x == nil {
			return errors.New("uaicp: schema.Validate: nil *govern.Evidence")
		}
		sch, file = embeddedSchemas().evidence, evidenceFile
	case govern.Report:
		sch, file = embeddedSchemas().report, reportFile
	case *govern.Report:
		if x == nil {
			return errors.New("uaicp: schema.Validate: nil *govern.Report")
		}
		sch, file = embeddedSchemas().report, reportFile
	default:
		return fmt.Errorf("uaicp: schema.Validate: %T is not a govern.Envelope, govern.Evidence or govern.Report", v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("uaicp: encoding %T: %w", v, err)
	}
	return validate(sch, file, b)
}

func validate(sch *jsonschema.Schema, file string, b []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("uaicp: %s: not a JSON document: %w", file, err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("uaicp: %s: %w", file, err)
	}
	return &ValidationError{Schema: file, Failures: schemafail.Failures(ve)}
}

// CheckRecords validates every contract object embedded in journal
// records: the evidence of invocation_commit and invocation_failed records
// (CallOutcome.Evidence), the Evidence of evidence records and the Report
// of verification records, as recorded (not re-encoded). It returns every
// problem, joined, each naming the record's seq and kind; nil when all
// validate. It is meant for tests: a governed run's journal must carry
// only valid UAICP objects.
func CheckRecords(recs []govern.Record) error {
	var errs []error
	bad := func(r govern.Record, what string, err error) {
		errs = append(errs, fmt.Errorf("record %d (%s)%s: %w", r.Seq, r.Kind, what, err))
	}
	for _, r := range recs {
		switch r.Kind {
		case recordkind.Commit, recordkind.Failed:
			var out map[string]json.RawMessage
			if err := json.Unmarshal(r.Data, &out); err != nil {
				bad(r, "", fmt.Errorf("data is not a call outcome: %w", err))
				continue
			}
			raw, ok := out["evidence"]
			if !ok {
				continue
			}
			var evs []json.RawMessage
			if err := json.Unmarshal(raw, &evs); err != nil {
				bad(r, ".evidence", fmt.Errorf("not an array: %w", err))
				continue
			}
			for i, ev := range evs {
				if err := ValidateEvidence(ev); err != nil {
					bad(r, fmt.Sprintf(".evidence[%d]", i), err)
				}
			}
		case recordkind.Evidence:
			if err := ValidateEvidence(r.Data); err != nil {
				bad(r, "", err)
			}
		case recordkind.Verification:
			if err := ValidateReport(r.Data); err != nil {
				bad(r, "", err)
			}
		}
	}
	return errors.Join(errs...)
}
