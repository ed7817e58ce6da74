package audit_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/google/go-cmp/cmp"
)

// capture is a slog.Handler keeping the records it handles.
type capture struct {
	mu   sync.Mutex
	recs []slog.Record
	fail error
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// attrs flattens a record's attributes (groups as "group.key").
func attrs(r slog.Record) map[string]any {
	m := map[string]any{}
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			for _, g := range v.Group() {
				add(prefix+a.Key+".", g)
			}
			return
		}
		m[prefix+a.Key] = v.Any()
	}
	r.Attrs(func(a slog.Attr) bool { add("", a); return true })
	return m
}

func TestSlogSink(t *testing.T) {
	j := govern.NewMemoryJournal()
	start := journalfixture.Record(recordkind.RunStarted, "6f1c1a3e-3f0e-4d8a-9a57-0b6f0c1d2e3f", `{"secret":"not logged"}`)
	fail := journalfixture.Record(recordkind.Transition, "6f1c1a3e-3f0e-4d8a-9a57-0b6f0c1d2e3f", "")
	fail.From, fail.To, fail.Outcome = govern.Verify, govern.FailSafe, govern.Uncertain
	fail.Reasons = []govern.Reason{govern.VerificationFailed, govern.RepairsExhausted}
	fail.Actor = govern.Actor{ID: "uaicp:recovery", Kind: govern.ActorSystem}
	fail.Node = "node-1"
	if err := j.Append(t.Context(), true, start, fail); err != nil {
		t.Fatal(err)
	}
	h := &capture{}
	if _, err := audit.NewExporter(j, audit.Slog(slog.New(h)), nil).ExportPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(h.recs) != 2 {
		t.Fatalf("%d log records, want 2", len(h.recs))
	}
	for i, want := range []struct {
		level slog.Level
		attrs map[string]any
		time  time.Time
	}{
		{slog.LevelInfo, map[string]any{"seq": uint64(1), "kind": "run_started", "request_id": start.RequestID, "trace_id": start.TraceID,
			"actor.id": "agent:journaltest", "actor.kind": "agent", "outcome": "pending", "reasons": []string{}, "hash": start.Hash}, start.Timestamp.Time},
		{slog.LevelWarn, map[string]any{"seq": uint64(2), "kind": "transition", "request_id": fail.RequestID, "trace_id": fail.TraceID,
			"actor.id": "uaicp:recovery", "actor.kind": "system", "outcome": "uncertain",
			"reasons": []string{"VERIFICATION_FAILED", "REPAIRS_EXHAUSTED"}, "from": "verify", "to": "fail_safe", "node": "node-1", "hash": fail.Hash}, fail.Timestamp.Time},
	} {
		r := h.recs[i]
		if r.Message != "uaicp.journal" || r.Level != want.level || !r.Time.Equal(want.time) {
			t.Errorf("record %d: %q at %v, %v", i, r.Message, r.Level, r.Time)
		}
		if d := cmp.Diff(want.attrs, attrs(r)); d != "" {
			t.Errorf("record %d attributes (-want +got):\n%s", i, d)
		}
	}
	// A failing handler fails the export: the batch is retried.
	h2 := &capture{fail: errors.New("log pipeline down")}
	ex := audit.NewExporter(j, audit.Slog(slog.New(h2)), nil)
	if _, err := ex.ExportPending(t.Context()); err == nil || ex.Exported() != 0 {
		t.Errorf("failing handler: %v, exported %d", err, ex.Exported())
	}
	h2.fail = nil
	if n, err := ex.ExportPending(t.Context()); n != 2 || err != nil {
		t.Errorf("after the handler recovered: %d, %v", n, err)
	}
}
