package govern_test

// Shared fixtures of the behaviour suite (behaviour_*_test.go): a governor
// constructor that audits the journal when the test ends, wire checks for
// the objects the governor returns, approver keys and tokens, and strict
// tool and policy fakes.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/internal/uaicpschema"
)

var bg = context.Background()

// agentID and userID are the identity of every test run, so that
// self-approval tests can name them.
const (
	agentID = "agent:test"
	ownerID = "org:test"
	userID  = "user:u1"
)

func testIdentity() govern.Identity {
	return govern.Identity{AgentID: agentID, OwnerID: ownerID, UserID: userID, ControlClass: govern.HumanSupervised}
}

// quietLogger keeps expected rollback failures out of the test output.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newGov returns a governor for opts (a quiet logger when none is set) and
// audits its journal when the test ends (checkAudit). Every test that
// makes a governor makes it here.
func newGov(t testing.TB, opts govern.Options) *govern.Governor {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	g, err := govern.New(bg, &opts)
	if err != nil {
		t.Fatalf("govern.New: %v", err)
	}
	t.Cleanup(func() { checkAudit(t, g.Journal()) })
	return g
}

func start(t testing.TB, g *govern.Governor, o govern.RunOptions) *govern.Run {
	t.Helper()
	if o.Identity.AgentID == "" && o.Identity.OwnerID == "" {
		o.Identity = testIdentity()
	}
	r, err := g.Start(bg, &o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	checkWire(t, r.Envelope())
	return r
}

// records returns every record of j.
func records(t testing.TB, j govern.Journal) []govern.Record {
	t.Helper()
	var out []govern.Record
	for r, err := range j.Records(bg, 1) {
		if err != nil {
			t.Fatalf("reading the journal: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// runRecords returns the records of one run.
func runRecords(t testing.TB, j govern.Journal, requestID string) []govern.Record {
	t.Helper()
	var out []govern.Record
	for _, r := range records(t, j) {
		if r.RequestID == requestID {
			out = append(out, r)
		}
	}
	return out
}

// kinds returns the kinds of recs (of one run) in order.
func kinds(recs []govern.Record) []govern.RecordKind {
	out := make([]govern.RecordKind, len(recs))
	for i, r := range recs {
		out[i] = r.Kind
	}
	return out
}

// transitions returns "from→to" for each transition record of a run.
func transitions(t testing.TB, j govern.Journal, requestID string) []string {
	t.Helper()
	var out []string
	for _, r := range runRecords(t, j, requestID) {
		if r.Kind == recordkind.Transition {
			out = append(out, string(r.From)+"→"+string(r.To))
		}
	}
	return out
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// checkAudit checks UAICP §5.4 on a whole journal: the hash chain holds
// and every record carries request_id (a UUID), trace_id (a W3C
// trace-id), a timestamp, an actor with id and kind, and an outcome.
// Beyond that it checks what the state machine promises of the records:
// each run opens with run_started, its transitions are edges of the
// machine taken from the phase it was in, and nothing of a run is
// recorded after its terminal transition.
func checkAudit(t testing.TB, j govern.Journal) {
	t.Helper()
	if n, err := govern.VerifyChain(bg, j); err != nil {
		t.Errorf("audit: VerifyChain after %d records: %v", n, err)
		return
	}
	recs := records(t, j)
	type runState struct {
		phase govern.Phase
	}
	runs := map[string]*runState{}
	for _, r := range recs {
		where := fmt.Sprintf("audit: record %d (%s)", r.Seq, r.Kind)
		switch {
		case !uuidRE.MatchString(r.RequestID):
			t.Errorf("%s: request_id %q is not a UUID", where, r.RequestID)
		case !govern.ValidTraceID(r.TraceID):
			t.Errorf("%s: trace_id %q is not a W3C trace-id", where, r.TraceID)
		case r.ParentTraceID != "" && !govern.ValidTraceID(r.ParentTraceID):
			t.Errorf("%s: parent_trace_id %q is not a W3C trace-id", where, r.ParentTraceID)
		case r.Timestamp.IsZero():
			t.Errorf("%s: no timestamp", where)
		case r.Actor.ID == "":
			t.Errorf("%s: no actor id", where)
		case r.Actor.Kind != govern.ActorSystem && r.Actor.Kind != govern.ActorAgent && r.Actor.Kind != govern.ActorHuman:
			t.Errorf("%s: actor kind %q", where, r.Actor.Kind)
		case !slices.Contains([]govern.Outcome{govern.Success, govern.Failure, govern.Uncertain, govern.Pending}, r.Outcome):
			t.Errorf("%s: outcome %q", where, r.Outcome)
		}
		// The timestamp must survive its wire form (RFC 3339).
		if b, err := json.Marshal(r.Timestamp); err != nil {
			t.Errorf("%s: timestamp: %v", where, err)
		} else if _, err := time.Parse(time.RFC3339, string(bytes.Trim(b, `"`))); err != nil {
			t.Errorf("%s: timestamp %s is not RFC 3339", where, b)
		}
		st := runs[r.RequestID]
		if r.Kind == recordkind.RunStarted {
			if st != nil {
				t.Errorf("%s: second run_started for request %s", where, r.RequestID)
			}
			runs[r.RequestID] = &runState{phase: govern.Intake}
			continue
		}
		if st == nil {
			t.Errorf("%s: record of request %s before its run_started", where, r.RequestID)
			continue
		}
		if st.phase.Terminal() {
			t.Errorf("%s: record of request %s after its terminal phase %s", where, r.RequestID, st.phase)
		}
		if r.Kind == recordkind.Transition {
			if r.From != st.phase || !govern.CanTransition(r.From, r.To) {
				t.Errorf("%s: transition %s→%s while the run was in %s", where, r.From, r.To, st.phase)
			}
			st.phase = r.To
		}
	}
	// The contract objects the records embed validate too.
	if err := uaicpschema.CheckRecords(recs); err != nil {
		t.Errorf("audit: %v", err)
	}
}

// checkWire checks that v (an Envelope, Evidence or Report, or a pointer
// to one) validates against its UAICP JSON schema, and that an envelope's
// trace IDs are W3C trace-ids (the schema asks only for a string).
func checkWire(t testing.TB, v any) {
	t.Helper()
	if err := uaicpschema.Validate(v); err != nil {
		t.Errorf("wire: %T: %v", v, err)
	}
	var env *govern.Envelope
	switch x := v.(type) {
	case govern.Envelope:
		env = &x
	case *govern.Envelope:
		env = x
	}
	if env != nil && (!govern.ValidTraceID(env.TraceID) || env.ParentTraceID != "" && !govern.ValidTraceID(env.ParentTraceID)) {
		t.Errorf("wire: envelope trace_id %q parent_trace_id %q: not W3C trace-ids", env.TraceID, env.ParentTraceID)
	}
}

// checkVerdict checks every report of a verdict on the wire.
func checkVerdict(t testing.TB, v *govern.Verdict) {
	t.Helper()
	if v == nil {
		return
	}
	for _, rep := range v.Reports {
		checkWire(t, rep)
	}
}

// checkInvocation checks an invocation's envelope and evidence on the wire.
func checkInvocation(t testing.TB, inv *govern.Invocation) {
	t.Helper()
	if inv == nil {
		return
	}
	checkWire(t, inv.Envelope)
	for _, e := range inv.Evidence {
		checkWire(t, e)
	}
}

// govErr returns err as a *govern.Error, failing the test when it is not
// one, and checks the envelope it carries on the wire.
func govErr(t testing.TB, err error) *govern.Error {
	t.Helper()
	var ge *govern.Error
	if !errors.As(err, &ge) {
		t.Fatalf("error %v (%T) is not a *govern.Error", err, err)
	}
	if ge.Envelope != nil {
		checkWire(t, ge.Envelope)
	}
	return ge
}

// wantReasons fails unless err carries every reason in want.
func wantReasons(t testing.TB, err error, want ...govern.Reason) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want reasons %v", want)
	}
	for _, r := range want {
		if !errors.Is(err, r) {
			t.Fatalf("err = %v (reasons %v), want reason %s", err, govern.ReasonsOf(err), r)
		}
	}
	if ge := (*govern.Error)(nil); errors.As(err, &ge) && ge.Envelope != nil {
		checkWire(t, ge.Envelope)
	}
}

// envReasons returns the reason codes of an envelope's metadata, whether
// it came from the governor ([]Reason) or from JSON ([]any).
func envReasons(env *govern.Envelope) []govern.Reason {
	if env == nil {
		return nil
	}
	switch x := env.Metadata[govern.MetaReasons].(type) {
	case []govern.Reason:
		return x
	case []any:
		var out []govern.Reason
		for _, s := range x {
			if s, ok := s.(string); ok {
				out = append(out, govern.Reason(s))
			}
		}
		return out
	}
	return nil
}

// wantEnvReasons fails unless env's reasons include every one of want.
func wantEnvReasons(t testing.TB, env *govern.Envelope, want ...govern.Reason) {
	t.Helper()
	got := envReasons(env)
	for _, r := range want {
		if !slices.Contains(got, r) {
			t.Fatalf("envelope reasons %v, want %s among them", got, r)
		}
	}
}

// tool is a strict tool fake: it counts its calls and returns result.
type tool struct {
	calls  atomic.Int32
	result any
	err    error
	// body, when set, runs inside the call before it returns.
	body func(ctx context.Context) error
}

func (f *tool) fn(ctx context.Context) (any, error) {
	f.calls.Add(1)
	if f.body != nil {
		if err := f.body(ctx); err != nil {
			return nil, err
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	if f.result == nil {
		return map[string]any{"ok": true}, nil
	}
	return f.result, nil
}

func (f *tool) n() int { return int(f.calls.Load()) }

// notCalled is a tool body for calls that must not run.
func notCalled(t testing.TB) func(ctx context.Context) (any, error) {
	return func(context.Context) (any, error) {
		t.Errorf("a tool ran that the governor must have refused")
		return nil, nil
	}
}

// rollbackLog records the rollback actions a handler executed, in order.
type rollbackLog struct {
	mu   sync.Mutex
	done []string // targets
	// fail names targets whose rollback fails; panic those that panic.
	fail, panic map[string]bool
}

func (l *rollbackLog) handler(ctx context.Context, a govern.RollbackAction) error {
	l.mu.Lock()
	l.done = append(l.done, a.Target)
	l.mu.Unlock()
	if l.panic[a.Target] {
		panic("rollback handler exploded")
	}
	if l.fail[a.Target] {
		return errors.New("rollback refused by the backend")
	}
	return nil
}

func (l *rollbackLog) targets() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.done)
}

// undoType is the rollback type registered in the suite's governors.
const undoType = "undo"

// withRollback returns spec with a rollback action of type undoType whose
// target is the call ID.
func withRollback(spec govern.ToolSpec) govern.ToolSpec {
	spec.Rollback = func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: undoType, Target: c.ID, Payload: map[string]any{"call": c.ID}}, nil
	}
	return spec
}

func highRisk(name string) govern.ToolSpec {
	return withRollback(govern.ToolSpec{Name: name, Tier: govern.WriteHighRisk})
}

func lowRisk(name string) govern.ToolSpec {
	return govern.ToolSpec{Name: name, Tier: govern.WriteLowRisk}
}

func readOnly(name string) govern.ToolSpec {
	return govern.ToolSpec{Name: name, Tier: govern.ReadOnly}
}

// approver is a test approver: a deterministic Ed25519 key.
type approver struct {
	name string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

func newApprover(name string, seed byte) approver {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return approver{name: name, priv: priv, pub: priv.Public().(ed25519.PublicKey)}
}

var (
	alice   = newApprover("alice", 1)
	bob     = newApprover("bob", 2)
	mallory = newApprover("mallory", 3) // never in a keyring
)

func keyring(t testing.TB, as ...approver) *govern.Keyring {
	t.Helper()
	k := govern.NewKeyring()
	for _, a := range as {
		if _, err := k.Add(a.name, a.pub); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

var jtiSeq atomic.Int64

// claimsFor returns valid claims by a for the approval request req.
func claimsFor(a approver, req govern.ApprovalRequest) govern.ApprovalClaims {
	now := time.Now()
	return govern.ApprovalClaims{Issuer: a.name, Audience: govern.TokenAudience, ID: fmt.Sprintf("jti-%d", jtiSeq.Add(1)),
		IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()}
}

func sign(t testing.TB, a approver, c govern.ApprovalClaims) string {
	t.Helper()
	tok, err := govern.SignApproval(a.priv, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// approvalOf returns the approval request a refused call opened.
func approvalOf(t testing.TB, g *govern.Governor, err error) govern.ApprovalRequest {
	t.Helper()
	wantReasons(t, err, govern.ApprovalRequired)
	ge := govErr(t, err)
	if ge.ApprovalID == "" {
		t.Fatalf("refusal %v names no approval request", err)
	}
	req, err := g.Approval(bg, ge.ApprovalID)
	if err != nil {
		t.Fatalf("Approval(%s): %v", ge.ApprovalID, err)
	}
	return req
}

// approve asks for call (expecting an approval request), approves it with
// a token by a and returns the request.
func approve(t testing.TB, g *govern.Governor, r *govern.Run, spec govern.ToolSpec, call govern.Call, a approver) govern.ApprovalRequest {
	t.Helper()
	_, err := r.Invoke(bg, spec, call, notCalled(t))
	req := approvalOf(t, g, err)
	if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, a, claimsFor(a, req))}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return req
}

// invoke runs a call that must succeed.
func invoke(t testing.TB, r *govern.Run, spec govern.ToolSpec, call govern.Call, f *tool) *govern.Invocation {
	t.Helper()
	inv, err := r.Invoke(bg, spec, call, f.fn)
	if err != nil {
		t.Fatalf("Invoke(%s, %s): %v", spec.Name, call.ID, err)
	}
	checkInvocation(t, inv)
	return inv
}

// verifyPass moves r through verify with output and delivers it.
func verifyPass(t testing.TB, r *govern.Run, output any) *govern.Envelope {
	t.Helper()
	v, err := r.Verify(bg, output)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	checkVerdict(t, v)
	if !v.Passed {
		t.Fatalf("Verify: verdict failed: %v", v.Reasons)
	}
	env, err := r.Deliver(bg, output)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	checkWire(t, env)
	return env
}

// spyPolicy records the inputs it was asked about and answers with
// decide (Allow when nil).
type spyPolicy struct {
	mu     sync.Mutex
	inputs []govern.PolicyInput
	decide func(in govern.PolicyInput) (govern.Decision, error)
}

func (p *spyPolicy) Decide(_ context.Context, in govern.PolicyInput) (govern.Decision, error) {
	p.mu.Lock()
	p.inputs = append(p.inputs, in)
	p.mu.Unlock()
	if p.decide == nil {
		return govern.Decision{Effect: govern.Allow, Rule: "spy"}, nil
	}
	return p.decide(in)
}

func (p *spyPolicy) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inputs)
}

// baseOpts returns options with the suite's keyring (alice and bob) and
// the undo rollback handler recording into log.
func baseOpts(t testing.TB, log *rollbackLog) govern.Options {
	if log == nil {
		log = &rollbackLog{}
	}
	return govern.Options{Keyring: keyring(t, alice, bob), Rollbacks: map[string]govern.RollbackFunc{undoType: log.handler}}
}
