package envelope

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/agentry-dev/agentry/internal/schemas"

	"github.com/agentry-dev/agentry/internal/schemafail"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schemas of Appendix A, embedded (schemas/SOURCES.txt): envelope and
// delta verbatim, the manifest with its one JSON syntax error corrected.
var (
	//go:embed schemas/envelope-1.0.json
	envelopeSchemaJSON []byte
	//go:embed schemas/delta-1.0.json
	deltaSchemaJSON []byte
	//go:embed schemas/manifest-1.0.json
	manifestSchemaJSON []byte
)

// The file names of the schemas, as ValidationError.Schema names them.
const (
	envelopeSchema = "envelope-1.0.json"
	deltaSchema    = "delta-1.0.json"
	manifestSchema = "manifest-1.0.json"
)

type compiledSchemas struct {
	envelope, delta, manifest *jsonschema.Schema
}

// uuidFormat is the "uuid" format widened to the urn:uuid: form (DESIGN
// §5: ids are accepted bare or as URNs).
var uuidFormat = &jsonschema.Format{Name: "uuid", Validate: func(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if _, ok := ParseID(s); !ok {
		return errors.New("not a UUID (8-4-4-4-12 hex digits, optionally prefixed by urn:uuid:)")
	}
	return nil
}}

var embeddedSchemas = sync.OnceValue(func() compiledSchemas {
	c := schemas.NewCompiler(uuidFormat)
	compile := func(file string, doc []byte) *jsonschema.Schema { return schemas.Embedded(c, "envelope/"+file, doc) }
	return compiledSchemas{
		envelope: compile(envelopeSchema, envelopeSchemaJSON),
		delta:    compile(deltaSchema, deltaSchemaJSON),
		manifest: compile(manifestSchema, manifestSchemaJSON),
	}
})

// ValidationError says why a document does not match its schema.
type ValidationError struct {
	// Schema is the schema's file name, such as EnvelopeSchema.
	Schema string
	// Failures lists the failing keywords, sorted by instance path.
	Failures []failure
}

// failure is one failing schema keyword.
type failure = schemafail.Failure

// Error returns "does not match SCHEMA" followed by each failure's
// instance path and message.
func (e *ValidationError) Error() string {
	return schemafail.Describe(e.Schema, e.Failures)
}

// validateEnvelope validates the JSON text b against the envelope schema
// (A.1) with formats asserted and ids accepted bare or as urn:uuid:. It
// checks the schema only: Decode applies it and the stricter rules of
// this package. A mismatch is a *ValidationError.
func validateEnvelope(b []byte) error {
	return validateText(embeddedSchemas().envelope, envelopeSchema, b)
}

// validateDelta validates b against the delta schema (A.2), like
// validateEnvelope.
func validateDelta(b []byte) error { return validateText(embeddedSchemas().delta, deltaSchema, b) }

// validateManifest validates b against the corrected manifest schema
// (A.3), like validateEnvelope.
func validateManifest(b []byte) error {
	return validateText(embeddedSchemas().manifest, manifestSchema, b)
}

func validateText(sch *jsonschema.Schema, file string, b []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: not a JSON document: %w", file, err)
	}
	return validateValue(sch, file, inst)
}

// validateValue validates a decoded document (maps, slices, json.Number,
// strings, booleans and nil).
func validateValue(sch *jsonschema.Schema, file string, inst any) error {
	err := sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", file, err)
	}
	return &ValidationError{Schema: file, Failures: schemafail.Failures(ve)}
}
