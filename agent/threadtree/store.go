package threadtree

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
)

// Save stores the tree as the latest checkpoint of session sessionID in
// store: a state with no messages whose metadata MetadataTree holds the
// tree's JSON as a string (see the package documentation). It fails,
// without saving, when that state's JSON would exceed agent.MaxStateJSON,
// which agent.FromJSON, and so a store, could not load back.
func (t *Tree) Save(ctx context.Context, store agent.CheckpointStore, sessionID string) error {
	data, err := t.MarshalJSON()
	if err != nil {
		return err
	}
	carrier := agent.Initial().WithMetadata(MetadataTree, string(data))
	// A JSON string escapes a byte into at most 6 ("\u003c"): marshal to
	// measure only when the limit is within reach.
	if 6*len(data)+1024 > agent.MaxStateJSON {
		b, err := carrier.MarshalJSON()
		if err != nil {
			return fmt.Errorf("threadtree: save: %w", err)
		}
		if len(b) > agent.MaxStateJSON {
			return fmt.Errorf("threadtree: save: the tree's checkpoint would be %d bytes, over agent.MaxStateJSON", len(b))
		}
	}
	if err := store.Save(ctx, sessionID, carrier); err != nil {
		return fmt.Errorf("threadtree: save session %s: %w", sessionID, err)
	}
	return nil
}

// Load returns the tree Save stored as the latest checkpoint of session
// sessionID in store. It fails with agent.ErrNoCheckpoint when the
// session has no checkpoint, with ErrNoTree when the checkpoint is not a
// tree, and with ErrInvalidTree when the tree does not decode.
func Load(ctx context.Context, store agent.CheckpointStore, sessionID string) (*Tree, error) {
	state, err := store.Load(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("threadtree: load session %s: %w", sessionID, err)
	}
	v, ok := state.Value(MetadataTree)
	data, isString := v.(string)
	if !ok || !isString {
		return nil, fmt.Errorf("%w: session %s", ErrNoTree, sessionID)
	}
	t, err := FromJSON([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("threadtree: load session %s: %w", sessionID, err)
	}
	return t, nil
}
