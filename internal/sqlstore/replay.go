package sqlstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// ReplayStore returns the store's envelope.ReplayStore (UAMP 1.0 §6,
// replay protection): the (from, id) pairs of accepted envelopes, kept
// until they expire, in table uamp_replay. It survives restarts, and
// servers sharing one PostgreSQL database share one replay window: a
// pair accepted by one is refused by every other.
//
//	guard := envelope.NewReplayWindow(&envelope.ReplayOptions{Store: st.ReplayStore()})
//
// The value is also the store of UAMP streams on the same database, a
// streamlog.Store (streams.go): what UAMP needs of the database comes
// together, through the one accessor store.Store has for it.
func (s *Store) ReplayStore() envelope.ReplayStore { return &uampStore{s: s} }

// replaySweepEvery is how many Remember calls pass between deletions of
// expired pairs.
const replaySweepEvery = 1024

// uampStore is UAMP's state in the database: the replay window
// (envelope.ReplayStore) and the streams (streamlog.Store).
type uampStore struct {
	s     *Store
	calls atomic.Uint64
}

// Remember implements envelope.ReplayStore with one statement: the pair
// is inserted, or its row taken over when it expired; a row that has not
// expired is left alone, and no row changed means a replay. The
// statement is atomic in both databases, so of concurrent calls with one
// pair exactly one changes a row.
func (r *uampStore) Remember(ctx context.Context, from, id string, expires, now time.Time) (err error) {
	defer r.s.mark(&err)
	unlock, err := r.s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	res, err := r.s.db.ExecContext(ctx, `
INSERT INTO uamp_replay (sender, id, expires_at) VALUES ($1, $2, $3)
ON CONFLICT (sender, id) DO UPDATE SET expires_at = excluded.expires_at
WHERE uamp_replay.expires_at < $4`, from, id, expires.UnixMilli(), now.UnixMilli())
	if err != nil {
		return fmt.Errorf("sqlstore: replay store: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlstore: replay store: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("sqlstore: (%s, %s) was accepted before: %w", from, id, envelope.ErrReplayed)
	}
	if r.calls.Add(1)%replaySweepEvery == 0 {
		// Expired pairs refuse nothing: dropping them only bounds the
		// table. A failure here is not the caller's.
		r.s.db.ExecContext(ctx, `DELETE FROM uamp_replay WHERE expires_at < $1`, now.UnixMilli())
	}
	return nil
}
