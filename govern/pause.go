package govern

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/agentry-dev/agentry/internal/recordkind"
)

// pendingApprovalsLocked returns the IDs of the run's undecided approval
// requests, oldest first.
func (r *Run) pendingApprovalsLocked() []string {
	var ps []*ApprovalRequest
	for _, a := range r.approvals {
		if a.Status == StatusPending {
			ps = append(ps, a)
		}
	}
	slices.SortFunc(ps, func(a, b *ApprovalRequest) int {
		if c := a.CreatedAt.Compare(b.CreatedAt.Time); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	out := make([]string, len(ps))
	for i, a := range ps {
		out[i] = a.ID
	}
	return out
}

// approvalRequests returns the run's approval requests (pending and decided).
func (r *Run) approvalRequests() []ApprovalRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ApprovalRequest, 0, len(r.approvals))
	for _, a := range r.approvals {
		out = append(out, cloneApproval(a))
	}
	slices.SortFunc(out, func(a, b ApprovalRequest) int { return a.CreatedAt.Compare(b.CreatedAt.Time) })
	return out
}

// PendingApprovals returns the IDs of the approval requests the run waits
// for.
func (r *Run) PendingApprovals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pendingApprovalsLocked()
}

func (r *Run) noteDecision(req ApprovalRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := cloneApproval(&req)
	r.approvals[req.ID] = &c
}

// Pause suspends the run durably until its pending approvals are decided:
// it journals the pending approval IDs and snapshot (whatever the resumer
// needs to continue — an agent's state) and releases the run from this
// process. After Decide, Governor.Attach returns the run (also in another
// process, after a restart) and Resume continues it. Pause needs at least
// one pending approval and no call running.
func (r *Run) Pause(ctx context.Context, snapshot json.RawMessage) error {
	r.mu.Lock()
	if err := r.usableLocked(); err != nil {
		r.mu.Unlock()
		return err
	}
	pending := r.pendingApprovalsLocked()
	switch {
	case len(pending) == 0:
		r.mu.Unlock()
		return fmt.Errorf("govern: nothing to wait for: the run has no pending approval")
	case r.inflight > 0:
		r.mu.Unlock()
		return fmt.Errorf("govern: %d calls still running", r.inflight)
	}
	rec := r.record(recordkind.Paused)
	rec.Reasons = []Reason{ApprovalRequired}
	if err := r.appendData(ctx, true, rec, PauseData{Approvals: pending, Snapshot: snapshot}); err != nil {
		r.mu.Unlock()
		return err
	}
	r.paused, r.detached, r.snapshot, r.pausedFor, r.outcomes = true, true, snapshot, pending, nil
	r.pausedAt = rec.Seq
	r.mu.Unlock()
	r.g.forget(r)
	return nil
}

// Resume continues a paused run (one returned by Governor.Attach) once
// every approval it waits for is decided, and returns the snapshot Pause
// recorded. With approvals still pending it returns an *Error with
// ApprovalRequired; a run that is closed, or being failed (Fail of a
// paused run, to cancel it), returns ErrRunClosed. A resume a crash interrupted may be paused again at
// the same pause by Recover, and Resume then returns the same snapshot:
// a resumer redoes the waiting calls with the same call IDs, so that
// Invoke replays those that committed instead of running them twice.
func (r *Run) Resume(ctx context.Context) (json.RawMessage, error) {
	// The run executes in this process from now on: it is the one Attach
	// returns here (unless another Run value of it got there first).
	g := r.g
	g.mu.Lock()
	cur, wasLive := g.live[r.requestID]
	if wasLive && cur != r {
		g.mu.Unlock()
		return nil, fmt.Errorf("govern: run %s is already executing in this process", r.requestID)
	}
	g.live[r.requestID] = r
	g.mu.Unlock()
	snap, err := r.resume(ctx)
	if err != nil && !wasLive {
		g.forget(r)
	}
	if err == nil {
		g.makeLive(r) // renew its lease
	}
	return snap, err
}

// resumedKey is the journal Unique key of a run's resume from the pause
// journaled at seq: a pause is resumed once, also by two processes (two
// replicas) trying at the same time — the journal refuses the second.
func resumedKey(requestID string, seq uint64) string {
	return "resumed:" + requestID + ":" + strconv.FormatUint(seq, 10)
}

func (r *Run) resume(ctx context.Context) (json.RawMessage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.phase.Terminal(), r.closing: // closing: a Fail is under way
		return nil, ErrRunClosed
	case r.detached:
		return nil, fmt.Errorf("govern: this Run was released by Pause; Attach the run again")
	case !r.paused:
		return nil, fmt.Errorf("govern: run is not paused")
	}
	if p := r.pendingApprovalsLocked(); len(p) > 0 {
		return nil, &Error{Reasons: []Reason{ApprovalRequired}, ApprovalID: p[0], Detail: fmt.Sprintf("%d approval(s) still pending", len(p))}
	}
	if err := r.claimLocked(ctx); err != nil {
		return nil, err
	}
	rec := r.record(recordkind.Resumed)
	rec.Unique = resumedKey(r.requestID, r.pausedAt)
	if err := r.appendData(ctx, false, rec, nil); err != nil {
		if errors.Is(err, ErrDuplicate) {
			return nil, fmt.Errorf("govern: run %s was resumed from this pause by another process: %w", r.requestID, err)
		}
		return nil, err
	}
	r.paused = false
	return r.snapshot, nil
}
