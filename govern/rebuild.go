package govern

import (
	"encoding/json"
	"fmt"

	"github.com/agentry-dev/agentry/internal/recordkind"
)

// rebuild reconstructs a run from its journal records, in order.
func (g *Governor) rebuild(recs []Record) (*Run, error) {
	if len(recs) == 0 || recs[0].Kind != recordkind.RunStarted {
		return nil, ErrUnknownRun
	}
	first := recs[0]
	var st RunStart
	if err := json.Unmarshal(first.Data, &st); err != nil {
		return nil, fmt.Errorf("govern: run %s: run_started record: %w", first.RequestID, err)
	}
	class := g.classes[st.TaskClass] // nil when the class is gone: the run can be failed, not verified
	r := g.newRun(first.RequestID, first.TraceID, first.ParentTraceID, st.Identity, class, st.MaxRepairs)
	r.className, r.resumer, r.startSpan = st.TaskClass, st.Resumer, first.SpanID
	for _, rec := range recs[1:] {
		if err := r.apply(rec); err != nil {
			return nil, fmt.Errorf("govern: run %s: record %d (%s): %w", r.requestID, rec.Seq, rec.Kind, err)
		}
	}
	return r, nil
}

// apply replays one record into the run's state.
func (r *Run) apply(rec Record) error {
	switch rec.Kind {
	case recordkind.Transition:
		r.phase = rec.To
		var d TransitionData
		if len(rec.Data) > 0 {
			if err := json.Unmarshal(rec.Data, &d); err != nil {
				return err
			}
		}
		if rec.From == Verify && (rec.To == Plan || rec.To == Execute) {
			r.repairs = d.Repairs
			r.supersedeLocked()
		}
		if rec.To == FailSafe {
			r.reasons, r.cause = append([]Reason(nil), rec.Reasons...), d.Cause
		}
	case recordkind.Intent:
		var in CallIntent
		if err := json.Unmarshal(rec.Data, &in); err != nil {
			return err
		}
		r.calls[rec.CallID] = &callState{tool: rec.Tool, argsHash: in.ArgsHash, status: recordkind.Intent, tier: in.Tier}
		if in.Tier > ReadOnly {
			r.wrote = true
		}
		if in.Rollback != nil {
			r.writes = append(r.writes, &writeState{seq: rec.Seq, callID: rec.CallID, tool: rec.Tool, action: in.Rollback})
		}
		if in.ApprovalID != "" {
			if r.consumed == nil {
				r.consumed = map[string]bool{}
			}
			r.consumed[in.ApprovalID] = true
		}
	case recordkind.Blocked:
		var in CallIntent
		if err := json.Unmarshal(rec.Data, &in); err != nil {
			return err
		}
		r.noteOutcomeLocked(rec.CallID, &Error{Reasons: rec.Reasons, Tool: rec.Tool, CallID: rec.CallID, ApprovalID: in.ApprovalID, Detail: in.Detail})
	case recordkind.Commit, recordkind.Failed:
		var out CallOutcome
		if err := json.Unmarshal(rec.Data, &out); err != nil {
			return err
		}
		if rec.Kind == recordkind.Failed {
			r.noteOutcomeLocked(rec.CallID, &Error{Reasons: rec.Reasons, Tool: rec.Tool, CallID: rec.CallID, Detail: out.Error})
		} else {
			delete(r.outcomes, rec.CallID)
			r.forgetRefusalLocked(rec.CallID)
		}
		cs, ok := r.calls[rec.CallID]
		if !ok { // a read-only call: no intent record
			cs = &callState{tool: rec.Tool, tier: ReadOnly, argsHash: out.ArgsHash}
			r.calls[rec.CallID] = cs
		}
		cs.status = rec.Kind
		if rec.Kind == recordkind.Commit {
			cs.evidence = out.Evidence
			if len(out.Evidence) > 0 && out.Evidence[0].Hash == out.ResultHash {
				cs.result = out.Evidence[0].Payload
			}
			r.evidence = append(r.evidence, out.Evidence...)
		}
	case recordkind.Evidence:
		var ev Evidence
		if err := json.Unmarshal(rec.Data, &ev); err != nil {
			return err
		}
		r.evidence = append(r.evidence, ev)
	case recordkind.Verification:
		var rep Report
		if err := json.Unmarshal(rec.Data, &rep); err != nil {
			return err
		}
		r.reports = append(r.reports, rep)
	case recordkind.ApprovalRequested:
		var a ApprovalRequest
		if err := json.Unmarshal(rec.Data, &a); err != nil {
			return err
		}
		a.Status = StatusPending
		r.approvals[a.ID] = &a
	case recordkind.ApprovalDecided:
		var d ApprovalDecision
		if err := json.Unmarshal(rec.Data, &d); err != nil {
			return err
		}
		if a, ok := r.approvals[d.ApprovalID]; ok && a.Status == StatusPending {
			a.Decision = &d
			a.Status = StatusDenied
			if d.Approved {
				a.Status = StatusApproved
			}
		}
	case recordkind.Paused:
		var p PauseData
		if err := json.Unmarshal(rec.Data, &p); err != nil {
			return err
		}
		r.paused, r.snapshot, r.pausedFor, r.pausedAt = true, p.Snapshot, p.Approvals, rec.Seq
		if !p.Recovered {
			r.outcomes = nil // the calls of this pause have not run yet
		}
	case recordkind.Resumed:
		r.paused = false
	case recordkind.RollbackDone:
		for _, w := range r.writes {
			if w.callID == rec.CallID && !w.done {
				w.done = true
				break
			}
		}
	case recordkind.Child:
		var c childData
		if err := json.Unmarshal(rec.Data, &c); err != nil {
			return err
		}
		r.children[c.RequestID] = &childState{requestID: c.RequestID, traceID: c.TraceID, phase: c.Phase, reasons: c.Reasons}
	}
	return nil
}
