package govern

import (
	"encoding/json"
	"slices"
)

// Names the external tests (package govern_test) use that are not part of
// the package's API.

var (
	ValidTraceID  = validTraceID
	EffectiveTier = effectiveTier
	CanTransition = canTransition
)

const (
	DefaultMaxRepairs = defaultMaxRepairs
)

// NewTraceID returns a random W3C trace-id.
func NewTraceID() string { return newTraceID() }

// ParentTraceID returns the parent's trace ID, or "".
func (r *Run) ParentTraceID() string { return r.parentTraceID }

// Identity returns who runs.
func (r *Run) Identity() Identity { return r.identity }

// TaskClass returns the run's task class name.
func (r *Run) TaskClass() string { return r.className }

// Repairs returns how many repairs the run made; MaxRepairs its budget.
func (r *Run) Repairs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.repairs
}

// MaxRepairs returns the run's repair budget.
func (r *Run) MaxRepairs() int { return r.maxRepairs }

// Evidence returns copies of the run's evidence objects.
func (r *Run) Evidence() []Evidence {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Evidence, len(r.evidence))
	for i, e := range r.evidence {
		out[i] = e.Clone()
	}
	return out
}

// Reports returns the verification reports of the run so far.
func (r *Run) Reports() []Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reports)
}

// CanRepair reports whether the last verification failed and the repair
// budget allows another attempt.
func (r *Run) CanRepair() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase == Verify && r.verdict != nil && !r.verdict.Passed && r.repairs < r.maxRepairs
}

// Snapshot returns what the last Pause recorded.
func (r *Run) Snapshot() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot
}

const MaxObjectSize = maxObjectSize
const MaxTokenSize = maxTokenSize

type ChildData = childData
type RollbackData = rollbackData

var HashJSON = hashJSON

// Leases is the journal lease interface, for tests.
type Leases = leaser
