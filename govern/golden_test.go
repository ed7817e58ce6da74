package govern_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/uaicpschema"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenIDs is a deterministic ids.Source: UUIDs numbered from 1 and a
// clock that never moves.
type goldenIDs struct {
	mu sync.Mutex
	n  int
}

var goldenTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func (s *goldenIDs) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
}

func (s *goldenIDs) Now() time.Time { return goldenTime }

const (
	goldenRequestID = "f47ac10b-58cc-4372-a567-0e02b2c3d479"
	goldenTraceID   = "4bf92f3577b34da6a3ce929d0e0e4736"
)

var goldenIdentity = govern.Identity{AgentID: "agent:finance/refund-bot", OwnerID: "org:acme", UserID: "user:456",
	ControlClass: govern.HumanSupervised, Extra: map[string]any{"acme.team": "payments"}}

// goldenObjects drives governed runs on fixed IDs and time and returns
// the wire objects they produce, by golden file name.
func goldenObjects(t *testing.T) map[string]any {
	ctx := context.Background()
	out := map[string]any{}

	// A run that streams a chunk, gathers evidence, verifies and delivers.
	restore := ids.Set(&goldenIDs{})
	defer restore()
	verifier := govern.NewVerifier("answer-check", func(_ context.Context, in govern.VerifyInput) (*govern.Report, error) {
		var evIDs []string
		for _, ev := range in.Evidence {
			evIDs = append(evIDs, ev.EvidenceID)
		}
		return &govern.Report{Status: govern.ReportPass, EvidenceIDs: evIDs, Extra: map[string]any{"acme.duration_ms": 12},
			Checks: []govern.Check{{CheckID: "BALANCE_CITED", Result: govern.CheckPass, Details: "the answer cites the ledger"}, {CheckID: "CURRENCY", Result: govern.CheckSkip}}}, nil
	})
	g, err := govern.New(ctx, &govern.Options{
		Classes:   []govern.TaskClass{{Name: "balance", RequiredEvidence: []govern.EvidenceType{govern.ToolResult}, RequiredVerifiers: []string{"answer-check"}}},
		Verifiers: []govern.Verifier{verifier},
	})
	if err != nil {
		t.Fatal(err)
	}
	auditJournal := func(g *govern.Governor) { t.Cleanup(func() { checkAudit(t, g.Journal()) }) }
	auditJournal(g)
	r, err := g.Start(ctx, &govern.RunOptions{RequestID: goldenRequestID, TraceID: goldenTraceID, Identity: goldenIdentity, TaskClass: "balance"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := r.Invoke(ctx, govern.ToolSpec{Name: "ledger.balance", Tier: govern.ReadOnly}, govern.Call{ID: "call-1", Args: map[string]any{"account": "7"}},
		func(ctx context.Context) (any, error) {
			_, err := govern.AddEvidence(ctx, govern.Evidence{EvidenceType: govern.SourceCitation, Actor: "ledger-service",
				Payload: json.RawMessage(`{"url":"https://ledger.example/accounts/7"}`), Extra: map[string]any{"acme.confidence": 0.9}})
			return map[string]any{"account": "7", "balance": 42.5, "currency": "EUR"}, err
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range inv.Evidence {
		out["evidence_"+string(ev.EvidenceType)] = ev
	}
	chunk, ok := r.Chunk("The balance of account 7 is")
	if !ok {
		t.Fatal("Chunk refused")
	}
	out["envelope_chunk"] = chunk
	const answer = "The balance of account 7 is 42.50 EUR."
	v, err := r.Verify(ctx, answer)
	if err != nil || !v.Passed || len(v.Reports) != 2 {
		t.Fatalf("verify: %+v %v", v, err)
	}
	out["report_evidence_gating"] = v.Reports[0]
	out["report"] = v.Reports[1]
	env, err := r.Deliver(ctx, answer)
	if err != nil {
		t.Fatal(err)
	}
	out["envelope_deliver"] = *env
	restore()

	// A run that fails safe: its required evidence is missing.
	restore = ids.Set(&goldenIDs{})
	r, err = g.Start(ctx, &govern.RunOptions{RequestID: goldenRequestID[:35] + "8", TraceID: goldenTraceID, Identity: goldenIdentity, TaskClass: "balance"})
	if err != nil {
		t.Fatal(err)
	}
	v, err = r.Verify(ctx, "I do not know.")
	if err != nil || v.Passed {
		t.Fatalf("verify: %+v %v", v, err)
	}
	env, err = r.Fail(ctx, "verification failed", v.Reasons...)
	if err != nil {
		t.Fatal(err)
	}
	out["envelope_fail_safe"] = *env
	restore()

	// A high-risk call: refused until approved, then run with its
	// rollback action.
	restore = ids.Set(&goldenIDs{})
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	kr := govern.NewKeyring()
	if _, err := kr.Add("human:alice", priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	g, err = govern.New(ctx, &govern.Options{Keyring: kr, Rollbacks: map[string]govern.RollbackFunc{
		"refund.cancel": func(context.Context, govern.RollbackAction) error { return nil },
	}})
	if err != nil {
		t.Fatal(err)
	}
	auditJournal(g)
	r, err = g.Start(ctx, &govern.RunOptions{RequestID: goldenRequestID[:35] + "a", TraceID: goldenTraceID, ParentTraceID: "0af7651916cd43dd8448eb211c80319c", Identity: goldenIdentity})
	if err != nil {
		t.Fatal(err)
	}
	spec := govern.ToolSpec{Name: "payments.refund", Tier: govern.WriteHighRisk, Rollback: func(_ context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "refund.cancel", Target: "refund:" + c.ID, Payload: map[string]any{"amount": 5, "currency": "EUR"}}, nil
	}}
	call := govern.Call{ID: "call-9", Args: map[string]any{"amount": 5, "currency": "EUR", "order": "o-1"}}
	refund := func(context.Context) (any, error) { return map[string]any{"refund": "r-1", "status": "sent"}, nil }
	_, err = r.Invoke(ctx, spec, call, refund)
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) || ge.Envelope == nil {
		t.Fatalf("err = %v, want APPROVAL_REQUIRED", err)
	}
	out["envelope_awaiting_approval"] = *ge.Envelope
	req, err := g.Approval(ctx, ge.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	call.Approval, err = govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "human:alice", Audience: govern.TokenAudience, ID: "jti-1",
		IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	inv, err = r.Invoke(ctx, spec, call, refund)
	if err != nil {
		t.Fatal(err)
	}
	out["envelope_high_risk_call"] = inv.Envelope
	return out
}

// TestUAICP_6_GoldenJSON pins the exact JSON form of the contract objects
// a governed run emits (testdata/golden; rewrite with -update). Each
// validates against its schema and decodes strictly back to itself.
func TestUAICP_6_GoldenJSON(t *testing.T) {
	objs := goldenObjects(t)
	for _, name := range []string{"envelope_chunk", "envelope_deliver", "envelope_fail_safe", "envelope_awaiting_approval", "envelope_high_risk_call",
		"evidence_tool_result", "evidence_source_citation", "report", "report_evidence_gating"} {
		t.Run(name, func(t *testing.T) {
			obj, ok := objs[name]
			if !ok {
				t.Fatalf("no %s produced", name)
			}
			if err := uaicpschema.Validate(obj); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			want := goldenFile(t, name, b)
			var back any
			var validate func([]byte) error
			switch obj.(type) {
			case govern.Envelope:
				back, err = govern.DecodeEnvelope(want)
				validate = uaicpschema.ValidateEnvelope
			case govern.Evidence:
				back, err = govern.DecodeEvidence(want)
				validate = uaicpschema.ValidateEvidence
			case govern.Report:
				back, err = govern.DecodeReport(want)
				validate = uaicpschema.ValidateReport
			}
			if err != nil {
				t.Fatalf("decoding the golden file: %v", err)
			}
			if err := validate(want); err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, b) {
				t.Errorf("decoded and re-encoded:\n%s\nwant:\n%s", again, b)
			}
		})
	}
	// The evidence hash is the governor's, over the JCS of the payload.
	ev := objs["evidence_tool_result"].(govern.Evidence)
	if !ev.CheckHash() {
		t.Errorf("evidence hash %s does not match its payload %s", ev.Hash, ev.Payload)
	}
}

// goldenFile compares got, indented, with testdata/golden/name.json (or
// writes it with -update) and returns the file's content.
func goldenFile(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("%s (-golden +got):\n%s", path, diff)
	}
	return want
}
