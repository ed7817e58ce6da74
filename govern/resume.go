package govern

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentry-dev/agentry/internal/recordkind"
)

// Recovering an interrupted resume.
//
// A run resumed after its approvals were decided redoes the calls that
// waited (ResumeAgent), then goes on. A crash in between leaves it open and
// not paused. Failing it safe would reverse approved work that was done, or
// drop approved work that had not started; so Recover looks at what the
// run recorded since it resumed. When that is only the redo — the waiting
// calls' intents, commits, failures and refusals, decisions, child runs —
// and at most the verification of a final answer, and no redone call is in
// doubt (an intent without its commit or failure), nothing was done that
// the resumer will not replay: Recover pauses the run again at the pause it
// resumed from (same approvals, same snapshot). The next resume replays
// what committed by call ID (Invoke returns the recorded result), replays
// what was refused or failed (recordedOutcome), runs what had not started,
// and verifies again. Anything else — a call beyond the redo, a new
// approval request, an in-doubt intent — means the run went further than
// its pause snapshot knows, and it fails safe as before, its writes rolled
// back.

// noteOutcomeLocked remembers a refused or failed call since the last
// pause, for a resume to replay (recordedOutcome), and a refusal for
// RefusedCalls.
func (r *Run) noteOutcomeLocked(callID string, e *Error) {
	if r.outcomes == nil {
		r.outcomes = map[string]*Error{}
	}
	r.outcomes[callID] = e
	if slices.Contains(e.Reasons, ApprovalRequired) || !refusal(e.Reasons) {
		return
	}
	r.forgetRefusalLocked(callID)
	r.refused = append(r.refused, &RefusedCall{Tool: e.Tool, CallID: callID, ApprovalID: e.ApprovalID, Reasons: slices.Clone(e.Reasons), Detail: e.Detail})
}

// refusal reports whether reasons are those of a refused call (an
// invocation_blocked record), not of a tool that failed.
func refusal(reasons []Reason) bool {
	for _, x := range reasons {
		switch x {
		case ToolFailed, ToolTimeout, Cancelled, TierViolation, EvidenceInvalid, InternalError:
			return false
		}
	}
	return true
}

// forgetRefusalLocked drops the refusal of a call that ran after all.
func (r *Run) forgetRefusalLocked(callID string) {
	r.refused = slices.DeleteFunc(r.refused, func(c *RefusedCall) bool { return c.CallID == callID })
}

// RefusedCalls returns the calls of the run the governor refused and that
// did not run since, oldest first: denied by an approver (with who denied)
// or by the policy, refused approval tokens, missing rollback actions.
// They come from the journal, so a run attached after a restart reports
// them too.
func (r *Run) RefusedCalls() []RefusedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RefusedCall, 0, len(r.refused))
	for _, c := range r.refused {
		rc := *c
		rc.Reasons = slices.Clone(c.Reasons)
		if a, ok := r.approvals[c.ApprovalID]; ok && a.Decision != nil && !a.Decision.Approved && slices.Contains(c.Reasons, ApprovalDenied) {
			rc.Approver = a.Decision.Approver
		}
		out = append(out, rc)
	}
	return out
}

// recordedOutcome returns the refusal or failure recorded for call callID
// since the run's last pause, if the call was refused (denied, invalid
// approval, policy) or failed when it was redone after that pause.
// ResumeAgent replays it instead of invoking the call again: a run whose
// resume was interrupted by a crash is resumed once more from the same
// pause, and what happened to its calls the first time stands.
func (r *Run) recordedOutcome(callID string) (*Error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.outcomes[callID]
	if !ok {
		return nil, false
	}
	c := *e
	return &c, true
}

// resumable reports whether an open, not paused run rebuilt from recs is
// a resume a crash interrupted that can be resumed again from its pause
// (see above), and if not, why.
func (r *Run) resumable(recs []Record) (bool, string) {
	resumed := -1
	for i, rec := range recs {
		switch rec.Kind {
		case recordkind.Resumed:
			resumed = i
		case recordkind.Paused:
			resumed = -1
		}
	}
	if resumed < 0 {
		return false, "not resumed from a pause"
	}
	redoApprovals := map[string]bool{}
	redoCalls := map[string]bool{}
	for _, id := range r.pausedFor {
		redoApprovals[id] = true
		if a, ok := r.approvals[id]; ok {
			redoCalls[a.CallID] = true
		}
	}
	open := map[string]bool{} // redone calls with an intent and no end yet
	for _, rec := range recs[resumed+1:] {
		switch rec.Kind {
		case recordkind.ApprovalDecided, recordkind.TokenUsed, recordkind.Child, recordkind.Verification:
		case recordkind.Transition:
			if rec.From != Execute || rec.To != Verify {
				return false, fmt.Sprintf("it moved %s→%s after resuming", rec.From, rec.To)
			}
		case recordkind.Intent:
			var in CallIntent
			if err := json.Unmarshal(rec.Data, &in); err != nil {
				return false, "unreadable intent"
			}
			if !redoCalls[rec.CallID] && !redoApprovals[in.ApprovalID] {
				return false, fmt.Sprintf("call %s is not one its pause waited for", rec.CallID)
			}
			open[rec.CallID] = true
		case recordkind.Commit, recordkind.Failed:
			if !open[rec.CallID] {
				return false, fmt.Sprintf("call %s is not one its pause waited for", rec.CallID)
			}
			delete(open, rec.CallID)
		case recordkind.Blocked:
			var in CallIntent
			if err := json.Unmarshal(rec.Data, &in); err != nil {
				return false, "unreadable refusal"
			}
			if !redoCalls[rec.CallID] && !redoApprovals[in.ApprovalID] {
				return false, fmt.Sprintf("call %s is not one its pause waited for", rec.CallID)
			}
		default:
			return false, fmt.Sprintf("it recorded %s after resuming", rec.Kind)
		}
	}
	for id := range open {
		return false, fmt.Sprintf("call %s is in doubt", id)
	}
	return true, ""
}

// repause journals the pause Recover makes of an interrupted resume.
func (r *Run) repause(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.record(recordkind.Paused)
	if err := r.appendData(ctx, true, rec, PauseData{Approvals: r.pausedFor, Snapshot: r.snapshot, Recovered: true}); err != nil {
		return err
	}
	r.paused, r.pausedAt = true, rec.Seq
	return nil
}
