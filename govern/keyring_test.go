package govern_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/govern"
)

var carol = newApprover("carol", 6)

// writeKeyring replaces the keyring file at path, as agentry keys does
// (a temporary file renamed over it), with the keys of as.
func writeKeyring(t *testing.T, path string, as ...approver) {
	t.Helper()
	b, err := keyring(t, as...).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestDESIGN_5_KeyringFollowsItsFile: a keyring opened on a file that does
// not exist yet trusts a key written to the file afterwards at its first
// use (no restart), stops trusting a removed key once it looked again,
// trusts nobody while the file is broken, and names the fix when it
// refuses an unknown key. A flood of unknown keys makes it look at the
// file once per ReloadInterval at most. In a synctest bubble: the
// interval passes on the bubble's clock.
func TestDESIGN_5_KeyringFollowsItsFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "approvers.json")
		const interval = time.Second
		k, err := govern.OpenKeyring(path, &govern.KeyringOptions{ReloadInterval: interval, Hint: "add it with `agentry keys create NAME`", Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		if k.Path() != path || len(k.Keys()) != 0 {
			t.Fatalf("new keyring: path %q, keys %v", k.Path(), k.Keys())
		}
		tok := func(a approver) string {
			return sign(t, a, claimsFor(a, govern.ApprovalRequest{ID: "ap-1"}))
		}
		verify := func(a approver) error {
			_, err := k.Verify(tok(a), time.Now())
			return err
		}

		// Unknown: refused, naming the fix and the keyring.
		err = verify(alice)
		wantReasons(t, err, govern.ApprovalInvalid)
		if msg := govErr(t, err).Detail; !strings.Contains(msg, "is not a trusted approver key; add it with `agentry keys create NAME` (keyring: "+path+")") {
			t.Errorf("refusal %q does not name the fix", msg)
		}

		// Created afterwards: trusted at once, though the keyring looked
		// at the file an instant ago (the token waits for the interval).
		writeKeyring(t, path, alice)
		start := time.Now()
		if err := verify(alice); err != nil {
			t.Fatalf("a key added to the file: %v", err)
		}
		if waited := time.Since(start); waited != interval {
			t.Errorf("waited %s for the next look, want %s", waited, interval)
		}

		// A flood of unknown keys, concurrent then one after another: one
		// look per interval.
		start = time.Now()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if err := verify(bob); err == nil {
					t.Error("an unknown key verified")
				}
			})
		}
		wg.Wait()
		if d := time.Since(start); d != interval {
			t.Errorf("50 concurrent unknown keys took %s, want one look (%s)", d, interval)
		}
		start = time.Now()
		for range 5 {
			if err := verify(bob); err == nil {
				t.Error("an unknown key verified")
			}
		}
		if d := time.Since(start); d != 5*interval {
			t.Errorf("5 unknown keys in a row took %s, want one look each, an interval apart (%s)", d, 5*interval)
		}

		// Removed: trusted until the keyring looks again, no longer after.
		writeKeyring(t, path, bob)
		if err := verify(alice); err != nil {
			t.Errorf("within the interval of the last look: %v", err)
		}
		time.Sleep(interval)
		if err := verify(alice); err == nil {
			t.Error("a key removed from the file is still trusted")
		}
		if err := verify(bob); err != nil {
			t.Errorf("the remaining key: %v", err)
		}

		// Broken: nobody is trusted, and the refusal carries no parser text.
		if err := os.WriteFile(path, []byte(`{"approvers": 7}`), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval)
		err = verify(bob)
		wantReasons(t, err, govern.ApprovalInvalid)
		if msg := govErr(t, err).Detail; !strings.Contains(msg, "cannot be read") || strings.Contains(msg, "unmarshal") || strings.Contains(msg, "govern: keyring") {
			t.Errorf("refusal with a broken keyring: %q", msg)
		}
		// Keys added in code stay trusted whatever the file says.
		if _, err := k.Add("carol", carol.pub); err != nil {
			t.Fatal(err)
		}
		if err := verify(carol); err != nil {
			t.Errorf("a key added with Add: %v", err)
		}
	})
}

// TestDESIGN_5_OpenKeyringErrors: a keyring file that exists but cannot be
// parsed is an error at open (a server does not start on it).
func TestDESIGN_5_OpenKeyringErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvers.json")
	if err := os.WriteFile(path, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := govern.OpenKeyring(path, nil); err == nil {
		t.Error("OpenKeyring of a broken file succeeded")
	}
}
