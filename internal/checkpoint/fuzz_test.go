package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/checkpointtest"
	"github.com/agentry-dev/agentry/internal/checkpoint"
)

// FuzzFileLoad feeds arbitrary checkpoint.json and metadata.json files to
// the file store: Load and LoadMetadata never panic, report a damaged file
// as ErrCorrupt (never as a missing checkpoint, never as a nil result
// without an error), and what they accept is usable.
func FuzzFileLoad(f *testing.F) {
	s, err := checkpoint.File(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Save(f.Context(), "seed", checkpointtest.SampleState()); err != nil {
		f.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(s.Dir(), "seed"), filepath.Join("testdata", "ts-session")} {
		ck, err1 := os.ReadFile(filepath.Join(dir, "checkpoint.json"))
		meta, err2 := os.ReadFile(filepath.Join(dir, "metadata.json"))
		if err := errors.Join(err1, err2); err != nil {
			f.Fatal(err)
		}
		f.Add(ck, meta)
	}
	f.Add([]byte("{}"), []byte("{}"))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, ck, meta []byte) {
		dir := filepath.Join(s.Dir(), "fuzz")
		os.MkdirAll(dir, 0o700)
		if err := errors.Join(os.WriteFile(filepath.Join(dir, "checkpoint.json"), ck, 0o600),
			os.WriteFile(filepath.Join(dir, "metadata.json"), meta, 0o600)); err != nil {
			t.Fatal(err)
		}
		st, err := s.Load(t.Context(), "fuzz")
		switch {
		case err == nil && st == nil:
			t.Fatal("Load returned nil, nil")
		case err == nil:
			if _, err := st.MarshalJSON(); err != nil {
				t.Fatalf("loaded state does not encode: %v", err)
			}
		case !errors.Is(err, checkpoint.ErrCorrupt) || st != nil:
			t.Fatalf("Load = %v, %v; want ErrCorrupt", st, err)
		}
		m, err := s.LoadMetadata(t.Context(), "fuzz")
		switch {
		case err == nil && (m == nil || m.SessionID != "fuzz"):
			t.Fatalf("LoadMetadata = %+v", m)
		case err != nil && (!errors.Is(err, checkpoint.ErrCorrupt) || m != nil || errors.Is(err, agent.ErrNoCheckpoint)):
			t.Fatalf("LoadMetadata = %v, %v; want ErrCorrupt", m, err)
		}
	})
}
