package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/internal/durable"

	"github.com/agentry-dev/agentry/agent"
)

// defaultDir is the directory File uses when given "" (UAP-1.1 §12.4).
const defaultDir = ".checkpoints"

// The files of a session directory, as the reference implementation
// names them.
const (
	checkpointFile = "checkpoint.json"
	metadataFile   = "metadata.json"
)

const (
	tempPrefix      = ".tmp-"     // files being written, in a session directory
	tombstonePrefix = ".deleted-" // session directories being deleted, in the root
	maxMetadataJSON = 64 << 10
)

// FileStore is the file-based agent.CheckpointStore (UAP-1.1 §12.4
// fileCheckpoints). A session's latest checkpoint is
// <dir>/<sessionId>/checkpoint.json (the indented AgentStateJSON) and
// <dir>/<sessionId>/metadata.json (the indented CheckpointMetadata), as
// the reference implementation lays them out. Files are created 0600 and
// directories 0700: states may hold sensitive data (§15.3).
//
// Save is crash-safe: each file is written to a temporary file in the
// session directory, fsynced, renamed over its target, and the directory
// fsynced; the checkpoint is written before the metadata. A reader
// therefore sees each file whole, old or new, and never metadata newer
// than the checkpoint. A crash between the two renames of a session's
// first save leaves a checkpoint without metadata: Load returns it and
// LoadMetadata reports agent.ErrNoCheckpoint until the next save.
//
// A FileStore is safe for concurrent use; saves of different sessions run
// in parallel, those of one session one after the other. One process
// should own a directory: the store does not lock it against others, and
// a save removes the temporary files an interrupted save left behind.
type FileStore struct {
	dir   string
	seed  maphash.Seed
	locks [64]sync.Mutex // striped by session ID; held by Save and Delete
}

// File returns the store keeping checkpoints under dir ("" means
// ".checkpoints"), creating the directory if needed and removing what an
// interrupted Delete left behind.
func File(dir string) (*FileStore, error) {
	if dir == "" {
		dir = defaultDir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tombstonePrefix) {
			if err := os.RemoveAll(filepath.Join(abs, e.Name())); err != nil {
				return nil, fmt.Errorf("checkpoint: %w", err)
			}
		}
	}
	return &FileStore{dir: abs, seed: maphash.MakeSeed()}, nil
}

// Dir returns the absolute path of the store's directory.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) lock(sessionID string) *sync.Mutex {
	return &s.locks[maphash.String(s.seed, sessionID)%uint64(len(s.locks))]
}

// check validates the session ID, then the context.
func check(ctx context.Context, sessionID string) error {
	if err := agent.ValidateSessionID(sessionID); err != nil {
		return err
	}
	return ctx.Err()
}

// Save writes state as the session's checkpoint, then its metadata (with
// a new checkpoint ID), each atomically and durably.
func (s *FileStore) Save(ctx context.Context, sessionID string, state *agent.State) error {
	if err := check(ctx, sessionID); err != nil {
		return err
	}
	raw, err := state.MarshalJSON()
	if err != nil {
		return fmt.Errorf("checkpoint: session %q: %w", sessionID, err)
	}
	var data bytes.Buffer
	if err := json.Indent(&data, raw, "", "  "); err != nil {
		return fmt.Errorf("checkpoint: session %q: %w", sessionID, err)
	}
	mu := s.lock(sessionID)
	mu.Lock()
	defer mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	meta, err := json.MarshalIndent(agent.NewCheckpointMetadata(sessionID, state), "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: session %q: %w", sessionID, err)
	}
	dir := filepath.Join(s.dir, sessionID)
	if err := s.ensureSessionDir(dir); err != nil {
		return err
	}
	removeTemps(dir)
	// Both files are written and fsynced in parallel; the renames, each
	// followed by a directory fsync, commit the checkpoint, then the
	// metadata.
	metaTmp := make(chan tempFile, 1)
	go func() { metaTmp <- writeTemp(dir, metadataFile, meta) }()
	ck, mt := writeTemp(dir, checkpointFile, data.Bytes()), <-metaTmp
	err = errors.Join(ck.err, mt.err)
	if err == nil {
		err = commit(dir, ck.path, checkpointFile)
	}
	if err == nil {
		err = commit(dir, mt.path, metadataFile)
	}
	if err != nil {
		for _, p := range []string{ck.path, mt.path} {
			if p != "" {
				os.Remove(p)
			}
		}
		return fmt.Errorf("checkpoint: session %q: %w", sessionID, err)
	}
	return nil
}

// ensureSessionDir creates dir, durably, when it does not exist.
func (s *FileStore) ensureSessionDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := durable.SyncDir(s.dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// removeTemps removes the temporary files a crash in the middle of a
// save left in a session directory. The caller holds the session's lock,
// so no save of this process is writing them.
func removeTemps(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// tempFile is a temporary file written by writeTemp.
type tempFile struct {
	path string // "" when it could not be created
	err  error
}

// writeTemp writes data to a new temporary file in dir and fsyncs it.
func writeTemp(dir, name string, data []byte) tempFile {
	f, err := os.CreateTemp(dir, tempPrefix+name+"-*")
	if err != nil {
		return tempFile{err: err}
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return tempFile{f.Name(), err}
}

// commit renames the temporary file tmp over dir/name and fsyncs dir, so
// that the rename survives a crash too.
func commit(dir, tmp, name string) error {
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

// Load returns the session's latest state. A checkpoint file that does
// not decode as valid AgentStateJSON is an error wrapping ErrCorrupt.
func (s *FileStore) Load(ctx context.Context, sessionID string) (*agent.State, error) {
	if err := check(ctx, sessionID); err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, sessionID, checkpointFile)
	data, err := readFile(path, agent.MaxStateJSON)
	if err != nil {
		return nil, err
	}
	state, err := agent.FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrCorrupt, path, err)
	}
	return state, nil
}

// LoadMetadata returns the metadata of the session's latest checkpoint.
// A metadata file that does not decode, or names another session, is an
// error wrapping ErrCorrupt.
func (s *FileStore) LoadMetadata(ctx context.Context, sessionID string) (*agent.CheckpointMetadata, error) {
	if err := check(ctx, sessionID); err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, sessionID, metadataFile)
	data, err := readFile(path, maxMetadataJSON)
	if err != nil {
		return nil, err
	}
	var m agent.CheckpointMetadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrCorrupt, path, err)
	}
	if m.SessionID != sessionID {
		return nil, fmt.Errorf("%w %s: it names session %q", ErrCorrupt, path, m.SessionID)
	}
	return &m, nil
}

// readFile reads path, refusing files over limit bytes; a missing file
// is agent.ErrNoCheckpoint.
func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, agent.ErrNoCheckpoint
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w %s: larger than %d bytes", ErrCorrupt, path, limit)
	}
	return data, nil
}

// Delete removes the session's directory. It is first renamed out of the
// way in one step, so that no reader, and no crash, sees a half-deleted
// session. Deleting a missing session is not an error.
func (s *FileStore) Delete(ctx context.Context, sessionID string) error {
	if err := check(ctx, sessionID); err != nil {
		return err
	}
	mu := s.lock(sessionID)
	mu.Lock()
	defer mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Join(s.dir, sessionID)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	tomb, err := os.MkdirTemp(s.dir, tombstonePrefix+"*")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(dir, filepath.Join(tomb, "session")); err != nil {
		os.Remove(tomb)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := durable.SyncDir(s.dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.RemoveAll(tomb); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// List returns, sorted, the sessions whose directory holds a checkpoint.
func (s *FileStore) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	ids := []string{}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || agent.ValidateSessionID(name) != nil {
			continue // the store's own entries start with '.'
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(s.dir, name, checkpointFile)); err == nil {
			ids = append(ids, name)
		}
	}
	return ids, nil
}

var _ agent.CheckpointStore = (*FileStore)(nil)
