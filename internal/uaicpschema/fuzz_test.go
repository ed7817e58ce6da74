package uaicpschema_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry-dev/agentry/internal/uaicpschema"
)

// FuzzValidate feeds arbitrary text to the three validators: they never
// panic, and they fail either with a *ValidationError listing at least
// one failure or with a plain error for text that is not one JSON value.
func FuzzValidate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "fixtures", "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"request_id":"not-a-uuid","timestamp":"2026-01-01T23:59:60+01:00","streaming":{"stream_index":1e999999}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, validate := range []func([]byte) error{uaicpschema.ValidateEnvelope, uaicpschema.ValidateEvidence, uaicpschema.ValidateReport} {
			err := validate(b)
			var ve *uaicpschema.ValidationError
			if errors.As(err, &ve) && len(ve.Failures) == 0 {
				t.Fatalf("validation error without failures: %v", err)
			}
		}
	})
}
