// Package e2e holds black-box tests of the agentry binary: the tests build
// ./cmd/agentry with the race detector once, run `agentry serve` as a
// child process on a loopback port and talk to it over HTTP only — the
// UAIP conformance suite (workflow/uaipconformance), concurrent store flows,
// a SIGKILL mid-load with the SQLite store, two replicas on one
// PostgreSQL (when AGENTRY_TEST_POSTGRES is set) and the `agentry uaip`
// client commands.
package e2e
