package govern

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/bounded"
	"github.com/agentry-dev/agentry/internal/domainmetrics"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// defaultMaxRepairs is the repair budget of a run whose task class and
// options set none: small, so that a verifier that keeps failing ends the
// run quickly.
const defaultMaxRepairs = 2

// Default timeouts.
const (
	defaultToolTimeout     = 5 * time.Minute
	defaultVerifierTimeout = 30 * time.Second
	defaultRollbackTimeout = time.Minute
)

// RollbackFunc executes a rollback action. It must be idempotent: after a
// crash in the middle of a rollback, recovery runs it again.
type RollbackFunc func(ctx context.Context, action RollbackAction) error

// Options configures a Governor. The zero value works: an in-memory
// journal (not durable), AllowAll, no approver keys (so no high-risk call
// can run), no task class requirements.
type Options struct {
	// Journal records everything; nil uses an in-memory journal, which
	// does not survive the process.
	Journal Journal
	// Node names this governor instance in the records it writes and,
	// with leases, as the holder of the leases of the runs it executes.
	// Without leases Recover closes only runs of its own node and runs
	// journaled without one ("" closes every open run). Replicas sharing one journal need distinct names,
	// stable across restarts so that a restarted replica takes its runs
	// back at once.
	Node string
	// Lease is how long a run executing here stays this process's
	// without a renewal, when Journal keeps leases (the SQLite and
	// PostgreSQL stores' journals do; a Journal of your own does with
	// the methods Claim(ctx, key, owner string, ttl time.Duration)
	// (uint64, error), ClaimExpired(ctx, owner string, ttl time.Duration,
	// limit int) (map[string]uint64, error), Renew(ctx, owner string, ttl
	// time.Duration, held map[string]uint64) ([]string, error) and
	// Release(ctx, key string, epoch uint64) error, Decided(ctx, limit
	// int) ([]string, error) and NextExpiry(ctx, owner string)
	// (time.Duration, bool, error), as documented in govern/lease.go, and
	// records' Epoch fencing; govern/journaltest checks them):
	// the governor renews the leases of its runs every third of it, and
	// another process sharing the journal recovers (Recover) a run whose
	// lease expired. 0 leaves leases off: a run belongs to the node that
	// started it, and only that node recovers it.
	Lease time.Duration
	// Policy decides writes; nil is AllowAll.
	Policy Policy
	// Keyring holds the trusted approver keys; nil trusts none.
	Keyring *Keyring
	// Pinned pins tools' tiers by tool name (only ever stricter than the
	// declared tier).
	Pinned map[string]Tier
	// Classes are the task classes by name; runs name theirs.
	Classes []TaskClass
	// Verifiers are the verifiers task classes may require, by ID.
	Verifiers []Verifier
	// Rollbacks executes rollback actions by their type. A write whose
	// rollback action has no handler here has no usable rollback.
	Rollbacks map[string]RollbackFunc
	// MaxRepairs is the default repair budget; 0 is 2, a
	// negative value allows none.
	MaxRepairs int
	// Timeouts; zero uses the defaults: 5 minutes per tool call, 30 seconds
	// per verifier, one minute per rollback action.
	ToolTimeout, VerifierTimeout, RollbackTimeout time.Duration
	// OnDecision is called after an approval decision is durable (in its
	// own goroutine): a server resumes the paused run from here.
	OnDecision func(req ApprovalRequest)
	// Logger receives operational records; nil is slog.Default().
	Logger *slog.Logger
	// MeterProvider counts runs by outcome and tool calls by tier and
	// outcome (agentry.runs, agentry.tool_calls); nil is the global
	// provider.
	MeterProvider metric.MeterProvider
	// TracerProvider makes the spans the governor starts itself: the
	// resume of a paused run (ResumeAgent) and the approved calls it
	// redoes. The spans of a run otherwise belong to its agent. Nil is
	// the global provider.
	TracerProvider trace.TracerProvider
}

// Governor owns governed runs. It is safe for concurrent use.
type Governor struct {
	opts      Options
	j         Journal
	policy    Policy
	keyring   *Keyring
	classes   map[string]*TaskClass
	verifiers map[string]Verifier
	log       *slog.Logger
	domain    *domainmetrics.Metrics
	tracer    trace.Tracer

	leases    leaser      // nil without leases
	recovered atomic.Bool // Recover ran once: later ones reap expired leases only

	mu   sync.Mutex
	live map[string]*Run // runs of this process by request ID
	// ended are the last runs that ended in this process, by request ID
	// (endedOrder: oldest first; at most maxEnded): a terminal run does
	// not change, so Attach answers them without reading the journal.
	ended *bounded.Map[string, *Run]
	idle  chan struct{} // the lease heartbeat runs until it is closed: no run is live

	idx index
}

// New returns a governor. It checks that every task class requires only
// registered verifiers and has a valid floor, and reads the journal to
// learn the runs still open and the approvals pending.
func New(ctx context.Context, options *Options) (*Governor, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	g := &Governor{opts: opts, domain: domainmetrics.Of(opts.MeterProvider), tracer: telemetry.Tracer(opts.TracerProvider), j: opts.Journal, policy: opts.Policy, keyring: opts.Keyring,
		classes: map[string]*TaskClass{}, verifiers: map[string]Verifier{}, log: opts.Logger, live: map[string]*Run{}, ended: bounded.New[string, *Run](maxEnded)}
	if g.j == nil {
		g.j = NewMemoryJournal()
	}
	if l, ok := g.j.(leaser); ok && opts.Lease > 0 {
		g.leases = l
	}
	if g.policy == nil {
		g.policy = AllowAll
	}
	if g.keyring == nil {
		g.keyring = NewKeyring()
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.opts.MaxRepairs == 0 {
		g.opts.MaxRepairs = defaultMaxRepairs
	}
	if g.opts.ToolTimeout <= 0 {
		g.opts.ToolTimeout = defaultToolTimeout
	}
	if g.opts.VerifierTimeout <= 0 {
		g.opts.VerifierTimeout = defaultVerifierTimeout
	}
	if g.opts.RollbackTimeout <= 0 {
		g.opts.RollbackTimeout = defaultRollbackTimeout
	}
	for _, v := range opts.Verifiers {
		if v == nil || v.ID() == "" {
			return nil, errors.New("govern: a verifier has no ID")
		}
		if _, dup := g.verifiers[v.ID()]; dup {
			return nil, fmt.Errorf("govern: two verifiers with ID %q", v.ID())
		}
		g.verifiers[v.ID()] = v
	}
	for i := range opts.Classes {
		c := opts.Classes[i]
		c.RequiredEvidence = slices.Clone(c.RequiredEvidence)
		c.RequiredVerifiers = slices.Clone(c.RequiredVerifiers)
		if c.Name == "" {
			return nil, fmt.Errorf("govern: task class %d has no name", i)
		}
		if _, dup := g.classes[c.Name]; dup {
			return nil, fmt.Errorf("govern: two task classes named %q", c.Name)
		}
		if c.Floor != 0 && !c.Floor.Valid() {
			return nil, fmt.Errorf("govern: task class %q: invalid floor tier %d", c.Name, c.Floor)
		}
		for _, t := range c.RequiredEvidence {
			if !t.Valid() {
				return nil, fmt.Errorf("govern: task class %q: unknown evidence type %q", c.Name, t)
			}
		}
		for _, v := range c.RequiredVerifiers {
			if _, ok := g.verifiers[v]; !ok {
				return nil, fmt.Errorf("govern: task class %q requires verifier %q, which is not registered", c.Name, v)
			}
		}
		g.classes[c.Name] = &c
	}
	for name, t := range opts.Pinned {
		if !t.Valid() {
			return nil, fmt.Errorf("govern: pinned tier of %q is invalid", name)
		}
	}
	g.idx.init(g.j)
	if err := g.refresh(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// Journal returns the governor's journal.
func (g *Governor) Journal() Journal { return g.j }

// Keyring returns the trusted approver keys.
func (g *Governor) Keyring() *Keyring { return g.keyring }

// RunOptions describes a run to start.
type RunOptions struct {
	// RequestID is a UUID; "" generates a UUIDv4.
	RequestID string
	// TraceID is a W3C trace-id (32 lowercase hex digits, not all zero);
	// "" takes the trace id of ctx's OpenTelemetry span (a run without
	// Parent or ParentTraceID), else generates one.
	TraceID string
	// Parent is the invoking run, when this run is a child (§4.3): the
	// child's fail_safe blocks the parent's deliver. ParentTraceID alone
	// links to a parent governed elsewhere.
	Parent        *Run
	ParentTraceID string
	// Identity is who runs: agent, owner, user, control class.
	Identity Identity
	// TaskClass names one of Options.Classes; "" has no requirements.
	TaskClass string
	// Resumer names what can continue the run after a pause.
	Resumer string
}

// Start opens a run in phase intake. It fails with IdentityInvalid for
// an incomplete identity.
func (g *Governor) Start(ctx context.Context, runOpts *RunOptions) (*Run, error) {
	var o RunOptions
	if runOpts != nil {
		o = *runOpts
	}
	if err := o.Identity.Validate(); err != nil {
		return nil, err
	}
	var class *TaskClass
	if o.TaskClass != "" {
		c, ok := g.classes[o.TaskClass]
		if !ok {
			return nil, fmt.Errorf("govern: unknown task class %q", o.TaskClass)
		}
		class = c
	}
	explicitID := o.RequestID != ""
	if o.RequestID == "" {
		o.RequestID = ids.New()
	} else if !validUUID(o.RequestID) {
		return nil, refuse(fmt.Sprintf("request_id %q is not a UUID", o.RequestID), IdentityInvalid)
	}
	if o.Parent != nil {
		o.ParentTraceID = o.Parent.traceID
		if o.TraceID == "" {
			o.TraceID = newTraceID()
		}
	}
	if o.TraceID == "" && o.Parent == nil && o.ParentTraceID == "" {
		o.TraceID = spanTraceID(ctx) // the OpenTelemetry trace the run starts in, if any
	}
	if o.TraceID == "" {
		o.TraceID = newTraceID()
	} else if !validTraceID(o.TraceID) {
		return nil, refuse(fmt.Sprintf("trace_id %q is not a W3C trace-id", o.TraceID), IdentityInvalid)
	}
	if o.ParentTraceID != "" && !validTraceID(o.ParentTraceID) {
		return nil, refuse(fmt.Sprintf("parent_trace_id %q is not a W3C trace-id", o.ParentTraceID), IdentityInvalid)
	}
	maxRepairs := g.opts.MaxRepairs
	if class != nil && class.MaxRepairs != 0 {
		maxRepairs = class.MaxRepairs
	}
	if maxRepairs < 0 {
		maxRepairs = 0
	}
	r := g.newRun(o.RequestID, o.TraceID, o.ParentTraceID, o.Identity, class, maxRepairs)
	r.parent = o.Parent
	r.resumer = o.Resumer
	if explicitID {
		// A request ID names one run for good: the index forgets closed
		// runs, so look for an earlier run of this ID in the journal too
		// (a second run_started would merge two runs' records).
		if _, err := g.runRecords(ctx, r.requestID); err == nil {
			return nil, fmt.Errorf("govern: a run with request_id %s exists", r.requestID)
		} else if !errors.Is(err, ErrUnknownRun) {
			return nil, err
		}
	}
	g.mu.Lock()
	if _, dup := g.live[r.requestID]; dup || g.idx.known(r.requestID) {
		g.mu.Unlock()
		return nil, fmt.Errorf("govern: a run with request_id %s exists", r.requestID)
	}
	g.live[r.requestID] = r
	g.mu.Unlock()
	if g.leased() {
		epoch, err := g.leases.Claim(ctx, r.requestID, g.opts.Node, g.opts.Lease)
		if err != nil {
			g.forget(r)
			if errors.Is(err, ErrLeased) || errors.Is(err, ErrRunClosed) {
				return nil, fmt.Errorf("govern: a run with request_id %s exists", r.requestID)
			}
			return nil, err
		}
		r.epoch, r.renewed = epoch, time.Now()
		g.makeLive(r)
	}
	if r.parent != nil {
		if err := r.parent.reserveChild(r); err != nil {
			g.forget(r)
			return nil, err
		}
	}
	r.span.Store(trace.SpanFromContext(ctx))
	rec := r.record(recordkind.RunStarted)
	rec.To, rec.Outcome = Intake, Pending
	// Synced: a run is acknowledged (its request ID handed out) once
	// Start returns, and a journal may defer appends without sync.
	if err := r.appendData(ctx, true, rec, RunStart{Identity: o.Identity, TaskClass: o.TaskClass, MaxRepairs: maxRepairs, Resumer: o.Resumer}); err != nil {
		g.forget(r)
		if r.parent != nil {
			r.parent.dropChild(r)
		}
		return nil, err
	}
	r.startSpan = rec.SpanID
	if r.parent != nil {
		r.parent.addChild(r)
	}
	return r, nil
}

func (g *Governor) newRun(requestID, traceID, parentTraceID string, id Identity, class *TaskClass, maxRepairs int) *Run {
	r := &Run{g: g, requestID: requestID, traceID: traceID, parentTraceID: parentTraceID, identity: id,
		class: class, maxRepairs: maxRepairs, phase: Intake,
		calls: map[string]*callState{}, approvals: map[string]*ApprovalRequest{}, children: map[string]*childState{}}
	r.idle = sync.NewCond(&r.mu)
	if class != nil {
		r.className = class.Name
	}
	return r
}

func (g *Governor) forget(r *Run) {
	ended := r.Phase().Terminal()
	g.mu.Lock()
	if g.live[r.requestID] == r {
		delete(g.live, r.requestID)
		if ended {
			g.ended.Add(r.requestID, r)
		}
	}
	if len(g.live) == 0 && g.idle != nil {
		close(g.idle) // the heartbeat stops
		g.idle = nil
	}
	g.mu.Unlock()
}

// maxEnded bounds the ended runs a governor keeps (Governor.ended).
const maxEnded = 1024

// Attach returns the run with requestID: the live one of this process
// (executing here, or one of the last maxEnded that ended here), or one
// rebuilt from the journal as it is now — a
// paused run to resume after a restart, or a run another process moves
// on. A rebuilt run is not kept: each Attach reads the journal again,
// and Resume makes the run live here. A terminal run is returned too; its
// methods report ErrRunClosed.
func (g *Governor) Attach(ctx context.Context, requestID string) (*Run, error) {
	g.mu.Lock()
	r, ok := g.live[requestID]
	if !ok {
		r, ok = g.ended.Get(requestID)
	}
	g.mu.Unlock()
	if ok {
		return r, nil
	}
	if g.idx.keep {
		// The run's records come from the index: bring it up to date.
		if err := g.refresh(ctx); err != nil {
			return nil, err
		}
	}
	recs, err := g.runRecords(ctx, requestID)
	if err != nil {
		return nil, err
	}
	// A run rebuilt from the journal is not kept: this process does not
	// execute it (Resume makes it live here), and another process may
	// move it on, which the next Attach reads.
	return g.rebuild(recs)
}

// RecoveryReport says what Recover did.
type RecoveryReport struct {
	// Closed lists the request IDs of the runs closed as fail_safe.
	Closed []string
	// RolledBack counts the writes rolled back; RollbackFailures those
	// whose rollback failed (the run needs review).
	RolledBack, RollbackFailures int
	// Paused lists runs left waiting for approvals.
	Paused []string
	// Resumable lists runs whose resume after their approvals a crash
	// interrupted before any call was in doubt: paused again at the pause
	// they had resumed from, their approvals decided, for the resumer to
	// continue (runs.Service.ResumeDecided; ResumeAgent). With leases it
	// also lists the paused runs an approval was decided for since they
	// paused that no process resumed (check that none is pending left).
	Resumable []string
	// NextExpiry, with leases, is how long until the earliest lease of a
	// run another process holds expires — when a periodic caller had
	// best call Recover again — or -1 when no other process holds one.
	NextExpiry time.Duration
}

// Recover closes every run of this node that a crash left open, except
// those it can continue: a paused run stays paused, and a run whose
// resume from a pause was interrupted before anything was in doubt — it
// recorded no more than the redo of the calls its pause waited for and
// the verification of a final answer, every redone call committed, failed
// or refused — is paused again at that pause (RecoveryReport.Resumable),
// so that its resumer continues it without running anything twice. Every
// other open run is abandoned: its recorded writes without a completed
// rollback — in-doubt intents and committed writes alike — are rolled
// back in reverse order, and the run ends in fail_safe with
// RecoveredInDoubt. It is idempotent.
//
// Without leases (Options.Lease), call it once at startup, before
// starting runs: it treats every open run of its node not live in this
// process as abandoned. With leases it recovers only runs whose lease it
// claims — at its first call every open run not paused that no live
// process holds, then runs whose holder let the lease expire — so call
// it at startup and then periodically (every third of the lease), on
// every replica: whichever claims a run first recovers it.
func (g *Governor) Recover(ctx context.Context) (*RecoveryReport, error) {
	if !g.leased() || !g.recovered.Load() {
		// With leases, only the first call reads the index (claimable):
		// the later ones find their runs in the lease table.
		if err := g.refresh(ctx); err != nil {
			return nil, err
		}
	}
	rep := &RecoveryReport{}
	candidates := g.idx.openRuns(g.opts.Node)
	var epochs map[string]uint64
	if g.leased() {
		var err error
		if epochs, err = g.claimable(ctx); err != nil {
			return rep, err
		}
		candidates = candidates[:0]
		for id := range epochs {
			candidates = append(candidates, id)
		}
		slices.Sort(candidates)
	}
	for _, id := range candidates {
		g.mu.Lock()
		_, isLive := g.live[id]
		g.mu.Unlock()
		if isLive {
			continue
		}
		recs, err := g.runRecords(ctx, id)
		if errors.Is(err, ErrUnknownRun) && epochs != nil {
			// The lease of a start that never journaled: nothing to do.
			_ = g.leases.Release(context.WithoutCancel(ctx), id, epochs[id])
			continue
		}
		if err != nil {
			return rep, err
		}
		r, err := g.rebuild(recs)
		if err != nil {
			return rep, err
		}
		if epochs != nil {
			r.epoch, r.renewed = epochs[id], time.Now()
			g.makeLive(r) // its lease is renewed while it is recovered
			defer g.forget(r)
		}
		if r.phase.Terminal() {
			continue
		}
		if r.paused {
			// A resume claimed it and died before journaling the resume.
			r.release(ctx)
			rep.Paused = append(rep.Paused, id)
			continue
		}
		r.actor = Actor{ID: "uaicp:recovery", Kind: ActorSystem}
		ok, why := r.resumable(recs)
		if ok {
			if err := r.repause(ctx); err != nil {
				return rep, err
			}
			rep.Resumable = append(rep.Resumable, id)
			continue
		}
		detail := "recovered after a crash"
		if len(r.pausedFor) > 0 {
			detail += "; its resume cannot be continued: " + why
		}
		res, err := r.fail(ctx, detail, nil, RecoveredInDoubt)
		rep.RolledBack += res.rolledBack
		rep.RollbackFailures += res.rollbackFailures
		if err != nil && !errors.Is(err, ErrRunClosed) {
			return rep, err
		}
		rep.Closed = append(rep.Closed, id)
	}
	if g.leased() {
		// Paused runs whose approvals were decided since they paused and
		// that no process resumed: the decider died first, or resumes
		// nothing (a process that only decides).
		decided, err := g.leases.Decided(ctx, recoverBatch)
		if err != nil {
			return rep, err
		}
		for _, id := range decided {
			g.mu.Lock()
			_, isLive := g.live[id]
			g.mu.Unlock()
			if !isLive && !slices.Contains(rep.Resumable, id) {
				rep.Resumable = append(rep.Resumable, id)
			}
		}
		next, ok, err := g.leases.NextExpiry(ctx, g.opts.Node)
		switch {
		case err != nil:
			return rep, err
		case ok:
			rep.NextExpiry = next
		default:
			rep.NextExpiry = -1
		}
	}
	return rep, nil
}

// recoverBatch bounds the runs one Recover claims, and the decided runs
// it reports.
const recoverBatch = 1000

// Approvals lists the approval requests of open runs, oldest first;
// pendingOnly keeps those not decided yet.
func (g *Governor) Approvals(ctx context.Context, pendingOnly bool) ([]ApprovalRequest, error) {
	if err := g.refresh(ctx); err != nil {
		return nil, err
	}
	return g.idx.approvalList(pendingOnly), nil
}

// Approval returns one approval request.
func (g *Governor) Approval(ctx context.Context, id string) (ApprovalRequest, error) {
	if err := g.refresh(ctx); err != nil {
		return ApprovalRequest{}, err
	}
	a, ok := g.idx.approval(id)
	if !ok {
		return ApprovalRequest{}, ErrUnknownApproval
	}
	return a, nil
}

// ApprovalInput is an approver's decision.
type ApprovalInput struct {
	// Approve approves the call; Token must then be an approval token
	// bound to the request, signed by a trusted key.
	Approve bool
	Token   string
	// Approver is who denies (approvals take it from the token).
	Approver string
	Reason   string
}

// Decide records a decision on a pending approval request. An approval
// needs a token that verifies (Keyring.Verify), is bound to exactly this
// request (Binding), whose jti was never used — by another decision or by
// a call that presented it — and whose approver is neither the requesting
// agent nor its user; otherwise Decide fails with ApprovalInvalid and
// nothing is recorded. Single use is the journal's: the decision is
// journaled with an approval_token_used record whose unique key is the
// jti, so of two decisions using one jti — concurrently, in two
// processes, or after a restart — exactly one is recorded. The decision
// is durable when Decide returns; Options.OnDecision is then called.
func (g *Governor) Decide(ctx context.Context, approvalID string, in ApprovalInput) (ApprovalRequest, error) {
	req, err := g.Approval(ctx, approvalID)
	if err != nil {
		return ApprovalRequest{}, err
	}
	if req.Status != StatusPending {
		return req, ErrAlreadyDecided
	}
	d := ApprovalDecision{ApprovalID: approvalID, Approved: in.Approve, Reason: in.Reason, DecidedAt: Time{ids.Now()}}
	if in.Approve {
		claims, err := g.checkToken(in.Token, req.Binding(), req.Requester)
		if err != nil {
			return req, err
		}
		d.Approver, d.Token, d.TokenID = claims.Issuer, in.Token, claims.ID
	} else {
		if in.Approver == "" {
			return req, errors.New("govern: a denial names its approver")
		}
		d.Approver = in.Approver
	}
	recs, err := g.decisionRecords(req, d)
	if err != nil {
		return req, err
	}
	if err := g.j.Append(ctx, true, recs...); err != nil {
		if !errors.Is(err, ErrDuplicate) {
			return req, err
		}
		// Either key may be taken: the request's (decided meanwhile) or
		// the token's (its jti was used). The index tells which.
		if err := g.refresh(ctx); err != nil {
			return req, err
		}
		cur, ok := g.idx.approval(approvalID)
		switch {
		case !ok:
			return req, ErrUnknownApproval // its run closed meanwhile
		case cur.Status != StatusPending:
			return cur, ErrAlreadyDecided
		}
		return req, refuse(replayDetail, ApprovalInvalid)
	}
	req.Decision = &d
	req.Status = StatusDenied
	if in.Approve {
		req.Status = StatusApproved
	}
	g.mu.Lock()
	r := g.live[req.RequestID]
	g.mu.Unlock()
	if r != nil {
		r.noteDecision(req)
	}
	_ = g.refresh(ctx)
	if g.opts.OnDecision != nil {
		go g.opts.OnDecision(req)
	}
	return req, nil
}

// replayDetail is the detail of a refusal of a token whose jti was used.
const replayDetail = "approval token already used (replay)"

// decisionRecords returns the records of decision d on req, to journal in
// one Append: the approval_decided record, whose unique key makes a
// second decision on the request fail with ErrDuplicate, and for an
// approval the approval_token_used record, whose unique key (the jti)
// makes a second use of the token fail the same way.
func (g *Governor) decisionRecords(req ApprovalRequest, d ApprovalDecision) ([]*Record, error) {
	rec := &Record{Kind: recordkind.ApprovalDecided, RequestID: req.RequestID, TraceID: req.TraceID, ParentTraceID: req.ParentTraceID,
		Node: g.opts.Node, Actor: Actor{ID: d.Approver, Kind: ActorHuman}, Tool: req.Tool, CallID: req.CallID,
		Outcome: Success, Unique: decisionKey(req.ID), Timestamp: Time{ids.Now()}}
	if !d.Approved {
		rec.Outcome, rec.Reasons = Failure, []Reason{ApprovalDenied}
	}
	var err error
	if rec.Data, err = json.Marshal(d); err != nil {
		return nil, err
	}
	if !d.Approved {
		return []*Record{rec}, nil
	}
	used := *rec
	used.Kind, used.Reasons, used.Unique = recordkind.TokenUsed, nil, tokenKey(d.TokenID)
	if used.Data, err = json.Marshal(tokenUse{ApprovalID: req.ID, TokenID: d.TokenID}); err != nil {
		return nil, err
	}
	return []*Record{rec, &used}, nil
}

// decisionKey is the journal Unique key of the decision on an approval
// request: one decision per request.
func decisionKey(approvalID string) string { return "approval:" + approvalID }

// tokenKey is the journal Unique key of an approval token's use: a jti is
// used once, by a decision or by a call presenting the token.
func tokenKey(jti string) string { return "jti:" + jti }

// useKey is the journal Unique key of the intent of the call an approval
// request approved: the approval is acted on once.
func useKey(approvalID string) string { return "use:" + approvalID }

// checkToken verifies token and its binding to want; the approver must
// not be the requester.
func (g *Governor) checkToken(token string, want Binding, requester Identity) (*ApprovalClaims, error) {
	claims, err := g.keyring.Verify(token, time.Now())
	if err != nil {
		return nil, err
	}
	return claims, checkClaims(claims, want, requester)
}

func checkClaims(claims *ApprovalClaims, want Binding, requester Identity) error {
	if claims.Binding != want {
		return refuse(fmt.Sprintf("token is bound to %s, not to this call", describeBinding(claims.Binding, want)), ApprovalInvalid)
	}
	if claims.Issuer == requester.AgentID || (requester.UserID != "" && claims.Issuer == requester.UserID) {
		return refuse(fmt.Sprintf("approver %q is the requester (self-approval)", claims.Issuer), ApprovalInvalid)
	}
	return nil
}

func describeBinding(got, want Binding) string {
	switch {
	case got.RequestID != want.RequestID:
		return "another request"
	case got.TraceID != want.TraceID:
		return "another trace"
	case got.Tool != want.Tool:
		return fmt.Sprintf("tool %q", got.Tool)
	case got.ArgsHash != want.ArgsHash:
		return "other arguments"
	case got.RollbackHash != want.RollbackHash:
		return "another rollback action"
	case got.Tier != want.Tier:
		return fmt.Sprintf("tier %q", got.Tier)
	case got.Attempt != want.Attempt:
		return fmt.Sprintf("attempt %d", got.Attempt)
	case got.ApprovalID != want.ApprovalID:
		return "another approval request"
	}
	return "something else"
}

// validTraceID reports whether s is a W3C trace-id: 32 lowercase hex
// digits, not all zero.
func validTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	zero := true
	for _, c := range []byte(s) {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		default:
			return false
		}
		if c != '0' {
			zero = false
		}
	}
	return !zero
}

func newTraceID() string {
	var b [16]byte
	for {
		_, _ = rand.Read(b[:])
		if b != ([16]byte{}) {
			return hex.EncodeToString(b[:])
		}
	}
}

func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}
