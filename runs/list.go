package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// Limits of ListParams.Limit: the default and the most.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

// ListParams selects runs to list.
type ListParams struct {
	// Status keeps the runs of that status; "" keeps all.
	Status Status
	// Agent keeps the runs of the named agent; "" keeps all.
	Agent string
	// Limit is the most runs to return: 0 is 50, at most
	// 1000.
	Limit int
	// After is the cursor: the request ID of the last run of the previous
	// page; the runs started before it follow. "" starts with the newest.
	After string
}

// List returns runs, newest first, as selected by p (nil: the newest
// defaultListLimit runs). The runs come from the journal — every top-level
// governed run it records, also those of earlier processes and of other
// replicas sharing it (child runs of sub-agents are left out) — and carry
// what the journal tells in brief: request ID, agent, status, pending
// approvals, reasons and error; Get has the envelope, output and denied
// calls. The next page is List with After set to the last run's request
// ID. It fails with InvalidParams for a bad status or limit, or an After
// that names no listed run.
func (s *Service) List(ctx context.Context, p *ListParams) ([]*Run, error) {
	out, _, err := s.list(ctx, p)
	return out, err
}

// list is List, also saying whether runs remain after the page.
func (s *Service) list(ctx context.Context, p *ListParams) ([]*Run, bool, error) {
	if p == nil {
		p = &ListParams{}
	}
	switch p.Status {
	case "", Running, Paused, Delivered, FailSafe:
	default:
		return nil, false, newError(InvalidParams, "", fmt.Sprintf("status %q is not one of running, paused, delivered, fail_safe", p.Status), nil)
	}
	limit := p.Limit
	switch {
	case limit == 0:
		limit = defaultListLimit
	case limit < 0 || limit > maxListLimit:
		return nil, false, newError(InvalidParams, "", fmt.Sprintf("limit must be between 1 and %d", maxListLimit), nil)
	}
	x := &s.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.refreshLocked(ctx, s.g.Journal()); err != nil {
		return nil, false, newError(Internal, "", "", err)
	}
	from := len(x.runs) - 1
	if p.After != "" {
		r, ok := x.byID[p.After]
		if !ok {
			return nil, false, newError(InvalidParams, "", fmt.Sprintf("after: %q names no run", p.After), nil)
		}
		from = r.pos - 1
	}
	s.mu.Lock()
	executing := make(map[string]bool, len(s.running))
	for id := range s.running {
		executing[id] = true
	}
	s.mu.Unlock()
	var out []*Run
	for i := from; i >= 0; i-- {
		r := x.runs[i].run(executing[x.runs[i].id])
		if (p.Status != "" && r.Status != p.Status) || (p.Agent != "" && r.Agent != p.Agent) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, r)
	}
	return out, false, nil
}

// runIndex follows the journal for List: a summary of every top-level
// run, in the order they started. It is read when listing, from where
// it stopped.
type runIndex struct {
	mu   sync.Mutex
	last uint64 // the last journal record read
	runs []*runSummary
	byID map[string]*runSummary
}

type runSummary struct {
	id, agent string
	pos       int // in runIndex.runs
	phase     govern.Phase
	paused    bool
	pausedFor []string        // the approvals of the last pause
	decided   map[string]bool // approval IDs decided
	reasons   []govern.Reason
	cause     *govern.Cause
	started   time.Time
	ended     time.Time // zero until delivered or failed safe
}

func (x *runIndex) init() { x.byID = map[string]*runSummary{} }

func (x *runIndex) refreshLocked(ctx context.Context, j govern.Journal) error {
	for rec, err := range j.Records(ctx, x.last+1) {
		if err != nil {
			return err
		}
		if rec.Seq <= x.last {
			continue
		}
		x.last = rec.Seq
		x.apply(rec)
	}
	return nil
}

func (x *runIndex) apply(rec govern.Record) {
	r := x.byID[rec.RequestID]
	if rec.Kind == recordkind.RunStarted {
		if r != nil || rec.ParentTraceID != "" {
			return // a second start is ignored (as govern does); a child run is not listed
		}
		var st govern.RunStart
		_ = json.Unmarshal(rec.Data, &st)
		r = &runSummary{id: rec.RequestID, agent: st.Resumer, pos: len(x.runs), phase: govern.Intake, decided: map[string]bool{}, started: rec.Timestamp.Time}
		x.runs = append(x.runs, r)
		x.byID[r.id] = r
		return
	}
	if r == nil || r.phase.Terminal() {
		return
	}
	switch rec.Kind {
	case recordkind.Transition:
		r.phase = rec.To
		if rec.To == govern.FailSafe {
			var td govern.TransitionData
			_ = json.Unmarshal(rec.Data, &td)
			r.reasons, r.cause = slices.Clone(rec.Reasons), td.Cause
		}
		if rec.To.Terminal() {
			r.pausedFor, r.decided = nil, nil
			r.ended = rec.Timestamp.Time
		}
	case recordkind.Paused:
		var p govern.PauseData
		_ = json.Unmarshal(rec.Data, &p)
		r.paused, r.pausedFor = true, p.Approvals
	case recordkind.Resumed:
		r.paused = false
	case recordkind.ApprovalDecided:
		var d govern.ApprovalDecision
		if json.Unmarshal(rec.Data, &d) == nil {
			r.decided[d.ApprovalID] = true
		}
	}
}

// run returns the summary as a Run, by the rules of Get.
func (r *runSummary) run(executing bool) *Run {
	out := &Run{RequestID: r.id, Agent: r.agent, Status: Running}
	if !r.started.IsZero() {
		t := r.started
		out.StartedAt = &t
	}
	if !r.ended.IsZero() && !executing {
		t := r.ended
		out.EndedAt = &t
	}
	switch {
	case r.phase == govern.Deliver && !executing:
		out.Status = Delivered
	case r.phase == govern.FailSafe:
		out.Status = FailSafe
		out.Reasons = slices.Clone(r.reasons)
		if r.cause != nil {
			c := *r.cause
			out.Error = &c
		}
	case r.paused && !executing && !r.phase.Terminal():
		out.Status = Paused
		for _, id := range r.pausedFor {
			if !r.decided[id] {
				out.PendingApprovals = append(out.PendingApprovals, id)
			}
		}
	}
	return out
}
