package sqlstore

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/agentry-dev/agentry/internal/unavailable"
	"github.com/jackc/pgx/v5/pgconn"
)

// mark marks *err as unavailability (package unavailable) when it says
// the PostgreSQL server cannot be reached or does not serve now, so that
// the handlers answer 503 and the client retries; use it as
// defer s.mark(&err) in every method that reaches the database.
func (s *Store) mark(err *error) {
	if *err != nil && s.dialect == postgres && unreachable(*err) {
		*err = unavailable.Wrap(*err)
	}
}

// unreachable reports whether err is the database being out of reach:
// no connection (refused, reset, closed, timed out), or PostgreSQL
// refusing to serve (class 08 connection exception, 57P01–57P03 shutdown
// and startup, 53300 too many connections).
func unreachable(err error) bool {
	var (
		ne net.Error
		ce *pgconn.ConnectError
		pe *pgconn.PgError
	)
	switch {
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300"
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}
