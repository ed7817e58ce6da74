// Package peertest decides what a test does when an independent peer it
// needs — an npm package, Node.js, Chromium, a command — is missing: it
// skips with how to get the peer, unless the environment variable that
// .ci/run sets for that peer says the peer must be there, and then it
// fails. A CI run thus never passes by skipping what it installed.
package peertest

import (
	"os"
	"testing"
)

// Missing skips t, or fails it when the environment variable require is
// set, saying msg (what is missing and how to install it).
func Missing(t testing.TB, require, msg string) {
	t.Helper()
	if os.Getenv(require) != "" {
		t.Fatalf("%s (%s is set: the peer must be there)", msg, require)
		return // Fatalf does not return; a fake testing.TB may
	}
	t.Skipf("%s (set %s to fail instead)", msg, require)
}
