package journal_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/journal"
)

var update = flag.Bool("update", false, "rewrite testdata/golden_journal.jsonl (by the code as it is)")

// goldenJournal is a journal written by agentry before the direct record
// paths existed (commit e0b0d9e, `go test -run TestGoldenJournal -update`):
// every kind of record a governed run writes, with the Data of each.
const goldenJournal = "testdata/golden_journal.jsonl"

// fixedSource numbers IDs and advances a fake clock by a millisecond at
// each reading, so that most of the golden journal's content is
// reproducible (the approval token's times and the calls' durations are
// real).
type fixedSource struct {
	n   int
	now time.Time
}

func (s *fixedSource) NewID() string {
	s.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
}

func (s *fixedSource) Now() time.Time {
	s.now = s.now.Add(time.Millisecond)
	return s.now
}

// writeGoldenRuns makes, on j, the governed runs of the golden journal:
// one delivered after read, write and approved high-risk calls, evidence
// and verification; one failed safe after a write, with its rollback and
// a refused call.
func writeGoldenRuns(t *testing.T, j govern.Journal) {
	ctx := context.Background()
	restore := ids.Set(&fixedSource{now: time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)})
	defer restore()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	keys := govern.NewKeyring()
	keys.Add("alice", priv.Public().(ed25519.PublicKey))
	undo := map[string]govern.RollbackFunc{"undo": func(context.Context, govern.RollbackAction) error { return nil }}
	g, err := govern.New(ctx, &govern.Options{Journal: j, Keyring: keys, Rollbacks: undo, Node: "node-1",
		Classes: []govern.TaskClass{{Name: "refunds", RequiredEvidence: []govern.EvidenceType{govern.ToolResult}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := govern.Identity{AgentID: "agent:support", OwnerID: "org:acme", UserID: "user <1>", ControlClass: govern.HumanSupervised}
	rollback := func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "undo", Target: c.ID, Payload: map[string]any{"order": c.Args["order"], "note": "<&>"}}, nil
	}
	lookup := govern.ToolSpec{Name: "lookup", Tier: govern.ReadOnly}
	note := govern.ToolSpec{Name: "note", Tier: govern.WriteLowRisk, Rollback: rollback}
	refund := govern.ToolSpec{Name: "refund", Tier: govern.WriteHighRisk, Rollback: rollback}
	result := func(v any) func(context.Context) (any, error) {
		return func(context.Context) (any, error) { return v, nil }
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	run, err := g.Start(ctx, &govern.RunOptions{Identity: id, TaskClass: "refunds"})
	must(err)
	must(run.Advance(ctx, govern.Plan))
	_, err = run.Invoke(ctx, lookup, govern.Call{ID: "c1", Args: map[string]any{"order": "o-1", "n": 1.5, "q": []any{"é", nil, true}}},
		result(map[string]any{"status": "paid", "amount": 30, "html": "<b>&amp;</b>\u2028"}))
	must(err)
	_, err = run.Invoke(ctx, note, govern.Call{ID: "c2", Args: map[string]any{"order": "o-1", "text": "line\nbreak"}}, result("noted"))
	must(err)
	call := govern.Call{ID: "c3", Args: map[string]any{"order": "o-1", "amount": 30}}
	_, err = run.Invoke(ctx, refund, call, result(nil))
	var ge *govern.Error
	if !errors.As(err, &ge) || ge.ApprovalID == "" {
		t.Fatalf("want an approval request, got %v", err)
	}
	req, err := g.Approval(ctx, ge.ApprovalID)
	must(err)
	call.Approval, err = govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience, ID: "jti-1",
		IssuedAt: time.Now().Unix(), Expiry: time.Now().Add(time.Hour).Unix(), Binding: req.Binding()})
	must(err)
	_, err = run.Invoke(ctx, refund, call, result(map[string]any{"refunded": true}))
	must(err)
	_, err = run.AddEvidence(ctx, govern.Evidence{EvidenceType: govern.SourceCitation, Source: "kb", Payload: []byte(`{"url":"https://example.com/?a=1&b=2"}`),
		Extra: map[string]any{"x.rank": 1}})
	must(err)
	_, err = run.Verify(ctx, "refunded o-1")
	must(err)
	_, err = run.Deliver(ctx, "refunded o-1")
	must(err)

	run2, err := g.Start(ctx, &govern.RunOptions{Identity: id})
	must(err)
	_, err = run2.Invoke(ctx, note, govern.Call{ID: "d1", Args: map[string]any{"order": "o-2"}}, result("noted"))
	must(err)
	_, err = run2.Invoke(ctx, note, govern.Call{ID: "d2", Args: map[string]any{"order": "o-2"}}, func(context.Context) (any, error) {
		return nil, errors.New("the tool failed: \"quoted\"")
	})
	if err == nil {
		t.Fatal("want the tool's failure")
	}
	_, err = run2.Invoke(ctx, refund, govern.Call{ID: "d3", Args: map[string]any{"order": "o-2"}, Approval: "not.a.token"}, result(nil))
	if !errors.Is(err, govern.ApprovalInvalid) {
		t.Fatalf("want the token refused, got %v", err)
	}
	_, err = run2.Fail(ctx, "giving up", govern.VerificationFailed)
	must(err)
}

// TestGoldenJournal: a journal written before the direct record paths
// opens and verifies (each record's hash, computed by the direct
// canonical form, is the one written then), and every line is read by
// the direct decoder as encoding/json reads it and written back byte for
// byte. With -update, the golden journal is rewritten by the code as it
// is.
func TestGoldenJournal(t *testing.T) {
	if *update {
		os.Remove(goldenJournal)
		j, err := journal.Open(goldenJournal, nil)
		if err != nil {
			t.Fatal(err)
		}
		writeGoldenRuns(t, j)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(goldenJournal)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	if err := os.WriteFile(path, golden, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	n, err := govern.VerifyChain(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[govern.RecordKind]bool{}
	sc := bufio.NewScanner(bytes.NewReader(golden))
	sc.Buffer(nil, journal.MaxRecordSize)
	lines := 0
	for sc.Scan() {
		line := append(sc.Bytes(), '\n')
		lines++
		fast, ok := journal.DecodeFast(line)
		want, err := journal.DecodeRecordJSON(line)
		if err != nil || !ok || !reflect.DeepEqual(fast, want) {
			t.Fatalf("line %d: decodeFast took it: %t, encoding/json: %v; records differ: %t", lines, ok, err, !reflect.DeepEqual(fast, want))
		}
		again, err := journal.AppendRecord(nil, &fast)
		if err != nil || !bytes.Equal(again, line) {
			t.Errorf("line %d written back differs (%v):\n%s%s", lines, err, line, again)
		}
		kinds[fast.Kind] = true
	}
	if uint64(lines) != n || lines < 20 {
		t.Errorf("%d lines, %d records verified", lines, n)
	}
	t.Logf("%d records of %d kinds", n, len(kinds))
}
