// Package checkpoint implements the file-based CheckpointStore of UAP-1.1
// §12 (Serialization, github.com/ProviderProtocol/agents): File is fileCheckpoints() of
// §12.4, writing each session's AgentStateJSON (§12.1) and its
// CheckpointMetadata (§12.2) under <dir>/<sessionId>/, crash-safely.
//
//	store, err := checkpoint.File("") // ".checkpoints", the spec's default
//	a, err := agent.New(&agent.Options{LLMOptions: opts, Checkpoints: store})
//	…
//	res, err := a.Resume(ctx, sessionID) // after a crash
//
// The in-memory store is memstore.New().Checkpoints() (internal/memstore),
// the database one sqlstore.Open (internal/sqlstore, SQLite and PostgreSQL),
// next to the stores of the other persistence interfaces. Every
// implementation passes the suite in agent/checkpointtest and
// validates session IDs with ValidateSessionID, so that an ID accepted by
// one store is accepted by all.
package checkpoint

import (
	"errors"
)

// ErrCorrupt is returned (wrapped, with the cause) by Load and LoadMetadata
// when a stored checkpoint exists but cannot be decoded or validated.
var ErrCorrupt = errors.New("checkpoint: corrupt checkpoint")
