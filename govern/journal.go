package govern

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/gowebpki/jcs"
)

// Journal is the append-only, hash-chained audit journal (UAICP §5.4).
// Every record a Run writes goes through Append, durably (sync) before the
// effect it records whenever it records an intent or a commit.
//
// Implementations: internal/journal (one file), internal/sqlstore (SQLite,
// PostgreSQL), internal/memstore (memory). Every implementation passes the
// govern/journaltest suite. They are safe for concurrent use.
type Journal interface {
	// Append appends recs in order: it assigns each its Seq (one more than
	// the last record's, starting at 1), Prev (the last record's Hash) and
	// Hash (Seal), in place. With sync it returns after recs and every
	// record appended before them are durable and sealed; an empty synced
	// Append is a flush. Without sync, they become durable with the next
	// synced append (or a store-specific flush) — order is kept either
	// way — and a journal may defer sealing them until then: the fields
	// are set at the latest when a later synced Append, or a read through
	// the same Journal, returns. If a record has a Unique key that an
	// earlier record had, Append appends nothing and returns an error
	// satisfying errors.Is(err, ErrDuplicate) (a journal that defers
	// appends does not defer those).
	Append(ctx context.Context, sync bool, recs ...*Record) error
	// Records yields the records with Seq ≥ from, in order.
	Records(ctx context.Context, from uint64) iter.Seq2[Record, error]
	// Close releases the journal; appended records stay durable as
	// promised by Append.
	Close() error
}

// RunReader is an optional interface of a Journal: the records of one run
// in order, found by an index rather than by reading the whole journal.
// The governor uses it to attach runs that are closed or not in its
// index.
type RunReader interface {
	RunRecords(ctx context.Context, requestID string) ([]Record, error)
}

// RecordKind says what a journal record records: "run_started",
// "transition", "invocation_intent", … — docs/governance.md lists the
// kinds and each one's Data. They are the governor's own persistence
// format, not UAICP wire; the typed view of a run's history is the runs
// package's events.
type RecordKind string

// ActorKind distinguishes who acted (§5.4).
type ActorKind string

// The actor kinds.
const (
	ActorSystem ActorKind = "system" // the orchestrator itself (recovery, timeouts)
	ActorAgent  ActorKind = "agent"  // an orchestration agent
	ActorHuman  ActorKind = "human"  // a human user (an approver)
)

// Actor is who caused a record.
type Actor struct {
	ID   string    `json:"id"`
	Kind ActorKind `json:"kind"`
}

// Record is one journal record. Every record carries what §5.4 requires:
// request_id, trace_id (W3C), timestamp, actor identity and kind, and
// outcome.
type Record struct {
	Seq           uint64     `json:"seq"`
	Prev          string     `json:"prev"`
	Hash          string     `json:"hash"`
	Timestamp     Time       `json:"timestamp"`
	Kind          RecordKind `json:"kind"`
	RequestID     string     `json:"request_id"`
	TraceID       string     `json:"trace_id"`
	ParentTraceID string     `json:"parent_trace_id,omitempty"`
	// SpanID is the OpenTelemetry span the record was written in (the
	// execute_tool span of a tool call, the invoke_agent span of a run),
	// 16 lowercase hex digits, when that span was recording and belongs
	// to the run's trace; empty otherwise.
	SpanID string `json:"span_id,omitempty"`
	// Node is the governor instance that wrote the record (Options.Node).
	Node string `json:"node,omitempty"`
	// Epoch is the epoch of the run's lease its writer held (Options.Lease);
	// 0 without leases. A journal with leases refuses a record whose
	// epoch is not the lease's newest.
	Epoch uint64 `json:"epoch,omitempty"`
	Actor Actor  `json:"actor"`
	// From and To are set on transitions.
	From Phase `json:"from,omitempty"`
	To   Phase `json:"to,omitempty"`
	// Tool and CallID name the tool call a record is about.
	Tool    string   `json:"tool,omitempty"`
	CallID  string   `json:"call_id,omitempty"`
	Outcome Outcome  `json:"outcome"`
	Reasons []Reason `json:"reasons,omitempty"`
	// Unique, when set, may appear in only one record of the journal (an
	// approval token's jti, consumed once).
	Unique string          `json:"unique,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// Seal sets r's Seq and Prev to follow prev (nil for the first record)
// and computes its Hash. Journal implementations call it in Append.
func Seal(prev *Record, r *Record) error {
	if prev == nil {
		r.Seq, r.Prev = 1, ""
	} else {
		r.Seq, r.Prev = prev.Seq+1, prev.Hash
	}
	h, err := r.ComputeHash()
	if err != nil {
		return err
	}
	r.Hash = h
	return nil
}

// ComputeHash returns the hash r should carry: "sha256:" + hex of the
// SHA-256 of the JCS form of r without its hash member.
func (r *Record) ComputeHash() (string, error) {
	buf := canonBufs.Get().(*[]byte)
	defer canonBufs.Put(buf)
	if canon, ok := appendCanonicalRecord((*buf)[:0], r); ok {
		*buf = canon[:0]
		return hashString(sha256.Sum256(canon)), nil
	}
	return r.computeHashJCS()
}

// computeHashJCS is ComputeHash by the general path: encoding/json, then
// JCS (see appendCanonicalRecord).
func (r *Record) computeHashJCS() (string, error) {
	c := *r
	c.Hash = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("govern: journal record: %w", err)
	}
	canon, err := jcs.Transform(b)
	if err != nil {
		return "", fmt.Errorf("govern: journal record: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ChainError describes where a journal's chain breaks.
type ChainError struct {
	Seq    uint64 // the record at which the chain breaks
	Reason string
}

// Error returns a message naming the record at which the chain breaks
// and the reason.
func (e *ChainError) Error() string {
	return fmt.Sprintf("govern: journal chain broken at record %d: %s", e.Seq, e.Reason)
}

// Is makes errors.Is(err, ErrChainBroken) true.
func (e *ChainError) Is(target error) bool { return target == ErrChainBroken }

// ErrChainBroken: a journal's hash chain does not hold (a record was
// deleted, edited, inserted or reordered).
var ErrChainBroken = errors.New("govern: journal chain broken")

// ChainVerifier checks a journal's records one by one, in order.
type ChainVerifier struct {
	prev  Record // the last record that passed, when count > 0
	count uint64
}

// Next checks r against the record before it: consecutive Seq starting at
// 1, Prev equal to the previous Hash, Hash equal to r's computed hash.
func (v *ChainVerifier) Next(r Record) error {
	h, err := r.ComputeHash()
	return v.NextComputed(r, h, err)
}

// NextComputed is Next for a record whose hash was computed already:
// hash and err are what r.ComputeHash returned. A reader that hashes
// records concurrently checks the chain with it, in order.
func (v *ChainVerifier) NextComputed(r Record, hash string, err error) error {
	want := uint64(1)
	wantPrev := ""
	if v.count > 0 {
		want, wantPrev = v.prev.Seq+1, v.prev.Hash
	}
	switch {
	case r.Seq != want:
		return &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("sequence number %d where %d was expected (a record is missing or out of order)", r.Seq, want)}
	case r.Prev != wantPrev:
		return &ChainError{Seq: r.Seq, Reason: "prev does not match the previous record's hash"}
	}
	if err != nil {
		return &ChainError{Seq: r.Seq, Reason: err.Error()}
	}
	if hash != r.Hash {
		return &ChainError{Seq: r.Seq, Reason: "hash does not match the record's content (it was edited)"}
	}
	v.prev = r
	v.count++
	return nil
}

// Count returns how many records passed.
func (v *ChainVerifier) Count() uint64 { return v.count }

// Head returns the last record that passed, or nil.
func (v *ChainVerifier) Head() *Record {
	if v.count == 0 {
		return nil
	}
	h := v.prev
	return &h
}

// VerifyChain reads every record of j and checks the chain. It returns the
// number of records checked.
func VerifyChain(ctx context.Context, j Journal) (uint64, error) {
	var v ChainVerifier
	for r, err := range j.Records(ctx, 1) {
		if err != nil {
			return v.Count(), err
		}
		if err := v.Next(r); err != nil {
			return v.Count(), err
		}
	}
	return v.Count(), nil
}
