package sqlstore

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/agentry-dev/agentry/internal/unavailable"
	"github.com/jackc/pgx/v5/pgconn"
)

// What says PostgreSQL is out of reach is marked unavailable (a 503 for
// the client); a refusal of the statement itself is not; SQLite's errors
// never are.
func TestMarkUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("sqlstore: journal: %w", io.ErrUnexpectedEOF), true},
		{driver.ErrBadConn, true},
		{syscall.ECONNRESET, true},
		{&pgconn.PgError{Code: "08006"}, true},  // connection_failure
		{&pgconn.PgError{Code: "57P01"}, true},  // admin_shutdown
		{&pgconn.PgError{Code: "53300"}, true},  // too_many_connections
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation
		{&pgconn.PgError{Code: "40001"}, false}, // serialization_failure: the caller retries
		{errors.New("sqlstore: bad stored state"), false},
	} {
		err := tc.err
		(&Store{dialect: postgres}).mark(&err)
		if got := unavailable.Is(err); got != tc.want {
			t.Errorf("postgres %v: unavailable = %v, want %v", tc.err, got, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: the mark hides the error", tc.err)
		}
		err = tc.err
		(&Store{dialect: sqlite}).mark(&err)
		if unavailable.Is(err) {
			t.Errorf("sqlite %v: marked unavailable", tc.err)
		}
	}
}
