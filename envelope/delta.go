package envelope

import (
	"encoding/json"
	"slices"
	"time"
)

// DeltaType is a delta's type (§5, A.2).
type DeltaType string

// The delta types of A.2.
const (
	DeltaPatch    DeltaType = "patch"
	DeltaChunk    DeltaType = "chunk"
	DeltaProgress DeltaType = "progress"
	DeltaDone     DeltaType = "done"
	DeltaCancel   DeltaType = "cancel"
	DeltaError    DeltaType = "error"
)

// deltaTypes lists the delta types of A.2.
var deltaTypes = []DeltaType{DeltaPatch, DeltaChunk, DeltaProgress, DeltaDone, DeltaCancel, DeltaError}

// Valid reports whether t is one of the delta types of A.2.
func (t DeltaType) Valid() bool { return slices.Contains(deltaTypes, t) }

// Final reports whether t ends its stream (done, cancel, error).
func (t DeltaType) Final() bool { return t == DeltaDone || t == DeltaCancel || t == DeltaError }

// MaxDeltaSeq is the largest delta_seq: integers beyond 2^53 are refused
// (DESIGN §5).
const MaxDeltaSeq = 1 << 53

// Delta is a streaming frame (§5, schema A.2, closed). Deltas are not
// signed; they travel on a stream the signed request opened.
type Delta struct {
	Seq      int64     `json:"delta_seq"`
	StreamID string    `json:"stream_id"`
	TS       string    `json:"ts"`
	Type     DeltaType `json:"type"`
	// Payload is a JSON object, or nil when absent.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// time parses TS (ParseTime).
func (d *Delta) time() (time.Time, error) { return parseTime(d.TS) }
