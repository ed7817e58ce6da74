package approverkey

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentry-dev/agentry/internal/durable"

	"github.com/agentry-dev/agentry/govern"
)

// KeyringFile is the name of the keyring file in a key directory.
const KeyringFile = "approvers.json"

// keySuffix ends the name of every private key file.
const keySuffix = ".key.json"

// Dir is a key directory: NAME.key.json per approver and KeyringFile.
// Its methods are safe for concurrent use within one process; two
// processes updating one directory at the same moment may lose a keyring
// update.
type Dir string

// keyringMu serialises keyring file updates of this process.
var keyringMu sync.Mutex

// ValidName reports whether approver can name a key file: 1 to 128
// characters from A–Z, a–z, 0–9 and "._@+-", not starting with a dot.
func ValidName(approver string) bool {
	if approver == "" || len(approver) > 128 || approver[0] == '.' {
		return false
	}
	for _, c := range []byte(approver) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.' || c == '_' || c == '@' || c == '+' || c == '-':
		default:
			return false
		}
	}
	return true
}

// KeyPath returns the path of approver's private key file.
func (d Dir) KeyPath(approver string) (string, error) {
	if !ValidName(approver) {
		return "", fmt.Errorf("approverkey: %q cannot name a key file (use letters, digits and ._@+-)", approver)
	}
	return filepath.Join(string(d), approver+keySuffix), nil
}

// KeyringPath returns the path of the directory's keyring file.
func (d Dir) KeyringPath() string { return filepath.Join(string(d), KeyringFile) }

// Keyring loads the directory's keyring file.
func (d Dir) Keyring() (*govern.Keyring, error) { return ReadKeyring(d.KeyringPath()) }

// Key reads approver's private key file (see ReadKeyFile); the file must
// name that approver.
func (d Dir) Key(approver string) (*Key, error) {
	path, err := d.KeyPath(approver)
	if err != nil {
		return nil, err
	}
	k, err := ReadKeyFile(path)
	if err != nil {
		return nil, err
	}
	if k.Approver != approver {
		return nil, fmt.Errorf("approverkey: %s holds the key of %q, not %q", path, k.Approver, approver)
	}
	return k, nil
}

// Create generates a key for approver, writes its private key file (mode
// 0600, the directory created 0700 if need be) and adds its public key to
// the keyring file, which is replaced atomically. The approver's other
// keys in the keyring stay trusted. It refuses (fs.ErrExist) when the
// approver already has a key file here.
func (d Dir) Create(approver string) (*Key, error) {
	path, k, data, err := d.prepare(approver)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("approverkey: %s: %w", path, fs.ErrExist)
		}
		return nil, err
	}
	if err := writeSync(f, data); err != nil {
		os.Remove(path)
		return nil, err
	}
	if err := durable.SyncDir(string(d)); err != nil {
		os.Remove(path)
		return nil, err
	}
	if err := d.trust(k, false); err != nil {
		os.Remove(path)
		return nil, err
	}
	return k, nil
}

// Replace generates a new key for approver and makes it the approver's
// only key: the private key file is replaced and the keyring trusts the
// new key instead of every key it held for the approver. Should it fail
// between the keyring update and the file replacement, the old key is
// already revoked (fail closed): run it again.
func (d Dir) Replace(approver string) (*Key, error) {
	path, k, data, err := d.prepare(approver)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(string(d), "."+approver+"-*.tmp") // mode 0600
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := writeSync(tmp, data); err != nil {
		return nil, err
	}
	if err := d.trust(k, true); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	if err := durable.SyncDir(string(d)); err != nil {
		return nil, err
	}
	return k, nil
}

// prepare checks the name, creates the directory and a key, and encodes it.
func (d Dir) prepare(approver string) (path string, k *Key, data []byte, err error) {
	if path, err = d.KeyPath(approver); err != nil {
		return "", nil, nil, err
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return "", nil, nil, err
	}
	if k, err = Generate(approver); err != nil {
		return "", nil, nil, err
	}
	if data, err = k.MarshalJSON(); err != nil {
		return "", nil, nil, err
	}
	return path, k, append(data, '\n'), nil
}

// trust adds k's public key to the keyring file; with exclusive, the
// approver's other keys are dropped.
func (d Dir) trust(k *Key, exclusive bool) error {
	keyringMu.Lock()
	defer keyringMu.Unlock()
	path := d.KeyringPath()
	kr, err := ReadKeyring(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kr = govern.NewKeyring()
	case err != nil:
		return err
	}
	if exclusive {
		old := kr
		kr = govern.NewKeyring()
		for _, ak := range old.Keys() {
			if ak.Approver == k.Approver {
				continue
			}
			if _, err := kr.Add(ak.Approver, ak.Key); err != nil {
				return err
			}
		}
	}
	if _, err := kr.Add(k.Approver, k.Public()); err != nil {
		return err
	}
	data, err := kr.MarshalJSON()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'), 0o644)
}

// writeFileAtomic replaces path with data through a temporary file in the
// same directory and a rename, keeping the mode of an existing file.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := writeSync(tmp, data); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

// writeSync writes data to f, syncs and closes it.
func writeSync(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadKeyring reads a keyring file (the JSON form of govern.Keyring) once;
// govern.OpenKeyring follows one as it changes.
func ReadKeyring(path string) (*govern.Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k := govern.NewKeyring()
	if err := k.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
