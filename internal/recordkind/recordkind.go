// Package recordkind names the kinds of the governance journal's records
// (govern.Record.Kind). The journal is the governor's own persistence
// format, read back by the governor, the runs service and the checks of
// the tests, so its vocabulary stays inside the module; a Go user sees a
// run's history as runs events.
package recordkind

// The kinds of govern.Record. docs/governance.md describes each one's Data.
const (
	// RunStarted opens a run (phase intake); Data is govern.RunStart.
	RunStarted = "run_started"
	// Transition moves a run From → To.
	Transition = "transition"
	// Intent is written (synced) before a tool call runs; Data is
	// govern.CallIntent.
	Intent = "invocation_intent"
	// Commit is written after a tool call succeeded, before its result
	// is returned; Data is govern.CallOutcome.
	Commit = "invocation_commit"
	// Failed is written when a tool call failed after it started;
	// Data is govern.CallOutcome.
	Failed = "invocation_failed"
	// Blocked records a call refused before it ran; Data is
	// govern.CallIntent.
	Blocked = "invocation_blocked"
	// Evidence records an evidence object the run accepted; Data is
	// a govern.Evidence.
	Evidence = "evidence"
	// Verification records a verification report; Data is a govern.Report.
	Verification = "verification"
	// ApprovalRequested records a pending approval request; Data is
	// govern.ApprovalRequest.
	ApprovalRequested = "approval_requested"
	// ApprovalDecided records an approval decision; Data is
	// govern.ApprovalDecision.
	ApprovalDecided = "approval_decided"
	// TokenUsed records that an approval token was used, journaled
	// with the approval_decided record it backs; its unique key is the
	// token's jti, so a token is used once. Data is TokenUse.
	TokenUsed = "approval_token_used"
	// Paused records that a run waits for approvals; Data is
	// govern.PauseData.
	Paused = "run_paused"
	// Resumed records that a paused run continues.
	Resumed = "run_resumed"
	// RollbackStarted is written (synced) before a rollback action
	// runs; RollbackDone and RollbackFailed after. Data is
	// RollbackData.
	RollbackStarted = "rollback_started"
	RollbackDone    = "rollback_done"
	RollbackFailed  = "rollback_failed"
	// Child records that a child run (its trace's parent is this run)
	// ended; Data is ChildData.
	Child = "child_finished"
)
