package govern

import (
	"slices"

	"github.com/agentry-dev/agentry/internal/ids"
)

// The metadata keys agentry writes into envelopes (DESIGN §5: what the
// schemas leave open travels in metadata under "uaicp.*").
const (
	MetaReasons          = "uaicp.reasons"           // []Reason: why the run failed safe, or why a call was refused
	MetaTaskClass        = "uaicp.task_class"        // the run's task class
	MetaRepairs          = "uaicp.repairs"           // repairs made
	MetaActorKind        = "uaicp.actor_kind"        // system | agent | human
	MetaTool             = "uaicp.tool"              // the tool of a call envelope
	MetaCallID           = "uaicp.call_id"           // the call
	MetaRiskTier         = "uaicp.risk_tier"         // the call's effective tier
	MetaDeclaredTier     = "uaicp.declared_tier"     // the tier the tool declared ("unknown" when none)
	MetaPolicyDecision   = "uaicp.policy_decision"   // allow | deny | needs_review
	MetaPolicyRule       = "uaicp.policy_rule"       // the rule that decided
	MetaApprovalID       = "uaicp.approval_id"       // the approval request of a call awaiting approval
	MetaPendingApprovals = "uaicp.pending_approvals" // approval IDs a paused run waits for
	MetaUnverified       = "uaicp.unverified"        // true on streamed chunks before deliver
	MetaContent          = "uaicp.content"           // a streamed chunk's content
	MetaReportIDs        = "uaicp.report_ids"        // the reports a deliver rests on
)

// Envelope returns the run's envelope now: state the current phase,
// outcome pending until terminal, then success (deliver) or uncertain
// (fail_safe) with the reason codes.
func (r *Run) Envelope() Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.envelopeLocked(false)
}

func (r *Run) envelopeLocked(final bool) Envelope {
	e := Envelope{
		UAICPVersion: Version, RequestID: r.requestID, TraceID: r.traceID, ParentTraceID: r.parentTraceID,
		State: r.phase, Timestamp: Time{ids.Now()}, Identity: r.identity, Outcome: Pending,
		Metadata: map[string]any{MetaActorKind: string(ActorAgent), MetaRepairs: r.repairs},
	}
	if r.className != "" {
		e.Metadata[MetaTaskClass] = r.className
	}
	switch r.phase {
	case Deliver:
		e.Outcome = Success
		if r.verdict != nil {
			var ids []string
			for _, rep := range r.verdict.Reports {
				ids = append(ids, rep.ReportID)
			}
			e.Metadata[MetaReportIDs] = ids
		}
	case FailSafe:
		e.Outcome = Uncertain
		e.Metadata[MetaReasons] = slices.Clone(r.reasons)
	}
	if p := r.pendingApprovalsLocked(); len(p) > 0 && !r.phase.Terminal() {
		// A closed run waits for nothing: its approvals can no longer
		// be decided (a paused run that was failed, say).
		e.Metadata[MetaPendingApprovals] = p
	}
	if final && r.chunks > 0 {
		e.Streaming = &Streaming{ChunkID: ids.New(), IsFinal: true, StreamIndex: r.chunks}
		r.chunks++
	}
	return e
}

// Chunk returns an envelope carrying a partial, unverified chunk of
// output for UX streaming (§4.2): outcome pending, metadata
// "uaicp.unverified": true and the content under "uaicp.content",
// streaming with a new chunk_id and the next stream_index (0, 1, …). Only
// read-only chunks may be streamed before deliver: once the run has made
// a call above read_only, Chunk refuses (ok false) and the caller holds
// the content back until Deliver. The one is_final chunk is the envelope
// Deliver or Fail returns.
func (r *Run) Chunk(content any) (env Envelope, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phase.Terminal() || r.wrote {
		return Envelope{}, false
	}
	env = r.envelopeLocked(false)
	env.Streaming = &Streaming{ChunkID: ids.New(), StreamIndex: r.chunks}
	env.Metadata[MetaUnverified] = true
	env.Metadata[MetaContent] = content
	r.chunks++
	return env, true
}
