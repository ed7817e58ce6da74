package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/checkpointtest"
	"github.com/agentry-dev/agentry/internal/checkpoint"
	"github.com/agentry-dev/agentry/internal/ids"
)

func newFileStore(t *testing.T) *checkpoint.FileStore {
	t.Helper()
	s, err := checkpoint.File(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestUAP_12_2_FileStore(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) agent.CheckpointStore { return newFileStore(t) })
}

func TestUAP_12_4_DefaultDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := checkpoint.File("")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(dir, ".checkpoints"))
	got, _ := filepath.EvalSymlinks(s.Dir())
	if got != want {
		t.Errorf("Dir() = %s, want %s", s.Dir(), want)
	}
	if err := s.Save(t.Context(), "s1", checkpointtest.SampleState()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".checkpoints", "s1", "checkpoint.json")); err != nil {
		t.Error(err)
	}
}

// TestUAP_12_4_Layout pins the reference implementation's layout:
// <dir>/<sessionId>/checkpoint.json and metadata.json, indented JSON.
func TestUAP_12_4_Layout(t *testing.T) {
	s := newFileStore(t)
	state := checkpointtest.SampleState()
	if err := s.Save(t.Context(), "sess", state); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Dir(), "sess")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"checkpoint.json", "metadata.json"}; !slices.Equal(names, want) {
		t.Errorf("session directory holds %q, want %q (no temporary files left)", names, want)
	}

	data, err := os.ReadFile(filepath.Join(dir, "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("{\n  \"version\": \"1.1.0\",\n  \"id\": \""+state.ID()+"\"")) {
		t.Errorf("checkpoint.json is not indented AgentStateJSON:\n%.200s", data)
	}
	compact, _ := state.MarshalJSON()
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil || !bytes.Equal(buf.Bytes(), compact) {
		t.Errorf("checkpoint.json is not the state's JSON (%v)", err)
	}

	meta, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(meta, []byte("{\n  \"sessionId\": \"sess\",\n")) || m["step"] != 3.0 || m["agentId"] != "agent-7" ||
		!ids.Valid(m["checkpointId"].(string)) || len(m) != 5 {
		t.Errorf("metadata.json = %s", meta)
	}
	if ts, _ := m["timestamp"].(string); len(ts) != len("2006-01-02T15:04:05.000Z") || !strings.HasSuffix(ts, "Z") {
		t.Errorf("metadata timestamp %q is not ISO 8601 UTC with milliseconds", ts)
	}

	for path, want := range map[string]fs.FileMode{dir: 0o700 | fs.ModeDir, filepath.Join(dir, "checkpoint.json"): 0o600, filepath.Join(dir, "metadata.json"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v (%v)", path, fi.Mode(), want, err)
		}
	}
}

// TestUAP_15_3_InvalidSessionIDsStayInside checks that rejected IDs leave
// nothing anywhere: not in the store, not next to it.
func TestUAP_15_3_InvalidSessionIDsStayInside(t *testing.T) {
	parent := t.TempDir()
	s, err := checkpoint.File(filepath.Join(parent, "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../escape", "..", "../store2/x", "a/../../b", `..\win`, ".hidden", ""} {
		if err := s.Save(t.Context(), id, checkpointtest.SampleState()); !errors.Is(err, agent.ErrInvalidSessionID) {
			t.Errorf("Save(%q) = %v", id, err)
		}
		if err := s.Delete(t.Context(), id); !errors.Is(err, agent.ErrInvalidSessionID) {
			t.Errorf("Delete(%q) = %v", id, err)
		}
	}
	var found []string
	filepath.WalkDir(parent, func(path string, d fs.DirEntry, err error) error {
		found = append(found, strings.TrimPrefix(path, parent))
		return err
	})
	if want := []string{"", "/store"}; !slices.Equal(found, want) {
		t.Errorf("files after rejected saves: %q, want %q", found, want)
	}
}

func TestValidateSessionID(t *testing.T) {
	for _, id := range []string{ids.New(), "a", "x.y", "üñí", "a b", strings.Repeat("x", agent.MaxSessionIDLen)} {
		if err := agent.ValidateSessionID(id); err != nil {
			t.Errorf("ValidateSessionID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", `a\b`, "a..b", ".x", "a\x00", "a\u0085", "\xff", strings.Repeat("x", agent.MaxSessionIDLen+1)} {
		err := agent.ValidateSessionID(id)
		if !errors.Is(err, agent.ErrInvalidSessionID) {
			t.Errorf("ValidateSessionID(%q) = %v", id, err)
		}
	}
}

// TestCorruptFiles: a damaged checkpoint or metadata file is reported as
// corrupt (ErrCorrupt), never as a missing checkpoint or a nil state.
func TestCorruptFiles(t *testing.T) {
	s := newFileStore(t)
	ctx := t.Context()
	good := checkpointtest.SampleState()
	if err := s.Save(ctx, "x", good); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Dir(), "x")
	goodJSON, _ := os.ReadFile(filepath.Join(dir, "checkpoint.json"))
	goodMeta, _ := os.ReadFile(filepath.Join(dir, "metadata.json"))
	for name, data := range map[string][]byte{
		"empty":         {},
		"truncated":     goodJSON[:len(goodJSON)/2],
		"not JSON":      []byte("\x00\x01garbage"),
		"null":          []byte("null"),
		"array":         []byte("[]"),
		"wrong shape":   []byte(`{"version":"1.1.0"}`),
		"bad version":   bytes.Replace(goodJSON, []byte(`"1.1.0"`), []byte(`"9.9.9"`), 1),
		"trailing":      append(slices.Clone(goodJSON), []byte("{}")...),
		"bad message":   bytes.Replace(goodJSON, []byte(`"type": "user"`), []byte(`"type": "robot"`), 1),
		"negative step": bytes.Replace(goodJSON, []byte(`"step": 3`), []byte(`"step": -3`), 1),
	} {
		os.WriteFile(filepath.Join(dir, "checkpoint.json"), data, 0o600)
		st, err := s.Load(ctx, "x")
		if !errors.Is(err, checkpoint.ErrCorrupt) || st != nil {
			t.Errorf("%s checkpoint: Load = %v, %v; want ErrCorrupt", name, st, err)
		} else if !strings.Contains(err.Error(), "checkpoint.json") {
			t.Errorf("%s checkpoint: error %q does not name the file", name, err)
		}
	}
	for name, data := range map[string][]byte{
		"empty":         {},
		"truncated":     goodMeta[:len(goodMeta)/2],
		"no checkpoint": []byte(`{"sessionId":"x","checkpointId":"nope","timestamp":"2025-01-01T00:00:00.000Z","step":1,"agentId":"a"}`),
		"other session": bytes.Replace(goodMeta, []byte(`"sessionId": "x"`), []byte(`"sessionId": "y"`), 1),
		"bad time":      []byte(`{"sessionId":"x","checkpointId":"` + ids.New() + `","timestamp":"yesterday","step":1,"agentId":"a"}`),
	} {
		os.WriteFile(filepath.Join(dir, "metadata.json"), data, 0o600)
		m, err := s.LoadMetadata(ctx, "x")
		if !errors.Is(err, checkpoint.ErrCorrupt) || m != nil {
			t.Errorf("%s metadata: LoadMetadata = %v, %v; want ErrCorrupt", name, m, err)
		}
	}
	// A new save repairs the session.
	if err := s.Save(ctx, "x", good); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Load(ctx, "x"); err != nil || st.ID() != good.ID() {
		t.Errorf("Load after repair = %v, %v", st, err)
	}
}

// TestFileInterop reads a session written by the TypeScript reference
// implementation: version 1.0.0 and {role, content} messages.
func TestFileInterop(t *testing.T) {
	s := newFileStore(t)
	dir := filepath.Join(s.Dir(), "ts-session")
	os.MkdirAll(dir, 0o700)
	for _, name := range []string{"checkpoint.json", "metadata.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "ts-session", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	st, err := s.Load(t.Context(), "ts-session")
	if err != nil {
		t.Fatal(err)
	}
	if st.Step() != 1 || st.Len() != 4 || st.Messages()[3].Text() != "It is sunny." {
		t.Errorf("loaded step %d, %d messages", st.Step(), st.Len())
	}
	m, err := s.LoadMetadata(t.Context(), "ts-session")
	if err != nil {
		t.Fatal(err)
	}
	if m.Step != 1 || m.AgentID != "5b0f2a8e-9a61-4c1e-8f0e-3f1a7d9c2b41" || m.Timestamp.Year() != 2025 {
		t.Errorf("metadata %+v", *m)
	}
	if got, err := s.List(t.Context()); err != nil || !slices.Equal(got, []string{"ts-session"}) {
		t.Errorf("List = %q, %v", got, err)
	}
}

// TestInterruptedDelete: what a crash in Delete leaves (a tombstone
// directory) is invisible and removed by the next File.
func TestInterruptedDelete(t *testing.T) {
	s := newFileStore(t)
	if err := s.Save(t.Context(), "keep", checkpointtest.SampleState()); err != nil {
		t.Fatal(err)
	}
	tomb := filepath.Join(s.Dir(), ".deleted-123", "session")
	os.MkdirAll(tomb, 0o700)
	os.WriteFile(filepath.Join(tomb, "checkpoint.json"), []byte("{}"), 0o600)
	os.WriteFile(filepath.Join(s.Dir(), "stray-file"), []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(s.Dir(), "no-checkpoint"), 0o700)
	if got, _ := s.List(t.Context()); !slices.Equal(got, []string{"keep"}) {
		t.Errorf("List = %q", got)
	}
	if _, err := checkpoint.File(s.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(tomb)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tombstone left after File: %v", err)
	}
}
