package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// Leases (govern.Options.Lease) are rows of governance_leases: lease_key (a
// run's request ID; other leases have a key with a colon: "node:" and a
// node name, "audit:" and an export's name), owner, epoch, state —
// running (held until expires_at), released (claimable), ended (a run
// that ended: never claimed again) — and expires_at in Unix milliseconds
// of the database's clock: no process's clock decides who holds a lease.

// Lease states.
const (
	leaseRunning  = "running"
	leaseReleased = "released"
	leaseEnded    = "ended"
)

func ttlMS(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// Claim implements the governor's lease interface (govern.Options.Lease).
func (j *sqlJournal) Claim(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, err error) {
	s := j.s
	defer s.mark(&err)
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	for range 2 { // a lease gone between the two statements is claimed on the second try
		// One statement: the lease is created at epoch 1, or taken over
		// when it is released, expired, or the owner's own.
		var epoch int64
		err := s.queryRow(ctx, `
INSERT INTO governance_leases (lease_key, owner, epoch, state, expires_at) VALUES ($1, $2, 1, 'running', `+s.nowMS()+` + $3)
ON CONFLICT (lease_key) DO UPDATE SET owner = excluded.owner, epoch = governance_leases.epoch + 1, state = 'running',
	expires_at = excluded.expires_at, decided = NULL
WHERE governance_leases.state <> 'ended' AND (governance_leases.state = 'released' OR governance_leases.owner = excluded.owner
	OR governance_leases.expires_at < `+s.nowMS()+`)
RETURNING epoch`, []any{key, owner, ttlMS(ttl)}, &epoch)
		if err == nil {
			return uint64(epoch), nil
		}
		if !isNoRows(err) {
			return 0, fmt.Errorf("sqlstore: claim lease %s: %w", key, err)
		}
		var state, holder string
		err = s.queryRow(ctx, `SELECT state, owner FROM governance_leases WHERE lease_key = $1`, []any{key}, &state, &holder)
		switch {
		case err == nil && state == leaseEnded:
			return 0, govern.ErrRunClosed
		case err == nil:
			return 0, fmt.Errorf("%w (%s)", govern.ErrLeased, holder)
		case !isNoRows(err):
			return 0, fmt.Errorf("sqlstore: claim lease %s: %w", key, err)
		}
	}
	return 0, fmt.Errorf("%w (claimed concurrently)", govern.ErrLeased)
}

// ClaimExpired implements the governor's lease interface (govern.Options.Lease).
func (j *sqlJournal) ClaimExpired(ctx context.Context, owner string, ttl time.Duration, limit int) (_ map[string]uint64, err error) {
	s := j.s
	defer s.mark(&err)
	if limit <= 0 {
		return nil, nil
	}
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	pick := `SELECT lease_key FROM governance_leases WHERE state = 'running' AND expires_at < ` + s.nowMS() +
		` AND lease_key NOT LIKE '%:%' ORDER BY expires_at LIMIT ` + strconv.Itoa(limit)
	if s.dialect == postgres {
		pick += ` FOR UPDATE SKIP LOCKED` // replicas reaping at once share the work
	}
	rows, err := s.db.QueryContext(ctx, `
UPDATE governance_leases SET owner = $1, epoch = epoch + 1, expires_at = `+s.nowMS()+` + $2
WHERE lease_key IN (`+pick+`) AND state = 'running' AND expires_at < `+s.nowMS()+`
RETURNING lease_key, epoch`, owner, ttlMS(ttl))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: claim expired leases: %w", err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var (
			key   string
			epoch int64
		)
		if err := rows.Scan(&key, &epoch); err != nil {
			return nil, fmt.Errorf("sqlstore: claim expired leases: %w", err)
		}
		out[key] = uint64(epoch)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: claim expired leases: %w", err)
	}
	return out, nil
}

// Renew implements the governor's lease interface (govern.Options.Lease).
func (j *sqlJournal) Renew(ctx context.Context, owner string, ttl time.Duration, held map[string]uint64) (_ []string, err error) {
	s := j.s
	defer s.mark(&err)
	if len(held) == 0 {
		return nil, nil
	}
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	keys := make([]any, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	renewed := map[string]bool{}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		var q strings.Builder
		q.WriteString(`UPDATE governance_leases SET expires_at = ` + s.nowMS() + ` + $2 WHERE owner = $1 AND state = 'running' AND lease_key IN (`)
		for i := range n {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("$" + strconv.Itoa(i+3))
		}
		q.WriteString(`) RETURNING lease_key, epoch`)
		args := append([]any{owner, ttlMS(ttl)}, keys[:n]...)
		if err := func() error {
			rows, err := s.db.QueryContext(ctx, q.String(), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var (
					key   string
					epoch int64
				)
				if err := rows.Scan(&key, &epoch); err != nil {
					return err
				}
				// A lease of this owner at a newer epoch is another
				// claim's (a restart of this node): not ours to renew,
				// but harmless to have extended — its holder renews it.
				renewed[key] = uint64(epoch) == held[key]
			}
			return rows.Err()
		}(); err != nil {
			return nil, fmt.Errorf("sqlstore: renew leases: %w", err)
		}
		keys = keys[n:]
	}
	var lost []string
	for k := range held {
		if !renewed[k] {
			lost = append(lost, k)
		}
	}
	return lost, nil
}

// Release implements the governor's lease interface (govern.Options.Lease).
func (j *sqlJournal) Release(ctx context.Context, key string, epoch uint64) (err error) {
	s := j.s
	defer s.mark(&err)
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := s.db.ExecContext(ctx, `UPDATE governance_leases SET state = 'released', expires_at = NULL WHERE lease_key = $1 AND epoch = $2 AND state = 'running'`,
		key, int64(epoch)); err != nil {
		return fmt.Errorf("sqlstore: release lease %s: %w", key, err)
	}
	return nil
}

// fenceQueries read, inside an append's transaction, the leases of the
// runs whose records of the batch carry an epoch: key, epoch, state
// (locked FOR SHARE on PostgreSQL, so that no claim moves them until the
// commit). checkFence then refuses a record whose epoch is not its
// running lease's; a lease that does not exist has epoch 0.
func fenceQueries(batch []*journalAppend, d dialect) []statement {
	var keys []any
	seen := map[string]bool{}
	for _, a := range batch {
		for _, r := range a.recs {
			if r.Epoch > 0 && !seen[r.RequestID] {
				seen[r.RequestID] = true
				keys = append(keys, r.RequestID)
			}
		}
	}
	suffix := ""
	if d == postgres {
		suffix = " FOR SHARE"
	}
	return chunked(keys, `SELECT lease_key, epoch, state FROM governance_leases WHERE lease_key`, suffix, "leases")
}

// checkFence refuses records whose epoch is not their running lease's.
func checkFence(recs []*govern.Record, epochs map[string]int64) error {
	for _, r := range recs {
		if r.Epoch > 0 && epochs[r.RequestID] != int64(r.Epoch) {
			return fmt.Errorf("sqlstore: journal: run %s at lease epoch %d: %w", r.RequestID, r.Epoch, govern.ErrLeased)
		}
	}
	return nil
}

// leaseMoves are the lease changes the records of an append make: a
// pause releases the run's lease, a terminal transition ends it, and an
// approval decision marks it as owed a resume (Decided) and, on
// PostgreSQL, notifies every replica (decisionChannel).
type leaseMoves struct {
	states  map[string]string // request ID → new state
	decided []decision
}

// A decision is an approval decision record of an append.
type decision struct {
	requestID string
	seq       uint64 // the record's: the order of decisions
	payload   string // its decisionChannel notification
}

func (m *leaseMoves) add(recs []*govern.Record) {
	for _, r := range recs {
		switch {
		case r.Kind == recordkind.ApprovalDecided:
			var d govern.ApprovalDecision
			_ = json.Unmarshal(r.Data, &d) // the governor's own record: it decodes
			m.decided = append(m.decided, decision{r.RequestID, r.Seq, r.RequestID + " " + d.ApprovalID + " " + r.Node})
		case r.Epoch == 0:
		case r.Kind == recordkind.Paused:
			m.states[r.RequestID] = leaseReleased
		case r.Kind == recordkind.Transition && r.To.Terminal():
			m.states[r.RequestID] = leaseEnded
		}
	}
}

// statements are the writes of moves in the append's transaction.
func (m *leaseMoves) statements(s *Store) []statement {
	var out []statement
	for key, state := range m.states {
		out = append(out, statement{`UPDATE governance_leases SET state = $2, expires_at = NULL WHERE lease_key = $1`,
			[]any{key, state}, "lease of " + key})
	}
	for _, d := range m.decided {
		out = append(out, statement{`UPDATE governance_leases SET decided = $2 WHERE lease_key = $1`,
			[]any{d.requestID, int64(d.seq)}, "lease of " + d.requestID})
		if s.dialect == postgres {
			// Delivered at the commit, to every listening replica.
			out = append(out, statement{`SELECT pg_notify($1, $2)`, []any{decisionChannel, d.payload}, "notify the decision"})
		}
	}
	return out
}

// decisionChannel is the PostgreSQL notification channel of approval
// decisions: each journaled decision notifies "request_id approval_id
// node" (IDs and node names hold no space) when its append commits.
const decisionChannel = "agentry_decisions"

func parseDecision(p string) (requestID, approvalID, node string) {
	requestID, rest, _ := strings.Cut(p, " ")
	approvalID, node, _ = strings.Cut(rest, " ")
	return requestID, approvalID, node
}

// NextExpiry implements the governor's lease interface (govern.Options.Lease).
func (j *sqlJournal) NextExpiry(ctx context.Context, owner string) (_ time.Duration, _ bool, err error) {
	s := j.s
	defer s.mark(&err)
	var ms sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(expires_at) - `+s.nowMS()+` FROM governance_leases
WHERE state = 'running' AND owner <> $1 AND lease_key NOT LIKE '%:%'`, owner).Scan(&ms); err != nil {
		return 0, false, fmt.Errorf("sqlstore: next lease expiry: %w", err)
	}
	if !ms.Valid {
		return 0, false, nil
	}
	return time.Duration(max(ms.Int64, 0)) * time.Millisecond, true, nil
}

// Decided implements the governor's lease interface (govern.Options.Lease).
func (j *sqlJournal) Decided(ctx context.Context, limit int) (_ []string, err error) {
	s := j.s
	defer s.mark(&err)
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT lease_key FROM governance_leases WHERE state = 'released' AND decided IS NOT NULL
ORDER BY decided LIMIT `+strconv.Itoa(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: decided runs: %w", err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("sqlstore: decided runs: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: decided runs: %w", err)
	}
	return keys, nil
}

// WatchDecisions calls wake, from a goroutine of its own, for each
// approval decision journaled by any process on this PostgreSQL database
// (LISTEN on decisionChannel), until the Store closes. Notifications are
// lost while the listener reconnects: Decided is the fallback. On SQLite
// it does nothing (one process writes the database).
func (j *sqlJournal) WatchDecisions(wake func(requestID, approvalID, node string)) {
	if j.s.dialect != postgres {
		return
	}
	j.s.hub.watchDecisions(func(p string) { wake(parseDecision(p)) })
}
