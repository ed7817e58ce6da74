package govern

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// Run is one governed execution (one request). Its methods are safe for
// concurrent use: tool calls of one round may be invoked in parallel,
// while phase transitions are serialized (§4.2).
type Run struct {
	g             *Governor
	requestID     string
	traceID       string
	parentTraceID string
	identity      Identity
	class         *TaskClass
	className     string
	maxRepairs    int
	parent        *Run
	resumer       string
	startSpan     string       // the span its run_started record was written in (Record.SpanID)
	span          atomic.Value // trace.Span: the run's own (invoke_agent) span, for its phase events
	actor         Actor        // who the run's own records are attributed to; zero: the agent

	mu        sync.Mutex
	idle      *sync.Cond // broadcast when inflight drops or the run closes
	epoch     uint64     // the epoch of the run's lease held here (Options.Lease); 0: none
	lost      bool       // the lease was lost: another process continues the run
	renewed   time.Time  // when the lease was last claimed or renewed (by this process's clock)
	phase     Phase
	closing   bool
	detached  bool // paused and released by this process: Attach again
	repairs   int
	inflight  int
	evidence  []Evidence
	reports   []Report
	verdict   *Verdict
	calls     map[string]*callState
	writes    []*writeState
	approvals map[string]*ApprovalRequest
	consumed  map[string]bool // approval IDs used by a call
	children  map[string]*childState
	reasons   []Reason
	cause     *Cause         // what made the run fail safe, when it came from outside (a model)
	refused   []*RefusedCall // calls refused and not run since, in order (RefusedCalls)
	paused    bool
	pausedAt  uint64 // the journal seq of the last pause: one resume each (resumedKey)
	snapshot  json.RawMessage
	pausedFor []string          // the approvals the last pause waited for
	outcomes  map[string]*Error // refused or failed calls since the last pause, by call ID
	wrote     bool              // a call above read_only ran: no more unverified chunks
	chunks    int
}

type callState struct {
	tool     string
	argsHash string
	status   RecordKind
	result   json.RawMessage
	tier     Tier
	evidence []Evidence
}

type writeState struct {
	seq    uint64
	callID string
	tool   string
	action *RollbackAction
	done   bool
}

type childState struct {
	requestID string
	traceID   string
	phase     Phase
	reasons   []Reason
}

// RequestID returns the run's request ID.
func (r *Run) RequestID() string { return r.requestID }

// TraceID returns the run's W3C trace ID.
func (r *Run) TraceID() string { return r.traceID }

// Resumer returns what the run said can resume it.
func (r *Run) Resumer() string { return r.resumer }

// Phase returns the current phase.
func (r *Run) Phase() Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase
}

// Cause returns what made the run fail safe when it came from outside
// the governor — a model or provider failure — or nil.
func (r *Run) Cause() *Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cause == nil {
		return nil
	}
	c := *r.cause
	return &c
}

// Reasons returns the reason codes the run failed with.
func (r *Run) Reasons() []Reason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reasons)
}

// Paused reports whether the run waits for approvals.
func (r *Run) Paused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused
}

func (r *Run) record(kind RecordKind) *Record {
	a := r.actor
	if a.ID == "" {
		a = Actor{ID: r.identity.AgentID, Kind: ActorAgent}
	}
	return &Record{Kind: kind, RequestID: r.requestID, TraceID: r.traceID, ParentTraceID: r.parentTraceID,
		Node: r.g.opts.Node, Epoch: r.epoch, Actor: a, Timestamp: Time{ids.Now()}, Outcome: Pending}
}

// appendData journals rec with data as its Data, after the records
// before (already complete), in one Append. Appends are never cancelled
// half-way by the caller's context: what is being recorded has happened
// (or is about to).
func (r *Run) appendData(ctx context.Context, sync bool, rec *Record, data any, before ...*Record) error {
	if data != nil {
		b, err := marshalData(data)
		if err != nil {
			return fmt.Errorf("govern: journal record data: %w", err)
		}
		rec.Data = b
		if held, ok := holdOwnCanon(b, data); ok {
			defer held.release()
		}
	}
	traceRecord(ctx, rec, data, r.runSpan())
	if err := r.g.j.Append(context.WithoutCancel(ctx), sync, append(before, rec)...); err != nil {
		if errors.Is(err, ErrDuplicate) {
			return err
		}
		if errors.Is(err, ErrLeased) {
			go r.fenced() // r.mu may be held here
		}
		return &Error{Reasons: []Reason{InternalError}, Detail: "journal append failed: " + err.Error(), Err: err}
	}
	return nil
}

// usableLocked reports why the run cannot act now, or nil.
func (r *Run) usableLocked() error {
	switch {
	case r.phase.Terminal():
		return ErrRunClosed
	case r.lost:
		return fmt.Errorf("govern: run %s: %w", r.requestID, ErrLeased)
	case r.detached:
		return errors.New("govern: run is paused and released; Attach it to resume")
	case r.closing:
		return ErrRunClosed
	case r.paused:
		return &Error{Reasons: []Reason{ApprovalRequired}, Detail: "run is paused waiting for approvals"}
	}
	return nil
}

// transitionLocked journals and takes the edge r.phase → to.
func (r *Run) transitionLocked(ctx context.Context, to Phase, sync bool, reasons []Reason, data *TransitionData) error {
	if !canTransition(r.phase, to) {
		return &transitionError{From: r.phase, To: to}
	}
	rec := r.record(recordkind.Transition)
	rec.From, rec.To, rec.Reasons = r.phase, to, reasons
	switch to {
	case Deliver:
		rec.Outcome = Success
	case FailSafe:
		rec.Outcome = Uncertain
	}
	if to.Terminal() {
		// A run ends once, also when two processes (replicas) both hold
		// it: the journal refuses a second end (ErrDuplicate).
		rec.Unique = "ended:" + r.requestID
	}
	var d any
	if data != nil {
		d = data
	}
	if err := r.appendData(ctx, sync, rec, d); err != nil {
		return err
	}
	r.phase = to
	return nil
}

// advanceLocked walks the forward chain up to target (plan or execute or
// verify), journaling each edge.
func (r *Run) advanceLocked(ctx context.Context, target Phase) error {
	order := map[Phase]int{Intake: 0, Plan: 1, Execute: 2, Verify: 3}
	t, ok := order[target]
	if !ok {
		return &transitionError{From: r.phase, To: target}
	}
	for {
		cur, ok := order[r.phase]
		if !ok || cur > t {
			return &transitionError{From: r.phase, To: target}
		}
		if cur == t {
			return nil
		}
		next := []Phase{Plan, Execute, Verify}[cur]
		if err := r.transitionLocked(ctx, next, false, nil, nil); err != nil {
			return err
		}
	}
}

// Advance moves the run forward to plan or execute (taking the edges in
// between). Invoke and Verify advance by themselves; orchestrators call
// Advance to record the phase they are in.
func (r *Run) Advance(ctx context.Context, to Phase) error {
	if to != Plan && to != Execute {
		return fmt.Errorf("govern: Advance goes to plan or execute; use Verify, Deliver, Repair or Fail for %s: %w", to, ErrIllegalTransition)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usableLocked(); err != nil {
		return err
	}
	return r.advanceLocked(ctx, to)
}

// AddEvidence adds an evidence object to the run (evidence not yielded by
// a tool call, such as citations). The governor sets evidence_id (when
// empty), request_id, trace_id, parent_trace_id and collected_at, and
// computes hash; evidence that names another request or trace, or carries
// a hash that does not match its payload, is refused with EvidenceInvalid.
func (r *Run) AddEvidence(ctx context.Context, ev Evidence) (Evidence, error) {
	ev, err := r.sealEvidence(ev, "")
	if err != nil {
		return Evidence{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usableLocked(); err != nil {
		return Evidence{}, err
	}
	rec := r.record(recordkind.Evidence)
	rec.Outcome = Success
	if err := r.appendData(ctx, false, rec, ev); err != nil {
		return Evidence{}, err
	}
	r.evidence = append(r.evidence, ev)
	return ev.Clone(), nil
}

// sealEvidence validates a copy of ev and fills what the governor owns.
func (r *Run) sealEvidence(ev Evidence, defaultSource string) (Evidence, error) {
	return r.sealOwnEvidence(ev.Clone(), defaultSource)
}

// sealOwnEvidence is sealEvidence of evidence nothing else holds (its
// Payload and Extra made for it), which it need not copy.
func (r *Run) sealOwnEvidence(ev Evidence, defaultSource string) (Evidence, error) {
	if ev.EvidenceType == "" {
		ev.EvidenceType = CustomEvidence
	}
	if !ev.EvidenceType.Valid() {
		return Evidence{}, refuse(fmt.Sprintf("evidence type %q is not one of the schema's", ev.EvidenceType), EvidenceInvalid)
	}
	if ev.Source == "" {
		ev.Source = defaultSource
	}
	if ev.Source == "" {
		return Evidence{}, refuse("evidence has no source", EvidenceInvalid)
	}
	if ev.RequestID != "" && ev.RequestID != r.requestID {
		return Evidence{}, refuse(fmt.Sprintf("evidence belongs to request %s, not %s", ev.RequestID, r.requestID), EvidenceInvalid)
	}
	if ev.TraceID != "" && ev.TraceID != r.traceID {
		return Evidence{}, refuse(fmt.Sprintf("evidence belongs to trace %s, not %s", ev.TraceID, r.traceID), EvidenceInvalid)
	}
	if ev.ParentTraceID != "" && ev.ParentTraceID != r.parentTraceID {
		return Evidence{}, refuse(fmt.Sprintf("evidence names parent trace %s, not %s", ev.ParentTraceID, r.parentTraceID), EvidenceInvalid)
	}
	h, err := PayloadHash(ev.Payload)
	if err != nil {
		return Evidence{}, &Error{Reasons: []Reason{EvidenceInvalid}, Detail: err.Error(), Err: err}
	}
	if ev.Hash != "" && ev.Hash != h {
		return Evidence{}, refuse("evidence hash does not match its payload (tampered)", EvidenceInvalid)
	}
	if len(ev.Payload) == 0 {
		ev.Payload = json.RawMessage("null")
	}
	ev.Hash = h
	if ev.EvidenceID == "" {
		ev.EvidenceID = ids.New()
	}
	ev.RequestID, ev.TraceID, ev.ParentTraceID = r.requestID, r.traceID, r.parentTraceID
	if ev.CollectedAt.IsZero() {
		ev.CollectedAt = Time{ids.Now()}
	}
	return ev, nil
}

// Verdict is the result of Verify.
type Verdict struct {
	// Passed is true when every required invariant holds.
	Passed bool
	// Reasons say why not.
	Reasons []Reason
	// Reports are this verification's reports: the governor's own
	// (evidence gating, children) first, then the required verifiers'.
	Reports []Report

	outputHash string
}

// Verify moves the run to verify (advancing through plan and execute if
// needed) and evaluates every invariant of its task class against the
// candidate output: the required evidence types present with valid
// evidence (§5.1), every required verifier passing (§5.2), every child
// run resolved and not failed (§4.3), no call awaiting approval. The
// reports are journaled. On a failed verdict the caller repairs (Repair)
// or fails (Fail); Deliver needs a passing one for the same output.
func (r *Run) Verify(ctx context.Context, output any) (*Verdict, error) {
	out, outHash, err := encodeOutput(output)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if err := r.usableLocked(); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if r.inflight > 0 {
		r.mu.Unlock()
		return nil, fmt.Errorf("govern: %d tool calls still running: verify after they finish: %w", r.inflight, ErrIllegalTransition)
	}
	// A run rebuilt in verify without a verdict — its resume was
	// interrupted while it verified — is verified again in place.
	if r.phase != Verify || r.verdict != nil {
		if err := r.advanceLocked(ctx, Execute); err != nil {
			r.mu.Unlock()
			return nil, err
		}
		if err := r.transitionLocked(ctx, Verify, false, nil, nil); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	r.closing = true // nothing else may happen while verifiers run
	valid, known := r.validEvidenceLocked()
	gate := r.gateReportLocked(valid)
	pending := r.pendingApprovalsLocked()
	r.mu.Unlock()

	v := &Verdict{Passed: true, outputHash: outHash}
	v.Reports = append(v.Reports, gate.report)
	if !gate.report.Passed() {
		v.Passed = false
		v.Reasons = append(v.Reasons, gate.reasons...)
	}
	if len(pending) > 0 {
		v.Passed = false
		v.Reasons = append(v.Reasons, ApprovalRequired)
	}
	in := VerifyInput{RequestID: r.requestID, TraceID: r.traceID, TaskClass: r.className, Output: out}
	var verifiers []Verifier
	if r.class != nil {
		for _, id := range r.class.RequiredVerifiers {
			verifiers = append(verifiers, r.g.verifiers[id])
		}
	}
	reports := make([]Report, len(verifiers))
	passed := make([]bool, len(verifiers))
	var wg sync.WaitGroup
	for i, ver := range verifiers {
		if ver == nil { // unreachable: New checks; fail closed anyway
			reports[i] = Report{ReportID: ids.New(), RequestID: r.requestID, VerifierID: r.class.RequiredVerifiers[i], Status: ReportFail,
				Checks: []Check{{CheckID: string(VerifierError), Result: CheckFail, Details: "verifier is not registered"}}, GeneratedAt: Time{ids.Now()}}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			vin := in
			vin.Evidence = make([]Evidence, len(valid))
			for j, e := range valid {
				vin.Evidence[j] = e.Clone()
			}
			reports[i], passed[i] = runVerifier(ctx, ver, vin, r.g.opts.VerifierTimeout, known)
		}()
	}
	wg.Wait()
	for i := range reports {
		v.Reports = append(v.Reports, reports[i])
		if !passed[i] {
			v.Passed = false
			if isVerifierError(reports[i]) {
				v.Reasons = appendReason(v.Reasons, VerifierError)
			}
			v.Reasons = appendReason(v.Reasons, VerificationFailed)
		}
	}
	if !v.Passed && len(v.Reasons) == 0 {
		v.Reasons = []Reason{VerificationFailed}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.closing = false
	r.idle.Broadcast()
	recs := make([]*Record, len(v.Reports))
	for i := range v.Reports {
		rec := r.record(recordkind.Verification)
		rec.Outcome = Success
		if !v.Reports[i].Passed() {
			rec.Outcome = Failure
		}
		b, err := json.Marshal(v.Reports[i])
		if err != nil {
			return nil, err
		}
		rec.Data = b
		recs[i] = rec
	}
	if err := r.g.j.Append(context.WithoutCancel(ctx), false, recs...); err != nil {
		return nil, &Error{Reasons: []Reason{InternalError}, Detail: "journal append failed: " + err.Error(), Err: err}
	}
	r.reports = append(r.reports, v.Reports...)
	vc := *v
	r.verdict = &vc
	return v, nil
}

func isVerifierError(rep Report) bool {
	for _, c := range rep.Checks {
		if c.CheckID == string(VerifierError) && c.Result == CheckFail {
			return true
		}
	}
	return false
}

func appendReason(rs []Reason, r Reason) []Reason {
	if slices.Contains(rs, r) {
		return rs
	}
	return append(rs, r)
}

// validEvidenceLocked returns the evidence whose hash still matches and
// that belongs to this run, and the set of their IDs.
func (r *Run) validEvidenceLocked() ([]Evidence, map[string]bool) {
	var out []Evidence
	known := map[string]bool{}
	for _, e := range r.evidence {
		if e.RequestID != r.requestID || e.TraceID != r.traceID || !e.CheckHash() {
			continue
		}
		out = append(out, e)
		known[e.EvidenceID] = true
	}
	return out, known
}

type gate struct {
	report  Report
	reasons []Reason
}

// gateReportLocked is the governor's own report: one EVIDENCE_GATING check
// per required evidence type, and a CHILDREN check.
func (r *Run) gateReportLocked(valid []Evidence) gate {
	var g gate
	rep := Report{ReportID: ids.New(), RequestID: r.requestID, VerifierID: "uaicp.governor", GeneratedAt: Time{ids.Now()}, Status: ReportPass}
	have := map[EvidenceType][]string{}
	for _, e := range valid {
		have[e.EvidenceType] = append(have[e.EvidenceType], e.EvidenceID)
	}
	invalid := len(valid) < len(r.evidence)
	if r.class != nil {
		for _, t := range r.class.RequiredEvidence {
			c := Check{CheckID: "EVIDENCE_GATING:" + string(t), Result: CheckPass, Details: fmt.Sprintf("%d valid %s evidence object(s)", len(have[t]), t)}
			if len(have[t]) == 0 {
				c.Result, c.Details = CheckFail, fmt.Sprintf("no valid %s evidence", t)
				g.reasons = appendReason(g.reasons, EvidenceMissing)
				if invalid {
					g.reasons = appendReason(g.reasons, EvidenceInvalid)
				}
			}
			rep.Checks = append(rep.Checks, c)
			rep.EvidenceIDs = append(rep.EvidenceIDs, have[t]...)
		}
	}
	children := Check{CheckID: "CHILDREN", Result: CheckPass, Details: fmt.Sprintf("%d child run(s) resolved", len(r.children))}
	for _, id := range slices.Sorted(maps.Keys(r.children)) {
		c := r.children[id]
		switch {
		case c.phase == FailSafe:
			children.Result, children.Details = CheckFail, fmt.Sprintf("child run %s ended in fail_safe", c.requestID)
			g.reasons = appendReason(g.reasons, ChildFailed)
		case !c.phase.Terminal():
			children.Result, children.Details = CheckFail, fmt.Sprintf("child run %s is unresolved (%s)", c.requestID, c.phase)
			g.reasons = appendReason(g.reasons, ChildFailed)
		}
		if children.Result == CheckFail {
			break
		}
	}
	rep.Checks = append(rep.Checks, children)
	for _, c := range rep.Checks {
		if c.Result == CheckFail {
			rep.Status = ReportFail
		}
	}
	g.report = rep
	return g
}

func encodeOutput(output any) (json.RawMessage, string, error) {
	var b []byte
	switch v := output.(type) {
	case json.RawMessage:
		b = v
	default:
		var err error
		if b, err = json.Marshal(output); err != nil {
			return nil, "", fmt.Errorf("govern: output is not JSON-encodable: %w", err)
		}
	}
	h, err := PayloadHash(b)
	if err != nil {
		return nil, "", err
	}
	return b, h, nil
}

// Deliver commits the run: it needs the phase verify with a passing
// verdict for this very output, no call awaiting approval and every child
// resolved without failure. The deliver transition is journaled durably
// before Deliver returns the success envelope; only then may the output
// be handed out.
func (r *Run) Deliver(ctx context.Context, output any) (*Envelope, error) {
	_, h, err := encodeOutput(output)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if err := r.usableLocked(); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if r.phase != Verify || r.verdict == nil || !r.verdict.Passed {
		r.mu.Unlock()
		return nil, ErrNotVerified
	}
	if r.verdict.outputHash != h {
		r.mu.Unlock()
		return nil, fmt.Errorf("govern: the output differs from the one verified: %w", ErrNotVerified)
	}
	valid, _ := r.validEvidenceLocked()
	if g := r.gateReportLocked(valid); !g.report.Passed() || len(r.pendingApprovalsLocked()) > 0 {
		r.mu.Unlock()
		return nil, fmt.Errorf("govern: invariants changed since verification: %w", ErrNotVerified)
	}
	var reportIDs []string
	for _, rep := range r.verdict.Reports {
		reportIDs = append(reportIDs, rep.ReportID)
	}
	if err := r.transitionLocked(ctx, Deliver, true, nil, &TransitionData{OutputHash: h, ReportIDs: reportIDs, Repairs: r.repairs}); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	env := r.envelopeLocked(true)
	r.idle.Broadcast()
	r.mu.Unlock()
	r.finished(ctx)
	return &env, nil
}

// Repair takes a repair edge (§4.1 bounded repair loop): from verify after
// a failed verdict back to plan or execute, counting one repair; the
// attempt number that approval tokens bind to is the repair count. When
// the budget is spent, the run fails safe with VerificationFailed and
// RepairsExhausted, and Repair returns that as an *Error.
func (r *Run) Repair(ctx context.Context, to Phase, detail string) error {
	if to != Plan && to != Execute {
		return &transitionError{From: Verify, To: to}
	}
	r.mu.Lock()
	if err := r.usableLocked(); err != nil {
		r.mu.Unlock()
		return err
	}
	if r.phase != Verify || r.verdict == nil {
		from := r.phase
		r.mu.Unlock()
		return &transitionError{From: from, To: to}
	}
	if r.verdict.Passed {
		r.mu.Unlock()
		// Not an edge the machine takes (§4.1 repairs a failed
		// invariant): report it as the illegal transition it is.
		return fmt.Errorf("govern: verification passed; nothing to repair: %w", ErrIllegalTransition)
	}
	if r.repairs >= r.maxRepairs {
		reasons := append(slices.Clone(r.verdict.Reasons), RepairsExhausted)
		r.mu.Unlock()
		env, err := r.Fail(ctx, fmt.Sprintf("verification still failing after %d repair(s)", r.maxRepairs), reasons...)
		if err != nil {
			return err
		}
		return &Error{Reasons: reasonsOf(env), Detail: "repair budget exhausted", Envelope: env}
	}
	reasons := slices.Clone(r.verdict.Reasons)
	if err := r.transitionLocked(ctx, to, false, reasons, &TransitionData{Repairs: r.repairs + 1, Detail: detail}); err != nil {
		r.mu.Unlock()
		return err
	}
	r.repairs++
	r.verdict = nil
	r.supersedeLocked()
	r.mu.Unlock()
	return nil
}

// supersedeLocked drops the approval requests of earlier attempts still
// pending: their binding names an attempt that is over, so no token can
// make them usable, and left pending they would block Verify and Deliver
// for good. The index (Governor.Approvals, Decide) drops them on the same
// repair transition.
func (r *Run) supersedeLocked() {
	for id, a := range r.approvals {
		if a.Status == StatusPending && a.Attempt < r.repairs {
			delete(r.approvals, id)
		}
	}
}

func reasonsOf(env *Envelope) []Reason {
	rs, _ := env.Metadata[MetaReasons].([]Reason)
	return rs
}

type failResult struct {
	rolledBack, rollbackFailures int
}

// Fail ends the run in fail_safe (§7): it waits for running calls, rolls
// back the run's recorded writes in reverse order (a failing rollback adds
// RollbackFailed and NeedsReview), journals the transition durably, and
// returns the envelope with outcome uncertain and the reason codes. A
// closed run returns ErrRunClosed. Fail must not be called from inside a
// tool call of the same run.
func (r *Run) Fail(ctx context.Context, detail string, reasons ...Reason) (*Envelope, error) {
	if _, err := r.fail(ctx, detail, nil, reasons...); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	env := r.envelopeLocked(true)
	return &env, nil
}

func (r *Run) fail(ctx context.Context, detail string, cause *Cause, reasons ...Reason) (failResult, error) {
	var res failResult
	r.mu.Lock()
	if r.phase.Terminal() {
		r.mu.Unlock()
		return res, ErrRunClosed
	}
	for r.closing && !r.phase.Terminal() { // a Verify or another Fail is under way
		r.idle.Wait()
	}
	if r.phase.Terminal() {
		r.mu.Unlock()
		return res, ErrRunClosed
	}
	if err := r.claimLocked(ctx); err != nil { // a paused run, closed from here
		r.mu.Unlock()
		return res, err
	}
	r.closing = true
	own := 0
	if s, ok := scopeFrom(ctx); ok && s.run == r {
		own = 1
	}
	for r.inflight > own {
		r.idle.Wait()
	}
	r.mu.Unlock()

	res = r.rollback(ctx)

	r.mu.Lock()
	if len(reasons) == 0 {
		reasons = []Reason{VerificationFailed}
	}
	if res.rollbackFailures > 0 {
		reasons = append(reasons, RollbackFailed, NeedsReview)
	}
	var uniq []Reason
	for _, x := range reasons {
		uniq = appendReason(uniq, x)
	}
	err := r.transitionLocked(ctx, FailSafe, true, uniq, &TransitionData{Detail: detail, Repairs: r.repairs, Cause: cause})
	if err != nil {
		r.closing = false
		r.idle.Broadcast()
		r.mu.Unlock()
		r.giveUp(err)
		return res, err
	}
	r.reasons, r.cause = uniq, cause
	r.idle.Broadcast()
	r.mu.Unlock()
	r.finished(ctx)
	return res, nil
}

// rollback executes the run's not yet rolled back writes, newest first.
func (r *Run) rollback(ctx context.Context) failResult {
	var res failResult
	r.mu.Lock()
	writes := slices.Clone(r.writes)
	r.mu.Unlock()
	slices.SortFunc(writes, func(a, b *writeState) int { return cmp.Compare(b.seq, a.seq) })
	for _, w := range writes {
		if w.done || w.action == nil {
			continue
		}
		if err := r.rollbackOne(ctx, w); err != nil {
			res.rollbackFailures++
			r.g.log.Error("govern: rollback failed", "request_id", r.requestID, "call_id", w.callID, "tool", w.tool, "error", err)
			continue
		}
		res.rolledBack++
	}
	return res
}

func (r *Run) rollbackOne(ctx context.Context, w *writeState) error {
	data := rollbackData{Action: w.action}
	start := r.record(recordkind.RollbackStarted)
	start.Tool, start.CallID = w.tool, w.callID
	if err := r.appendData(ctx, true, start, data); err != nil {
		return err
	}
	err := r.runRollback(ctx, *w.action)
	end := r.record(recordkind.RollbackDone)
	end.Tool, end.CallID, end.Outcome = w.tool, w.callID, Success
	if err != nil {
		end.Kind, end.Outcome, end.Reasons = recordkind.RollbackFailed, Failure, []Reason{RollbackFailed}
		data.Error = truncateDetail(err.Error())
	}
	if jerr := r.appendData(ctx, true, end, data); jerr != nil {
		return errors.Join(err, jerr)
	}
	r.mu.Lock()
	w.done = err == nil
	r.mu.Unlock()
	return err
}

func (r *Run) runRollback(ctx context.Context, a RollbackAction) (err error) {
	h, ok := r.g.opts.Rollbacks[a.Type]
	if !ok {
		return fmt.Errorf("no rollback handler for type %q", a.Type)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.g.opts.RollbackTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("rollback handler panicked: %v", p)
			}
		}()
		done <- h(rctx, a)
	}()
	select {
	case err = <-done:
		return err
	case <-rctx.Done():
		return fmt.Errorf("rollback timed out after %s", r.g.opts.RollbackTimeout)
	}
}

// finished runs after the run reached a terminal phase: it tells the
// parent and releases the run.
func (r *Run) finished(ctx context.Context) {
	r.mu.Lock()
	outcome := Success
	if r.phase != Deliver {
		outcome = Failure
	}
	r.mu.Unlock()
	r.g.domain.Run(ctx, string(outcome))
	if r.parent != nil {
		r.parent.childFinished(ctx, r)
	}
	r.g.forget(r)
}

// reserveChild registers c as a child before c's run_started is
// journaled, so that the parent cannot deliver past a child it has not
// seen yet. A closed (or closing, or paused) parent takes no children: a
// child's failure could no longer bubble up to it (§4.3).
func (r *Run) reserveChild(c *Run) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usableLocked(); err != nil {
		return err
	}
	r.children[c.requestID] = &childState{requestID: c.requestID, traceID: c.traceID, phase: Intake}
	return nil
}

// dropChild undoes reserveChild for a child that did not start.
func (r *Run) dropChild(c *Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cs, ok := r.children[c.requestID]; ok && cs.phase == Intake {
		delete(r.children, c.requestID)
	}
}

// addChild journals that the reserved child c started.
func (r *Run) addChild(c *Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phase.Terminal() {
		return // closed meanwhile; nothing more of this run is journaled
	}
	rec := r.record(recordkind.Child)
	b, _ := json.Marshal(childData{RequestID: c.requestID, TraceID: c.traceID, Phase: Intake})
	rec.Data = b
	if err := r.g.j.Append(context.Background(), false, rec); err != nil {
		r.g.log.Error("govern: journaling a child run", "request_id", r.requestID, "error", err)
	}
}

func (r *Run) childFinished(ctx context.Context, c *Run) {
	c.mu.Lock()
	phase, reasons := c.phase, slices.Clone(c.reasons)
	c.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, ok := r.children[c.requestID]
	if !ok {
		cs = &childState{requestID: c.requestID, traceID: c.traceID}
		r.children[c.requestID] = cs
	}
	cs.phase, cs.reasons = phase, reasons
	if r.phase.Terminal() {
		return
	}
	rec := r.record(recordkind.Child)
	rec.Outcome = Success
	if phase == FailSafe {
		rec.Outcome, rec.Reasons = Uncertain, []Reason{ChildFailed}
	}
	if err := r.appendData(ctx, false, rec, childData{RequestID: c.requestID, TraceID: c.traceID, Phase: phase, Reasons: reasons}); err != nil {
		r.g.log.Error("govern: journaling a child run", "request_id", r.requestID, "error", err)
	}
}
