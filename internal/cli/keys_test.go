package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/internal/approverkey"
)

// kidOf reads the kid line of `keys create` output.
func kidOf(t *testing.T, out string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "kid"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no kid in %q", out)
	return ""
}

func TestKeysCreateAndList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	code, out, errs := runCLI(t, "", "keys", "create", "alice", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	aliceKID := kidOf(t, out)
	keyring := filepath.Join(dir, "approvers.json")
	if !strings.Contains(out, keyring) {
		t.Errorf("output does not name the keyring %s:\n%s", keyring, out)
	}
	fi, err := os.Stat(filepath.Join(dir, "alice.key.json"))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %#o", fi.Mode().Perm())
	}
	code, out, _ = runCLI(t, "", "keys", "create", "bob", "--dir", dir)
	if code != 0 {
		t.Fatal("create bob")
	}
	bobKID := kidOf(t, out)

	code, out, errs = runCLI(t, "", "keys", "list", "--dir", dir)
	if want := "alice\t" + aliceKID + "\nbob\t" + bobKID + "\n"; code != 0 || out != want {
		t.Errorf("list: exit %d, %q (stderr %q), want %q", code, out, errs, want)
	}

	// An existing key is kept unless --force, which rotates it.
	code, _, errs = runCLI(t, "", "keys", "create", "alice", "--dir", dir)
	if code != 1 || !strings.Contains(errs, "--force") {
		t.Errorf("create existing: exit %d, %q", code, errs)
	}
	code, out, errs = runCLI(t, "", "keys", "create", "alice", "--dir", dir, "--force")
	if code != 0 {
		t.Fatalf("create --force: exit %d, %s", code, errs)
	}
	newKID := kidOf(t, out)
	if newKID == aliceKID {
		t.Error("--force kept the old key")
	}
	_, out, _ = runCLI(t, "", "keys", "list", "--dir", dir)
	if want := "alice\t" + newKID + "\nbob\t" + bobKID + "\n"; out != want {
		t.Errorf("list after --force: %q, want %q", out, want)
	}
	k, err := approverkey.Dir(dir).Key("alice")
	if err != nil {
		t.Fatal(err)
	}
	if kid, _ := k.KeyID(); kid != newKID {
		t.Errorf("key file holds %s, want %s", kid, newKID)
	}
}

func TestKeysDirFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENTRY_KEYS_DIR", dir)
	if code, _, errs := runCLI(t, "", "keys", "create", "carol"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "carol.key.json")); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, "", "keys", "list"); code != 0 || !strings.HasPrefix(out, "carol\t") {
		t.Errorf("list: exit %d, %q", code, out)
	}
	// --dir wins over the environment.
	other := t.TempDir()
	if code, _, _ := runCLI(t, "", "keys", "create", "dave", "--dir", other); code != 0 {
		t.Fatal("create dave")
	}
	if _, err := os.Stat(filepath.Join(other, "dave.key.json")); err != nil {
		t.Error(err)
	}
}

func TestKeysErrors(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		args []string
		code int
	}{
		"no name":          {[]string{"keys", "create", "--dir", dir}, 2},
		"two names":        {[]string{"keys", "create", "a", "b", "--dir", dir}, 2},
		"path in name":     {[]string{"keys", "create", "../evil", "--dir", dir}, 2},
		"hidden name":      {[]string{"keys", "create", ".x", "--dir", dir}, 2},
		"list, no keyring": {[]string{"keys", "list", "--dir", dir}, 1},
		"list with args":   {[]string{"keys", "list", "x", "--dir", dir}, 2},
	} {
		code, _, errs := runCLI(t, "", c.args...)
		if code != c.code || !strings.HasPrefix(errs, "agentry: ") {
			t.Errorf("%s: exit %d, %q; want exit %d with a message", name, code, errs, c.code)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed commands left %d files", len(ents))
	}
}
