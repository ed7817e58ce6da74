package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentry-dev/agentry/workflow"
)

// withPgx runs f on a pooled connection's pgx connection (PostgreSQL
// only), for what database/sql cannot do: pipelines (pgx.Batch) and
// notifications. A connection f leaves broken — its context ended in the
// middle of a message, the server went away — is discarded, not pooled.
func (s *Store) withPgx(ctx context.Context, f func(pc *pgx.Conn) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("sqlstore: a %T is not a pgx connection", dc)
		}
		pc := sc.Conn()
		err := f(pc)
		if err != nil && (pc.IsClosed() || pc.PgConn().IsBusy()) {
			err = errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
}

// isStatementError reports whether err is an error the server returned
// for a statement (which aborts its transaction), rather than one of the
// connection.
func isStatementError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// applyPipelined is the committer's transaction on PostgreSQL: every
// statement of the batch — for an update also the read that tells a
// conflict from a missing session — goes to the server in one pipeline
// and runs in one implicit transaction (pgx.Batch), committed at its end:
// a batch costs one round trip, not one per statement plus BEGIN and
// COMMIT. It sets each write's outcome in out like apply.
func (c *committer) applyPipelined(ctx context.Context, batch []*write, out []error, now int64) (inStatement bool, err error) {
	err = c.st.withPgx(ctx, func(pc *pgx.Conn) error {
		b := &pgx.Batch{}
		var queued []int // the batch's writes in the pipeline, by index
		for i, w := range batch {
			if w.claim.Load() != taken && !w.claim.CompareAndSwap(pending, taken) {
				continue // withdrawn
			}
			queued = append(queued, i)
			switch w.kind {
			case createSession:
				b.Queue(sessionCreateQuery, w.id, w.workflow, w.stage, w.state, w.created, w.updated, w.expires, now)
			case updateSession:
				b.Queue(sessionUpdateQuery, w.id, w.workflow, w.stage, w.state, w.version, w.created, w.updated, w.expires, w.version-1, now)
				b.Queue(sessionVersionQuery, w.id)
			case deleteSession:
				b.Queue(sessionDeleteQuery, w.id)
			}
		}
		if len(queued) == 0 {
			return nil
		}
		br := pc.SendBatch(ctx, b)
		for _, i := range queued {
			w := batch[i]
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				inStatement = isStatementError(err)
				return fmt.Errorf("sqlstore: write session %q: %w", w.id, err)
			}
			switch w.kind {
			case createSession:
				if tag.RowsAffected() == 0 {
					out[i] = fmt.Errorf("sqlstore: create session %q: %w", w.id, workflow.ErrConflict)
				}
			case updateSession:
				var (
					version int64
					expires *int64
				)
				err := br.QueryRow().Scan(&version, &expires)
				found := err == nil
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					br.Close()
					inStatement = isStatementError(err)
					return fmt.Errorf("sqlstore: update session %q: %w", w.id, err)
				}
				if tag.RowsAffected() == 0 {
					out[i] = updateRefused(w, found, version, expires != nil && *expires <= now)
				}
			}
		}
		// The implicit transaction commits when the pipeline ends: its
		// error, if any, is the commit's.
		return br.Close()
	})
	if err != nil && !inStatement {
		return false, fmt.Errorf("sqlstore: write sessions: %w", err)
	}
	return inStatement, err
}

// applyPipelined is the journal's append transaction on PostgreSQL in
// two round trips instead of one per statement: the first pipeline
// begins the transaction, reads and locks the head, reads the unique
// keys taken and the leases' epochs; the records are then chained; the
// second pipeline inserts them, moves the leases and the head, and
// commits. It sets each Append's outcome in out like apply.
func (j *sqlJournal) applyPipelined(ctx context.Context, batch []*journalAppend, out []error) (inStatement bool, err error) {
	err = j.s.withPgx(ctx, func(pc *pgx.Conn) (err error) {
		open := false
		defer func() {
			if err != nil && open && !pc.IsClosed() {
				// The transaction failed: end it, so that the connection
				// goes back to the pool idle.
				if _, rerr := pc.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
					err = errors.Join(err, driver.ErrBadConn)
				}
			}
		}()
		reads := &pgx.Batch{}
		reads.Queue("BEGIN")
		reads.Queue(headQuery(postgres))
		taken, takenQs := map[string]bool{}, takenQueries(batch)
		for _, q := range takenQs {
			reads.Queue(q.query, q.args...)
		}
		epochs, fenceQs := map[string]int64{}, fenceQueries(batch, postgres)
		for _, q := range fenceQs {
			reads.Queue(q.query, q.args...)
		}
		br := pc.SendBatch(ctx, reads)
		open = true
		var (
			seq  int64
			hash string
		)
		err = func() error {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("sqlstore: journal append: %w", err)
			}
			if err := br.QueryRow().Scan(&seq, &hash); err != nil {
				return fmt.Errorf("sqlstore: journal append: read the head: %w", err)
			}
			for range takenQs {
				var k string
				rows, _ := br.Query()
				if _, err := pgx.ForEachRow(rows, []any{&k}, func() error { taken[k] = true; return nil }); err != nil {
					inStatement = isStatementError(err)
					return fmt.Errorf("sqlstore: journal append: unique keys: %w", err)
				}
			}
			for range fenceQs {
				var (
					key, state string
					epoch      int64
				)
				rows, _ := br.Query()
				if _, err := pgx.ForEachRow(rows, []any{&key, &epoch, &state}, func() error {
					if state == leaseRunning {
						epochs[key] = epoch
					}
					return nil
				}); err != nil {
					inStatement = isStatementError(err)
					return fmt.Errorf("sqlstore: journal append: leases: %w", err)
				}
			}
			return nil
		}()
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("sqlstore: journal append: %w", cerr)
		}
		if err != nil {
			return err
		}
		w := sealBatch(batch, out, seq, hash, taken, epochs, j.lostErr)
		if w == nil {
			_, err := pc.Exec(ctx, "COMMIT") // nothing to write: release the head
			open = err != nil
			return err
		}
		writes := &pgx.Batch{}
		sts := w.statements(j.s)
		for _, st := range sts {
			writes.Queue(st.query, st.args...)
		}
		writes.Queue("COMMIT")
		br = pc.SendBatch(ctx, writes)
		err = func() error {
			for _, st := range sts {
				if _, err := br.Exec(); err != nil {
					inStatement = isStatementError(err)
					return st.fail(err)
				}
			}
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("sqlstore: journal append: commit: %w", err)
			}
			open = false
			return nil
		}()
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("sqlstore: journal append: commit: %w", cerr)
		}
		return err
	})
	return inStatement, err
}

// scanRows runs the query q and calls each with every row's Scan. On
// PostgreSQL it goes through pgx, which watches ctx with
// context.AfterFunc: database/sql starts a goroutine for every query whose
// context can end (Rows.awaitDone) — two per governed run, each a wake-up
// of an idle processor in a server that is not busy.
func (s *Store) scanRows(ctx context.Context, q string, args []any, each func(scan func(dest ...any) error) error) error {
	if s.dialect != postgres {
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return eachRow(rows, each)
	}
	return s.withPgx(ctx, func(pc *pgx.Conn) error {
		rows, err := pc.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return eachRow(rows, each)
	})
}

// eachRow calls each with every row's Scan: database/sql's rows or pgx's.
func eachRow(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}, each func(scan func(dest ...any) error) error) error {
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// queryRow is scanRows of a query of one row into dest; sql.ErrNoRows
// when it has none.
func (s *Store) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	found := false
	err := s.scanRows(ctx, q, args, func(scan func(dest ...any) error) error {
		if found {
			return nil
		}
		found = true
		return scan(dest...)
	})
	if err == nil && !found {
		return sql.ErrNoRows
	}
	return err
}
