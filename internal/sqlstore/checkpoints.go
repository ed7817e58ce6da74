package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/checkpoint"
)

// Checkpoints returns the store's agent.CheckpointStore (UAP-1.1 §12.2):
// one row per session in agent_checkpoints — the metadata in columns, the
// AgentStateJSON in state — replaced by every Save in one statement, so
// the checkpoint and its metadata always match. Session IDs are those
// agent.ValidateSessionID accepts.
func (s *Store) Checkpoints() agent.CheckpointStore { return checkpoints{s} }

type checkpoints struct{ s *Store }

func check(ctx context.Context, sessionID string) error {
	if err := agent.ValidateSessionID(sessionID); err != nil {
		return err
	}
	return ctx.Err()
}

func (c checkpoints) Save(ctx context.Context, sessionID string, state *agent.State) (err error) {
	defer c.s.mark(&err)
	if err := check(ctx, sessionID); err != nil {
		return err
	}
	data, err := state.MarshalJSON()
	if err != nil {
		return fmt.Errorf("sqlstore: session %q: %w", sessionID, err)
	}
	unlock, err := c.s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	m := agent.NewCheckpointMetadata(sessionID, state)
	_, err = c.s.db.ExecContext(ctx, `
INSERT INTO agent_checkpoints (session_id, checkpoint_id, agent_id, step, created_at, state)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (session_id) DO UPDATE SET
	checkpoint_id = excluded.checkpoint_id, agent_id = excluded.agent_id, step = excluded.step,
	created_at = excluded.created_at, state = excluded.state`,
		sessionID, m.CheckpointID, m.AgentID, int64(m.Step), m.Timestamp.UnixMilli(), string(data))
	if err != nil {
		return fmt.Errorf("sqlstore: save checkpoint %q: %w", sessionID, err)
	}
	return nil
}

func (c checkpoints) Load(ctx context.Context, sessionID string) (_ *agent.State, err error) {
	defer c.s.mark(&err)
	if err := check(ctx, sessionID); err != nil {
		return nil, err
	}
	var data string
	err = c.s.db.QueryRowContext(ctx, `SELECT state FROM agent_checkpoints WHERE session_id = $1`, sessionID).Scan(&data)
	if isNoRows(err) {
		return nil, agent.ErrNoCheckpoint
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: load checkpoint %q: %w", sessionID, err)
	}
	state, err := agent.FromJSON([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("%w: session %q: %w", checkpoint.ErrCorrupt, sessionID, err)
	}
	return state, nil
}

func (c checkpoints) LoadMetadata(ctx context.Context, sessionID string) (_ *agent.CheckpointMetadata, err error) {
	defer c.s.mark(&err)
	if err := check(ctx, sessionID); err != nil {
		return nil, err
	}
	var (
		m         = agent.CheckpointMetadata{SessionID: sessionID}
		step, now int64
	)
	err = c.s.db.QueryRowContext(ctx, `SELECT checkpoint_id, agent_id, step, created_at FROM agent_checkpoints WHERE session_id = $1`,
		sessionID).Scan(&m.CheckpointID, &m.AgentID, &step, &now)
	if isNoRows(err) {
		return nil, agent.ErrNoCheckpoint
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: load checkpoint metadata %q: %w", sessionID, err)
	}
	m.Step, m.Timestamp = int(step), time.UnixMilli(now).UTC()
	return &m, nil
}

func (c checkpoints) Delete(ctx context.Context, sessionID string) (err error) {
	defer c.s.mark(&err)
	if err := check(ctx, sessionID); err != nil {
		return err
	}
	unlock, err := c.s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := c.s.db.ExecContext(ctx, `DELETE FROM agent_checkpoints WHERE session_id = $1`, sessionID); err != nil {
		return fmt.Errorf("sqlstore: delete checkpoint %q: %w", sessionID, err)
	}
	return nil
}

// List returns the sessions sorted bytewise (not in the database's
// collation, which differs between SQLite and PostgreSQL).
func (c checkpoints) List(ctx context.Context) (_ []string, err error) {
	defer c.s.mark(&err)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := c.s.db.QueryContext(ctx, `SELECT session_id FROM agent_checkpoints`)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list checkpoints: %w", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlstore: list checkpoints: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: list checkpoints: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}
