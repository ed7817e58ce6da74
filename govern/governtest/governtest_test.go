package governtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/governtest"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

func TestCheckJournal(t *testing.T) {
	ctx := context.Background()
	j := govern.NewMemoryJournal()
	g, err := govern.New(ctx, &govern.Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.Start(ctx, &govern.RunOptions{Identity: govern.Identity{AgentID: "a", OwnerID: "o", ControlClass: govern.Autonomous}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddEvidence(ctx, govern.Evidence{Source: "test", Payload: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fail(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if err := governtest.CheckJournal(ctx, j); err != nil {
		t.Fatalf("a governor's journal: %v", err)
	}

	// Evidence without its required members, in a well-chained record.
	bad := &govern.Record{Kind: recordkind.Evidence, RequestID: r.RequestID(), TraceID: r.TraceID(),
		Actor: govern.Actor{ID: "x", Kind: govern.ActorSystem}, Outcome: govern.Success, Data: json.RawMessage(`{"source":"x"}`)}
	if err := j.Append(ctx, true, bad); err != nil {
		t.Fatal(err)
	}
	if err := governtest.CheckJournal(ctx, j); err == nil || !strings.Contains(err.Error(), "evidence") {
		t.Fatalf("CheckJournal of a journal with invalid evidence: %v", err)
	}
}

func TestCheckWire(t *testing.T) {
	ft := &fakeT{TB: t}
	governtest.CheckWire(ft, govern.Evidence{Source: "x"})
	if !ft.failed {
		t.Error("CheckWire passed evidence without its required members")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
