package journalfixture

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/unavailable"
)

// ErrDown is what the SQL store answers while PostgreSQL is out of reach:
// an error marked unavailable.
var ErrDown = unavailable.Wrap(errors.New("dial tcp 127.0.0.1:5432: connection refused"))

// Outage is a journal whose database goes away on demand: while Down,
// every read and write fails with ErrDown; while WritesDown, only writes
// do (a database that still answers reads).
type Outage struct {
	govern.Journal
	Down, WritesDown atomic.Bool
}

// Append appends, unless the journal (or its writing) is down.
func (j *Outage) Append(ctx context.Context, sync bool, recs ...*govern.Record) error {
	if j.Down.Load() || j.WritesDown.Load() {
		return ErrDown
	}
	return j.Journal.Append(ctx, sync, recs...)
}

// Records reads, unless the journal is down.
func (j *Outage) Records(ctx context.Context, from uint64) iter.Seq2[govern.Record, error] {
	if j.Down.Load() {
		return func(yield func(govern.Record, error) bool) { yield(govern.Record{}, ErrDown) }
	}
	return j.Journal.Records(ctx, from)
}
