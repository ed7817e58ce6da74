package govern_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// ledger records tool effects and rollbacks.
type ledger struct {
	mu       sync.Mutex
	applied  []string
	reverted []string
}

func (l *ledger) apply(s string) {
	l.mu.Lock()
	l.applied = append(l.applied, s)
	l.mu.Unlock()
}

func (l *ledger) revert(ctx context.Context, a govern.RollbackAction) error {
	l.mu.Lock()
	l.reverted = append(l.reverted, a.Target)
	l.mu.Unlock()
	return nil
}

type agentFixture struct {
	g      *govern.Governor
	j      govern.Journal
	priv   ed25519.PrivateKey
	ledger *ledger
	opts   govern.Options
}

func newAgentFixture(t *testing.T, mutate func(*govern.Options)) *agentFixture {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(nil)
	kr := govern.NewKeyring()
	if _, err := kr.Add("alice", pub); err != nil {
		t.Fatal(err)
	}
	f := &agentFixture{j: govern.NewMemoryJournal(), priv: priv, ledger: &ledger{}}
	// Whatever governors the test builds over the journal, it is audited
	// (chain, §5.4 fields, embedded contract objects) when the test ends.
	t.Cleanup(func() { checkAudit(t, f.j) })
	f.opts = govern.Options{Journal: f.j, Keyring: kr,
		Rollbacks: map[string]govern.RollbackFunc{"ledger.revert": f.ledger.revert}}
	if mutate != nil {
		mutate(&f.opts)
	}
	g, err := govern.New(context.Background(), &f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
	return f
}

// restart builds a new governor over the same journal.
func (f *agentFixture) restart(t *testing.T) {
	t.Helper()
	g, err := govern.New(context.Background(), &f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
}

func (f *agentFixture) approve(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	req, err := f.g.Approval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := govern.SignApproval(f.priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "jti-" + id,
		IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.g.Decide(ctx, id, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
		t.Fatal(err)
	}
}

func lookupTool(name string, calls *atomic.Int32) llm.Tool {
	return govern.Declare(llm.Tool{Name: name, Description: "looks up", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			calls.Add(1)
			return map[string]any{"found": args["q"]}, nil
		}}, govern.Declaration{Tier: govern.ReadOnly})
}

func refundTool(l *ledger, calls *atomic.Int32) llm.Tool {
	return govern.Declare(llm.Tool{Name: "refund", Description: "refunds", Parameters: llm.Schema{"type": "object"},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			calls.Add(1)
			l.apply(args["order"].(string))
			return map[string]any{"refunded": args["order"]}, nil
		}}, govern.Declaration{Tier: govern.WriteHighRisk, Rollback: func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "ledger.revert", Target: c.Args["order"].(string)}, nil
	}})
}

func newGovernedAgent(t *testing.T, g *govern.Governor, m *scripted.Model, o govern.AgentOptions, tools ...llm.Tool) *agent.Agent {
	t.Helper()
	a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref(), Tools: tools},
		Middleware: []agent.Middleware{g.Middleware(&o)}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func call(id, name string, args map[string]any) llm.ToolCall {
	return llm.ToolCall{ToolCallID: id, ToolName: name, Arguments: args}
}

func TestAgentDeliversWithEvidence(t *testing.T) {
	f := newAgentFixture(t, func(o *govern.Options) {
		o.Classes = []govern.TaskClass{{Name: "answer", RequiredEvidence: []govern.EvidenceType{govern.ToolResult}}}
	})
	var n atomic.Int32
	m := scripted.NewT(t, scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "lookup", map[string]any{"q": "x"})}}, scripted.Step{Text: "x found"})
	a := newGovernedAgent(t, f.g, m, govern.AgentOptions{TaskClass: "answer", Identity: govern.Identity{AgentID: "agent:helpdesk", OwnerID: "org:acme", ControlClass: govern.HumanSupervised}}, lookupTool("lookup", &n))
	res, err := a.Generate(context.Background(), llm.Text("find x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	env, ok := govern.EnvelopeOf(res.State)
	if !ok || env.State != govern.Deliver || env.Outcome != govern.Success || env.Identity.AgentID != "agent:helpdesk" {
		t.Fatalf("envelope = %+v, %v", env, ok)
	}
	checkWire(t, env)
	if n.Load() != 1 {
		t.Errorf("lookup ran %d times", n.Load())
	}
}

func TestAgentRepairsThenDelivers(t *testing.T) {
	var verifies atomic.Int32
	f := newAgentFixture(t, func(o *govern.Options) {
		o.Verifiers = []govern.Verifier{govern.CheckVerifier("mentions-source", func(ctx context.Context, in govern.VerifyInput) []govern.Check {
			verifies.Add(1)
			if strings.Contains(string(in.Output), "source") {
				return []govern.Check{{CheckID: "SOURCE", Result: govern.CheckPass}}
			}
			return []govern.Check{{CheckID: "SOURCE", Result: govern.CheckFail, Details: "cite the source"}}
		})}
		o.Classes = []govern.TaskClass{{Name: "answer", RequiredVerifiers: []string{"mentions-source"}}}
	})
	m := scripted.NewT(t, scripted.Step{Text: "it is 42"}, scripted.Step{Text: "it is 42, source: the guide"})
	a := newGovernedAgent(t, f.g, m, govern.AgentOptions{TaskClass: "answer"})
	res, err := a.Generate(context.Background(), llm.Text("what is it?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := govern.EnvelopeOf(res.State)
	if env == nil || env.Outcome != govern.Success || env.Metadata[govern.MetaRepairs] != float64(1) {
		t.Fatalf("envelope = %+v", env)
	}
	checkWire(t, env)
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Messages
	if u, ok := last[len(last)-1].(*llm.UserMessage); !ok || !strings.Contains(u.Text(), "cite the source") {
		t.Errorf("repair prompt not sent: %#v", last[len(last)-1])
	}
	if verifies.Load() != 2 {
		t.Errorf("verifier ran %d times", verifies.Load())
	}
}

func TestAgentFailsSafeAndRollsBack(t *testing.T) {
	f := newAgentFixture(t, func(o *govern.Options) {
		o.MaxRepairs = 1
		o.Verifiers = []govern.Verifier{govern.CheckVerifier("never", func(context.Context, govern.VerifyInput) []govern.Check {
			return []govern.Check{{CheckID: "NEVER", Result: govern.CheckFail}}
		})}
		o.Classes = []govern.TaskClass{{Name: "strict", RequiredVerifiers: []string{"never"}}}
	})
	var n atomic.Int32
	m := scripted.NewT(t,
		scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "refund", map[string]any{"order": "o-1"})}},
		scripted.Step{Text: "refunded"}, scripted.Step{Text: "still refunded"})
	a := newGovernedAgent(t, f.g, m, govern.AgentOptions{TaskClass: "strict"}, refundTool(f.ledger, &n))
	_, err := a.Generate(context.Background(), llm.Text("refund o-1"), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) {
		t.Fatalf("want a pause, got %v", err)
	}
	checkWire(t, ge.Envelope)
	f.approve(t, ge.ApprovalID)
	_, err = govern.ResumeAgent(context.Background(), f.g, a, ge.Envelope.RequestID)
	if !errors.As(err, &ge) || !errors.Is(err, govern.RepairsExhausted) || ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain {
		t.Fatalf("want fail_safe, got %v", err)
	}
	checkWire(t, ge.Envelope)
	if n.Load() != 1 || !slices.Equal(f.ledger.reverted, []string{"o-1"}) {
		t.Errorf("refund ran %d times, reverted %v", n.Load(), f.ledger.reverted)
	}
}

func TestAgentPausesAndResumesAfterRestart(t *testing.T) {
	f := newAgentFixture(t, nil)
	var n, looks atomic.Int32
	steps := []scripted.Step{
		{ToolCalls: []llm.ToolCall{call("c1", "lookup", map[string]any{"q": "o-9"}), call("c2", "refund", map[string]any{"order": "o-9"})}},
		{Text: "refunded o-9"},
	}
	m := scripted.New(steps...)
	a := newGovernedAgent(t, f.g, m, govern.AgentOptions{Name: "support"}, lookupTool("lookup", &looks), refundTool(f.ledger, &n))
	_, err := a.Generate(context.Background(), llm.Text("refund o-9"), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || ge.ApprovalID == "" || ge.Envelope.Outcome != govern.Pending {
		t.Fatalf("want a pause, got %v", err)
	}
	checkWire(t, ge.Envelope)
	if n.Load() != 0 {
		t.Fatalf("refund ran before approval")
	}
	f.restart(t)
	list, err := f.g.Approvals(context.Background(), true)
	if err != nil || len(list) != 1 || list[0].Tool != "refund" || list[0].Requester.AgentID == "" {
		t.Fatalf("approvals = %+v, %v", list, err)
	}
	f.approve(t, list[0].ID)
	a2 := newGovernedAgent(t, f.g, m, govern.AgentOptions{Name: "support"}, lookupTool("lookup", &looks), refundTool(f.ledger, &n))
	res, err := govern.ResumeAgent(context.Background(), f.g, a2, ge.Envelope.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 || looks.Load() != 1 {
		t.Errorf("refund ran %d times, lookup %d times", n.Load(), looks.Load())
	}
	env, _ := govern.EnvelopeOf(res.State)
	if env == nil || env.Outcome != govern.Success || env.RequestID != ge.Envelope.RequestID {
		t.Fatalf("envelope = %+v", env)
	}
	checkWire(t, env)
	// The model saw the real refund result, not the approval placeholder.
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Messages
	tr := last[len(last)-1].(*llm.ToolResultMessage)
	for _, r := range tr.Results {
		if r.IsError {
			t.Errorf("result %s is an error: %v", r.ToolCallID, r.Result)
		}
	}
	if !slices.Equal(f.ledger.applied, []string{"o-9"}) || len(f.ledger.reverted) != 0 {
		t.Errorf("ledger = %+v", f.ledger)
	}
}

func TestAgentUndeclaredToolIsHighRisk(t *testing.T) {
	f := newAgentFixture(t, nil)
	var ran atomic.Int32
	plain := llm.Tool{Name: "shell", Parameters: llm.Schema{"type": "object"}, Run: func(context.Context, map[string]any) (any, error) {
		ran.Add(1)
		return "ok", nil
	}}
	m := scripted.New(scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "shell", map[string]any{})}}, scripted.Step{Text: "done"})
	a := newGovernedAgent(t, f.g, m, govern.AgentOptions{}, plain)
	// Undeclared means write_high_risk; it has no rollback, so it is
	// refused before any approval is asked. The model is told and answers.
	res, err := a.Generate(context.Background(), llm.Text("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if env, ok := govern.EnvelopeOf(res.State); ok {
		checkWire(t, env)
	} else {
		t.Error("no envelope in the result state")
	}
	if ran.Load() != 0 {
		t.Fatalf("undeclared tool ran")
	}
	blocked := 0
	for r, err := range f.j.Records(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind == recordkind.Blocked {
			blocked++
			if !slices.Equal(r.Reasons, []govern.Reason{govern.RollbackRequired}) || !strings.Contains(string(r.Data), `"tier":"write_high_risk"`) {
				t.Errorf("blocked record = %s %v", r.Data, r.Reasons)
			}
		}
	}
	if blocked != 1 {
		t.Errorf("%d blocked records", blocked)
	}
}

func TestAgentChildFailureBlocksParent(t *testing.T) {
	f := newAgentFixture(t, func(o *govern.Options) {
		o.MaxRepairs = -1
		o.Verifiers = []govern.Verifier{govern.CheckVerifier("never", func(context.Context, govern.VerifyInput) []govern.Check {
			return []govern.Check{{CheckID: "NEVER", Result: govern.CheckFail}}
		})}
		o.Classes = []govern.TaskClass{{Name: "strict", RequiredVerifiers: []string{"never"}}}
	})
	child := newGovernedAgent(t, f.g, scripted.New(scripted.Step{Text: "child answer"}), govern.AgentOptions{TaskClass: "strict", Identity: govern.Identity{AgentID: "agent:child"}})
	sub, err := agent.SubagentTool(child, &agent.SubagentOptions{Name: "researcher", Description: "researches", Parameters: llm.Schema{"type": "object", "properties": map[string]any{"input": map[string]any{"type": "string"}}}})
	if err != nil {
		t.Fatal(err)
	}
	sub = govern.Declare(sub, govern.Declaration{Tier: govern.ReadOnly})
	parent := newGovernedAgent(t, f.g, scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "researcher", map[string]any{"input": "look"})}},
		scripted.Step{Text: "parent answer"}), govern.AgentOptions{}, sub)
	_, err = parent.Generate(context.Background(), llm.Text("go"), nil)
	wantReasons(t, err, govern.ChildFailed) // checks its envelope too
}

// toolsetOf is an agent.Toolset offering tools() at each step.
type toolsetOf func() []llm.Tool

func (f toolsetOf) Tools(context.Context, *agent.State) ([]llm.Tool, error) { return f(), nil }

// TestAgentGovernsToolsetTools: tools an agent resolves per step (its
// Toolsets) are governed like its static ones — a tool that appears
// mid-run is gated by the same run (a write_high_risk one pauses it for
// approval) — and ResumeAgent redoes the paused call with the tool the
// agent's Toolset offers for the paused state: it runs exactly once, and
// the one run delivers.
func TestAgentGovernsToolsetTools(t *testing.T) {
	f := newAgentFixture(t, nil)
	var n, looks atomic.Int32
	var stage atomic.Value
	stage.Store("look")
	// In stage "look" the toolset offers lookup, which moves to "act",
	// where it offers refund.
	staged := func(l *ledger) toolsetOf {
		return func() []llm.Tool {
			if stage.Load() == "look" {
				t := lookupTool("lookup", &looks)
				run := t.Run
				t.Run = func(ctx context.Context, args map[string]any) (any, error) {
					stage.Store("act")
					return run(ctx, args)
				}
				return []llm.Tool{t}
			}
			return []llm.Tool{refundTool(l, &n)}
		}
	}
	m := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{call("c1", "lookup", map[string]any{"q": "o-9"})}},
		scripted.Step{ToolCalls: []llm.ToolCall{call("c2", "refund", map[string]any{"order": "o-9"})}},
		scripted.Step{Text: "refunded o-9"},
	)
	newAgent := func() *agent.Agent {
		a, err := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: m.Ref()}, Toolsets: []agent.Toolset{staged(f.ledger)},
			Middleware: []agent.Middleware{f.g.Middleware(&govern.AgentOptions{Name: "support"})}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	_, err := newAgent().Generate(context.Background(), llm.Text("refund o-9"), nil)
	var ge *govern.Error
	if !errors.As(err, &ge) || ge.ApprovalID == "" || ge.Envelope.Outcome != govern.Pending {
		t.Fatalf("want a pause for the refund, got %v", err)
	}
	if n.Load() != 0 || looks.Load() != 1 {
		t.Fatalf("before the approval: refund ran %d times, lookup %d", n.Load(), looks.Load())
	}
	f.restart(t)
	f.approve(t, ge.ApprovalID)
	res, err := govern.ResumeAgent(context.Background(), f.g, newAgent(), ge.Envelope.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 || looks.Load() != 1 {
		t.Errorf("refund ran %d times, lookup %d times, want 1 and 1", n.Load(), looks.Load())
	}
	env, _ := govern.EnvelopeOf(res.State)
	if env == nil || env.Outcome != govern.Success || env.RequestID != ge.Envelope.RequestID {
		t.Fatalf("envelope = %+v", env)
	}
	checkWire(t, env)
	starts := 0
	for r, err := range f.j.Records(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind == recordkind.RunStarted {
			starts++
		}
	}
	if starts != 1 || !slices.Equal(f.ledger.applied, []string{"o-9"}) {
		t.Errorf("%d runs started, ledger %+v: want one run and one refund", starts, f.ledger)
	}
}
