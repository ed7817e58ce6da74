package govern

import "encoding/json"

// RunStart is the Data of a run_started record.
type RunStart struct {
	Identity   Identity `json:"identity"`
	TaskClass  string   `json:"task_class,omitempty"`
	MaxRepairs int      `json:"max_repairs"`
	// Resumer names what can continue the run after a pause (for an agent
	// run, the agent's name in the server).
	Resumer string `json:"resumer,omitempty"`
}

// CallIntent is the Data of an invocation_intent or invocation_blocked
// record: the call as gated.
type CallIntent struct {
	Tier         Tier            `json:"tier"`
	DeclaredTier string          `json:"declared_tier"` // "unknown" when the tool declared none
	Args         json.RawMessage `json:"args,omitempty"`
	ArgsHash     string          `json:"args_hash"`
	Rollback     *RollbackAction `json:"rollback_action,omitempty"`
	RollbackHash string          `json:"rollback_hash,omitempty"`
	Attempt      int             `json:"attempt"`
	Policy       *Decision       `json:"policy,omitempty"`
	ApprovalID   string          `json:"approval_id,omitempty"`
	Approver     string          `json:"approver,omitempty"`
	TokenID      string          `json:"jti,omitempty"`
	Detail       string          `json:"detail,omitempty"`
}

// CallOutcome is the Data of an invocation_commit or invocation_failed
// record.
type CallOutcome struct {
	ArgsHash string `json:"args_hash,omitempty"`
	// ResultHash is the hash of the tool's result; the result itself is
	// the payload of the first evidence object (tool_result), kept so
	// that a resumed run gets it without running the tool again.
	ResultHash string     `json:"result_hash,omitempty"`
	Evidence   []Evidence `json:"evidence,omitempty"`
	Error      string     `json:"error,omitempty"`
	DurationMS int64      `json:"duration_ms"`
}

// ApprovalRequest is a pending (or decided) request for approval of one
// tool call: the Data of an approval_requested record, and what
// Governor.Approvals lists.
type ApprovalRequest struct {
	ID            string          `json:"approval_id"`
	RequestID     string          `json:"request_id"`
	TraceID       string          `json:"trace_id"`
	ParentTraceID string          `json:"parent_trace_id,omitempty"`
	Tool          string          `json:"tool"`
	CallID        string          `json:"call_id"`
	Tier          Tier            `json:"tier"`
	Args          json.RawMessage `json:"args,omitempty"`
	ArgsHash      string          `json:"args_hash"`
	Rollback      *RollbackAction `json:"rollback_action,omitempty"`
	RollbackHash  string          `json:"rollback_hash,omitempty"`
	Attempt       int             `json:"attempt"`
	Requester     Identity        `json:"requester"`
	Reasons       []Reason        `json:"reasons"`
	Policy        *Decision       `json:"policy,omitempty"`
	CreatedAt     Time            `json:"created_at"`
	// Status is "pending", "approved" or "denied"; Decision is set once
	// decided.
	Status   string            `json:"status"`
	Decision *ApprovalDecision `json:"decision,omitempty"`
}

// Approval request statuses.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusDenied   = "denied"
)

// Binding returns the claims an approval token for r must carry.
func (r *ApprovalRequest) Binding() Binding {
	return Binding{
		ApprovalID: r.ID, RequestID: r.RequestID, TraceID: r.TraceID, Tool: r.Tool, Tier: r.Tier.String(),
		ArgsHash: r.ArgsHash, RollbackHash: r.RollbackHash, Attempt: r.Attempt,
	}
}

// ApprovalDecision is the Data of an approval_decided record.
type ApprovalDecision struct {
	ApprovalID string `json:"approval_id"`
	Approved   bool   `json:"approved"`
	Approver   string `json:"approver"`
	// Token is the verified approval token (approvals only); TokenID its
	// jti.
	Token     string `json:"token,omitempty"`
	TokenID   string `json:"jti,omitempty"`
	Reason    string `json:"reason,omitempty"`
	DecidedAt Time   `json:"decided_at"`
}

// tokenUse is the Data of an approval_token_used record.
type tokenUse struct {
	ApprovalID string `json:"approval_id"`
	TokenID    string `json:"jti"`
}

// PauseData is the Data of a run_paused record.
type PauseData struct {
	Approvals []string `json:"approvals"`
	// Snapshot is what the resumer needs to continue (for an agent, its
	// State in JSON form).
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
	// Recovered marks the pause Recover journals for a run whose resume a
	// crash interrupted: the run waits again at the pause it had resumed
	// from (the same approvals and snapshot), its calls since that pause
	// recorded, so that the resumer continues it without running anything
	// twice.
	Recovered bool `json:"recovered,omitempty"`
}

// rollbackData is the Data of the rollback_* records.
type rollbackData struct {
	Action *RollbackAction `json:"rollback_action"`
	Error  string          `json:"error,omitempty"`
}

// childData is the Data of a child_finished record.
type childData struct {
	RequestID string   `json:"request_id"`
	TraceID   string   `json:"trace_id"`
	Phase     Phase    `json:"state"`
	Reasons   []Reason `json:"reasons,omitempty"`
}

// TransitionData is the Data of a transition record, when it has any.
type TransitionData struct {
	Repairs    int      `json:"repairs,omitempty"`
	OutputHash string   `json:"output_hash,omitempty"`
	ReportIDs  []string `json:"report_ids,omitempty"`
	Detail     string   `json:"detail,omitempty"`
	// Cause is what made a run fail safe, on its fail_safe transition,
	// when it came from outside the governor (a model or provider).
	Cause *Cause `json:"cause,omitempty"`
}

// RefusedCall is a call the governor refused and that has not run since:
// denied by an approver or by the policy, an approval token refused, no
// rollback action, and the like (Run.RefusedCalls). A call waiting for
// an approval is not refused.
type RefusedCall struct {
	Tool       string   `json:"tool"`
	CallID     string   `json:"call_id"`
	ApprovalID string   `json:"approval_id,omitempty"`
	Reasons    []Reason `json:"reasons"`
	Detail     string   `json:"detail,omitempty"`
	// Approver is who denied the call (APPROVAL_DENIED).
	Approver string `json:"approver,omitempty"`
}

// Cause is what made a run fail safe when it came from outside the
// governor — a model or its provider — in words fit for a peer: the
// provider's error code and message (an llm.Error's Code and Message),
// never internal error text.
type Cause struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Provider string `json:"provider,omitempty"`
	// Status is the provider's HTTP status, when it answered with one.
	Status int `json:"status,omitempty"`
}
