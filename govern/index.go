package govern

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/agentry-dev/agentry/internal/recordkind"
)

// index follows the journal: the records of runs not yet terminal, and
// their approval requests. It is how a governor finds paused runs,
// pending approvals and, in Recover, the runs a crash left open — also
// those written by other replicas sharing the journal.
type index struct {
	mu sync.Mutex
	// keep says the index holds its open runs' records, for a journal
	// that cannot read one run's records (no RunReader); otherwise it
	// holds only what it indexes, and reads only those kinds when the
	// journal can filter them (kindReader).
	keep      bool
	filter    kindReader
	last      uint64
	runs      map[string]*indexedRun
	approvals map[string]*ApprovalRequest
	asked     map[string]uint64 // approval ID → seq of its request (the order to list them in)
}

type indexedRun struct {
	node    string
	records []Record // with keep only
	phase   Phase
	paused  bool
	order   uint64 // seq of run_started
}

// indexKinds are the records index.apply reads; a journal that keeps
// no records for the index yields only these to it.
var indexKinds = []RecordKind{recordkind.RunStarted, recordkind.Transition, recordkind.Paused, recordkind.Resumed,
	recordkind.ApprovalRequested, recordkind.ApprovalDecided}

// kindReader is an optional interface of a Journal: Records of some kinds
// only, the others skipped without decoding them (sqlstore's journals).
// A governor sharing its journal with other replicas reads every record
// they append; with it, it decodes only the few its index needs.
type kindReader interface {
	RecordsOf(ctx context.Context, from uint64, kinds []RecordKind) iter.Seq2[Record, error]
}

func (x *index) init(j Journal) {
	_, rr := j.(RunReader)
	x.keep = !rr
	if kr, ok := j.(kindReader); ok && rr {
		x.filter = kr
	}
	x.runs = map[string]*indexedRun{}
	x.approvals = map[string]*ApprovalRequest{}
	x.asked = map[string]uint64{}
}

// refresh reads the records appended since the last refresh.
func (g *Governor) refresh(ctx context.Context) error {
	x := &g.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	recs := g.j.Records
	if x.filter != nil {
		recs = func(ctx context.Context, from uint64) iter.Seq2[Record, error] {
			return x.filter.RecordsOf(ctx, from, indexKinds)
		}
	}
	for rec, err := range recs(ctx, x.last+1) {
		if err != nil {
			return fmt.Errorf("govern: reading the journal: %w", err)
		}
		if rec.Seq <= x.last {
			continue
		}
		x.last = rec.Seq
		x.apply(rec)
	}
	return nil
}

func (x *index) apply(rec Record) {
	ir := x.runs[rec.RequestID]
	if rec.Kind == recordkind.RunStarted {
		if ir != nil {
			return // a second start for one request ID: ignored, the first wins
		}
		ir = &indexedRun{node: rec.Node, phase: Intake, order: rec.Seq}
		x.runs[rec.RequestID] = ir
	}
	if ir == nil {
		return // a record of a run that is closed (or unknown)
	}
	if x.keep {
		ir.records = append(ir.records, rec)
	}
	switch rec.Kind {
	case recordkind.Transition:
		ir.phase = rec.To
		if rec.From == Verify && (rec.To == Plan || rec.To == Execute) {
			// A repair supersedes the pending requests of earlier
			// attempts (Run.supersedeLocked).
			var d TransitionData
			if json.Unmarshal(rec.Data, &d) == nil {
				for id, a := range x.approvals {
					if a.RequestID == rec.RequestID && a.Status == StatusPending && a.Attempt < d.Repairs {
						delete(x.approvals, id)
					}
				}
			}
		}
	case recordkind.Paused:
		ir.paused = true
	case recordkind.Resumed:
		ir.paused = false
	case recordkind.ApprovalRequested:
		var a ApprovalRequest
		if json.Unmarshal(rec.Data, &a) == nil && a.ID != "" {
			a.Status = StatusPending
			x.approvals[a.ID] = &a
			x.asked[a.ID] = rec.Seq
		}
	case recordkind.ApprovalDecided:
		var d ApprovalDecision
		if json.Unmarshal(rec.Data, &d) == nil {
			if a, ok := x.approvals[d.ApprovalID]; ok && a.Status == StatusPending {
				a.Decision = &d
				a.Status = StatusDenied
				if d.Approved {
					a.Status = StatusApproved
				}
			}
		}
	}
	if ir.phase.Terminal() {
		for id, a := range x.approvals {
			if a.RequestID == rec.RequestID {
				delete(x.approvals, id)
				delete(x.asked, id)
			}
		}
		delete(x.runs, rec.RequestID)
	}
}

// paused reports whether the open run requestID is paused.
func (x *index) paused(requestID string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := x.runs[requestID]
	return ok && r.paused
}

func (x *index) known(requestID string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.runs[requestID]
	return ok
}

// openRuns returns the request IDs of non-terminal runs of node and of
// no node ("" is every node), oldest first.
func (x *index) openRuns(node string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	type item struct {
		id    string
		order uint64
	}
	var items []item
	for id, r := range x.runs {
		if node == "" || r.node == node || r.node == "" {
			items = append(items, item{id, r.order})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.order, b.order) })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.id
	}
	return out
}

func (x *index) approvalList(pendingOnly bool) []ApprovalRequest {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]ApprovalRequest, 0, len(x.approvals))
	for _, a := range x.approvals {
		if pendingOnly && a.Status != StatusPending {
			continue
		}
		out = append(out, cloneApproval(a))
	}
	slices.SortFunc(out, func(a, b ApprovalRequest) int { return cmp.Compare(x.asked[a.ID], x.asked[b.ID]) })
	return out
}

func (x *index) approval(id string) (ApprovalRequest, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	a, ok := x.approvals[id]
	if !ok {
		return ApprovalRequest{}, false
	}
	return cloneApproval(a), true
}

func cloneApproval(a *ApprovalRequest) ApprovalRequest {
	c := *a
	if a.Decision != nil {
		d := *a.Decision
		c.Decision = &d
	}
	c.Reasons = slices.Clone(a.Reasons)
	return c
}

// runRecords returns the records of one run: from the journal's
// RunReader; without one from the index when the run is open, else by
// reading the whole journal.
func (g *Governor) runRecords(ctx context.Context, requestID string) ([]Record, error) {
	if g.idx.keep {
		g.idx.mu.Lock()
		if ir, ok := g.idx.runs[requestID]; ok {
			recs := slices.Clone(ir.records)
			g.idx.mu.Unlock()
			return recs, nil
		}
		g.idx.mu.Unlock()
	}
	var recs []Record
	if rr, ok := g.j.(RunReader); ok {
		var err error
		if recs, err = rr.RunRecords(ctx, requestID); err != nil {
			return nil, fmt.Errorf("govern: reading the journal: %w", err)
		}
		if len(recs) == 0 || recs[0].Kind != recordkind.RunStarted {
			return nil, ErrUnknownRun
		}
		return recs, nil
	}
	for rec, err := range g.j.Records(ctx, 1) {
		if err != nil {
			return nil, fmt.Errorf("govern: reading the journal: %w", err)
		}
		if rec.RequestID == requestID {
			recs = append(recs, rec)
		}
	}
	if len(recs) == 0 || recs[0].Kind != recordkind.RunStarted {
		return nil, ErrUnknownRun
	}
	return recs, nil
}
