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
// The in-memory store is memstore.New().Checkpoints() (store/memstore),
// the database one sqlstore.Open (store/sqlstore, SQLite and PostgreSQL),
// next to the stores of the other persistence interfaces. Every
// implementation passes the suite in agent/checkpoint/storetest and
// validates session IDs with ValidateSessionID, so that an ID accepted by
// one store is accepted by all.
package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxSessionIDLen bounds the length of a session ID, in bytes.
const MaxSessionIDLen = 128

// ErrInvalidSessionID is returned (wrapped) by every operation of the
// stores for a session ID that ValidateSessionID rejects.
var ErrInvalidSessionID = errors.New("checkpoint: invalid session ID")

// ErrCorrupt is returned (wrapped, with the cause) by Load and LoadMetadata
// when a stored checkpoint exists but cannot be decoded or validated.
var ErrCorrupt = errors.New("checkpoint: corrupt checkpoint")

// ValidateSessionID reports whether id can name a session: a non-empty,
// valid UTF-8 string of at most MaxSessionIDLen bytes, without control
// characters, without path separators ('/' and '\'), without "..", and not
// starting with '.' (the file store's own names start with one). A UUIDv4,
// which the agent generates, is always valid. The error wraps
// ErrInvalidSessionID.
//
// The rules make a session ID a safe single path element: a file store
// never reads or writes outside its directory, whatever the ID.
func ValidateSessionID(id string) error {
	reason := ""
	switch {
	case id == "":
		reason = "empty"
	case len(id) > MaxSessionIDLen:
		reason = fmt.Sprintf("longer than %d bytes", MaxSessionIDLen)
	case !utf8.ValidString(id):
		reason = "not valid UTF-8"
	case strings.ContainsAny(id, `/\`):
		reason = "contains a path separator"
	case strings.Contains(id, ".."):
		reason = `contains ".."`
	case id[0] == '.':
		reason = `starts with "."`
	case strings.IndexFunc(id, isControl) >= 0:
		reason = "contains a control character"
	default:
		return nil
	}
	if len(id) > MaxSessionIDLen {
		id = id[:32] + "…"
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidSessionID, id, reason)
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }
